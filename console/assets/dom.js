// dom.js: the one way text reaches the page. h() builds elements and puts
// every child string in a text node (never HTML), with each hidden
// character shown (textNode, below); attributes are set by name, and no
// attribute this console sets takes a peer-provided URL except the
// sandboxed iframe's src (render.js) and a markdown link's http(s) href
// (markdown.js).

// HIDDEN matches the characters that change what text looks like without
// being seen: the bidi controls (U+202A–U+202E, U+2066–U+2069, U+200E,
// U+200F, U+061C) and every other format character (Unicode's Cf:
// zero-width spaces and joiners, U+FEFF, soft hyphens, tags…), the C0 and
// C1 controls but tab and line breaks, the line and paragraph separators,
// and the Hangul fillers that draw as blank letters. A peer could make
// "\u202Etxt.seton\u202C" read "notes.txt", or a name run into the one
// beside it (docs/console.md, "Hostile content").
const HIDDEN = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\p{Cf}\u2028\u2029\u115F\u1160\u3164\uFFA0]/u;
const HIDDEN_ALL = new RegExp(HIDDEN.source, 'gu');

// escapeOf is a hidden character as it is shown: \u202E, \u{E0041}.
function escapeOf(ch) {
  const cp = ch.codePointAt(0);
  const hex = cp.toString(16).toUpperCase();
  return cp > 0xFFFF ? '\\u{' + hex + '}' : '\\u' + hex.padStart(4, '0');
}

// visible returns s with each hidden character written as its escape, for
// text set where no element can go (a row of the timeline, a placeholder).
export function visible(s) {
  s = String(s);
  return HIDDEN.test(s) ? s.replace(HIDDEN_ALL, escapeOf) : s;
}

// textNode is s as the page shows it: a text node, or, when s holds hidden
// characters, a fragment where each is its escape in a marked
// <span class="hidden-char"> (so that it is seen, and acts on nothing).
export function textNode(s) {
  s = String(s);
  if (!HIDDEN.test(s)) return document.createTextNode(s);
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of s.matchAll(HIDDEN_ALL)) {
    if (m.index > last) frag.append(document.createTextNode(s.slice(last, m.index)));
    const cp = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    const mark = document.createElement('span');
    mark.className = 'hidden-char';
    mark.title = 'U+' + cp + ': a hidden character (a bidi control, zero-width or control character), shown escaped';
    mark.textContent = escapeOf(m[0]);
    frag.append(mark);
    last = m.index + m[0].length;
  }
  if (last < s.length) frag.append(document.createTextNode(s.slice(last)));
  return frag;
}

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') Object.assign(el.style, v); // CSSOM: allowed by the CSP, unlike a style attribute
    else if (k === 'value' || k === 'checked' || k === 'selected') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of [children].flat(Infinity)) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : textNode(c));
  }
  return el;
}

export function clear(el) { el.replaceChildren(); return el; }

// fill replaces el's children with children, as h() puts them: strings
// as text nodes, nested arrays flattened, null and false left out
// (replaceChildren itself would write "null").
export function fill(el, ...children) { el.replaceChildren(); return append(el, children); }

// The sign-in's CSRF token (docs/console.md, "Signing in"): given once by
// POST /console/signin and kept in this origin's localStorage, which no
// other port of this host can read, unlike the cookie, which the browser
// sends to all of them. Every API request carries it in X-Brain-Csrf, a
// WebSocket as its "brain.csrf.<token>" subprotocol.
const CSRF_KEY = 'brain.csrf';
export function csrf() { try { return localStorage.getItem(CSRF_KEY) || ''; } catch { return ''; } }
export function setCsrf(v) { try { if (v) localStorage.setItem(CSRF_KEY, v); else localStorage.removeItem(CSRF_KEY); } catch { /* storage off */ } }
// onSignedIn calls f when another tab of this console signs in (its CSRF
// token lands in the shared localStorage: a storage event here).
export function onSignedIn(f) { window.addEventListener('storage', (e) => { if (e.key === CSRF_KEY && e.newValue) f(); }); }

// The drafts: what a person typed in a session's message box and has not
// sent, kept in this tab's sessionStorage under brain.draft.<session id>
// at every keystroke, so that no end of the sign-in (a 401 from any
// request, which replaces the page with the sign-in form), reload or
// crash of the view loses it. Sent text is removed; signing out with the
// button removes every draft (the next person at this tab sees none).
const DRAFT = 'brain.draft.';
export function draft(id) { try { return sessionStorage.getItem(DRAFT + id) || ''; } catch { return ''; } }
export function setDraft(id, text) {
  try { if (text) sessionStorage.setItem(DRAFT + id, text); else sessionStorage.removeItem(DRAFT + id); } catch { /* storage off or full */ }
}
export function clearDrafts() {
  try {
    for (let i = sessionStorage.length - 1; i >= 0; i--) {
      const k = sessionStorage.key(i);
      if (k && k.startsWith(DRAFT)) sessionStorage.removeItem(k);
    }
  } catch { /* storage off */ }
}

// socket opens a WebSocket to path on the console with the CSRF token.
export function socket(path) {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return new WebSocket(`${proto}//${location.host}${path}`, ['brain.console', 'brain.csrf.' + csrf()]);
}

// api calls the kernel's HTTP API with the sign-in cookie and its CSRF
// token; errors carry the kernel's code.
export async function api(method, path, body) {
  const opts = { method, headers: { 'X-Brain-Csrf': csrf() }, credentials: 'same-origin' };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!r.ok) {
    if (r.status === 401 && path.startsWith('/v1/')) window.dispatchEvent(new Event('brain:signed-out'));
    const e = new Error((data && data.message) || r.statusText);
    e.code = data && data.code;
    e.status = r.status;
    e.data = data;
    throw e;
  }
  return data;
}

// json pretty-prints a value for a <pre>.
export function json(v) {
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}

// short is a one-line, bounded rendering of a value.
export function short(v, n = 120) {
  let s;
  try { s = typeof v === 'string' ? v : JSON.stringify(v); } catch { s = String(v); }
  if (s === undefined) s = '';
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

export function age(iso) {
  if (!iso) return '—';
  const ms = Date.now() - Date.parse(iso);
  if (!(ms >= 0)) return '—';
  if (ms < 1000) return 'now';
  if (ms < 60e3) return Math.floor(ms / 1e3) + 's';
  if (ms < 3600e3) return Math.floor(ms / 60e3) + 'm';
  if (ms < 86400e3) return Math.floor(ms / 3600e3) + 'h';
  return Math.floor(ms / 86400e3) + 'd';
}

export function route(...parts) {
  return '#/' + parts.map(encodeURIComponent).join('/');
}

// isUserInvokable is the spec's rule (capabilities.d.ts): audience when
// set, then the deprecated userInvokable, then the per-origin default.
export function isUserInvokable(c) {
  if (Array.isArray(c.audience)) return c.audience.includes('user');
  if (typeof c.userInvokable === 'boolean') return c.userInvokable;
  const kind = c.origin && c.origin.kind;
  if (kind === 'mcp') return c.kind === 'effect';
  if (kind === 'skill') return c.kind === 'effect' || c.kind === 'render';
  return false;
}

export function originLabel(o) {
  if (!o) return '';
  const id = o.appId || o.flowId || o.skillId || o.serverId || o.connectorId || o.mountId;
  return id ? o.kind + ':' + id : o.kind;
}
