// app.js: sign-in, navigation and the hash router. Views: #/sessions,
// #/s/<id>[/conversation|trace|registry|events], #/s/<id>/call/<callId>,
// #/approvals. The operator token is posted once to /console/signin and
// exchanged for an HttpOnly cookie and a CSRF token (dom.js); this code
// never stores the operator token. The Approvals badge is live on every
// page (one approvals feed per sign-in). The session's views (session.js
// and what it imports, markdown-it among them) are loaded right after the
// first view, not before it.
import { h, api, setCsrf, fill, clearDrafts, onSignedIn } from './dom.js';
import { sessionsView } from './sessions.js';
import { approvalsView, ApprovalsFeed } from './approvals.js';
import { Palette } from './palette.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const palette = new Palette(document.getElementById('overlay'));
let me = null;
let feed = null;
let stop = () => {};
let sessionView = null;
const inboxCount = h('span', { class: 'badge', id: 'inbox-count', hidden: true, 'aria-label': 'pending approvals' });

// A hook for the browser tests and for measuring: the open session view.
window.brainConsole = { session: () => sessionView, feed: () => feed };

function signOutLocal() {
  me = null;
  setCsrf('');
  stop();
  stop = () => {};
  if (feed) { feed.close(); feed = null; }
}

function signInView(message) {
  signOutLocal();
  const token = h('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: 'operator token', 'aria-label': 'operator token', id: 'token' });
  const err = h('p', { class: 'error', id: 'signin-error', role: 'alert' }, message || '');
  const form = h('form', { class: 'signin', method: 'post', onsubmit: async (e) => {
    e.preventDefault();
    try {
      const r = await api('POST', '/console/signin', { token: token.value });
      token.value = '';
      setCsrf(r.csrf);
      await boot();
    } catch (x) {
      fill(err, x.message);
    }
  } },
  h('h1', {}, 'Sign in'),
  h('p', {}, 'Paste the operator token that ', h('code', {}, 'brain serve'), ' printed at its first start (saved in ', h('code', {}, 'tokens.json'), ').'),
  h('div', { class: 'signin-row' }, token, h('button', { type: 'submit', class: 'primary' }, 'Sign in')), err);
  nav.replaceChildren();
  who.replaceChildren();
  fill(main, form);
  token.focus();
  if (!performance.getEntriesByName('brain:first-view').length) performance.mark('brain:first-view');
}

async function boot() {
  try {
    me = await api('GET', '/console/me');
  } catch (e) {
    if (e.status === 401) { signInView(); return; }
    fill(main, h('p', { class: 'error' }, 'The console cannot reach the kernel: ', e.message));
    return;
  }
  if (!feed) {
    feed = new ApprovalsFeed().start();
    feed.addEventListener('change', () => { const n = feed.items.size; inboxCount.hidden = n === 0; inboxCount.textContent = String(n); });
  }
  fill(nav, h('a', { href: '#/sessions' }, 'Sessions'), h('a', { href: '#/approvals', id: 'nav-approvals' }, 'Approvals', inboxCount),
    h('button', { class: 'small', type: 'button', onclick: () => palette.open(), title: 'command palette (Ctrl-K)' }, 'Ctrl-K'));
  // The side, then the name — once when the name is the side's default.
  fill(who, h('span', { class: 'who-name' }, me.name === 'operator' ? null : 'operator ', h('strong', { id: 'operator-name' }, me.name)), ' ',
    h('button', { class: 'small', type: 'button', onclick: async () => { try { await api('POST', '/console/signout'); } catch { /* signed out anyway */ } clearDrafts(); location.hash = ''; signInView('Signed out.'); } }, 'sign out'));
  route();
  // The session's views (and markdown-it, most of the console's bytes)
  // load after the first view, while the browser is idle; the markdown
  // parser runs once then too, since its first runs are its slowest (the
  // engine compiles it as it goes): a session opens without paying for
  // either.
  const warm = () => import('./markdown.js')
    .then((md) => md.markdownNode('warm **up**: `code`, [a link](https://example.com), a list:\n\n- one\n- two\n\n> quote'))
    .catch(() => { /* loaded again when a session opens */ });
  requestAnimationFrame(() => setTimeout(() => {
    sessionModule().catch(() => { /* loaded again when a session opens */ });
    if (window.requestIdleCallback) requestIdleCallback(warm, { timeout: 2000 }); else setTimeout(warm, 200);
  }, 0));
}

let sessionMod = null;
// sessionModule loads session.js (and what it imports) once.
function sessionModule() {
  if (!sessionMod) sessionMod = import('./session.js').catch((e) => { sessionMod = null; throw e; });
  return sessionMod;
}

async function route() {
  if (!me) return;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map((p) => { try { return decodeURIComponent(p); } catch { return ''; } });
  if (parts[0] === 's' && parts[1]) {
    const callId = parts[2] === 'call' ? parts[3] : null;
    let SessionView;
    try { ({ SessionView } = await sessionModule()); } catch (e) {
      main.replaceChildren(h('p', { class: 'error' }, 'The console cannot load its session view: ', String(e.message || e)));
      return;
    }
    const now = location.hash.replace(/^#\/?/, '').split('/').map((p) => { try { return decodeURIComponent(p); } catch { return ''; } });
    if (now[0] !== 's' || now[1] !== parts[1] || !me) return; // navigated elsewhere meanwhile
    if (!sessionView || sessionView.id !== parts[1]) {
      stop();
      sessionView = new SessionView(parts[1], me, palette);
      stop = () => { sessionView.stop(); sessionView = null; };
      sessionView.start();
    }
    sessionView.show(main, callId ? null : parts[2], callId);
    return;
  }
  stop();
  stop = () => {};
  if (parts[0] === 'approvals') {
    stop = approvalsView(main, me, feed);
  } else {
    stop = sessionsView(main);
  }
  if (!performance.getEntriesByName('brain:first-view').length) performance.mark('brain:first-view');
}

window.addEventListener('hashchange', () => { route(); });
// Any 401 of the console's API means the sign-in ended (signed out
// elsewhere, the token revoked): back to the sign-in form.
window.addEventListener('brain:signed-out', () => { if (me) signInView('Your sign-in ended: sign in again.'); });
// A tab left on the sign-in form goes on when another tab signs in.
onSignedIn(() => { if (!me) boot(); });
window.addEventListener('unhandledrejection', (e) => { console.error(e.reason); });
boot();
