// dom.js: the one way text reaches the page. h() builds elements and puts
// every child string in a text node (never HTML); attributes are set by
// name, and no attribute this console sets takes a peer-provided URL
// except the sandboxed iframe's src (render.js) and a markdown link's
// http(s) href (markdown.js).

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
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
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
