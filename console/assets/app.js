// app.js: sign-in, navigation and the hash router. Views: #/sessions,
// #/s/<id>, #/s/<id>/call/<callId>, #/approvals. The operator token is
// posted once to /console/signin and exchanged for an HttpOnly cookie;
// this code never stores it.
import { h, api, setCsrf } from './dom.js';
import { sessionsView } from './sessions.js';
import { approvalsView } from './approvals.js';
import { SessionView } from './session.js';
import { Palette } from './palette.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const palette = new Palette(document.getElementById('overlay'));
let me = null;
let stop = () => {};
let sessionView = null;
const inboxCount = h('span', { class: 'badge', id: 'inbox-count', hidden: true });

// A hook for the browser tests and for measuring: the open session view.
window.brainConsole = { session: () => sessionView };

function signInView(message) {
  const token = h('input', { type: 'password', name: 'token', autocomplete: 'off', placeholder: 'operator token', 'aria-label': 'operator token', id: 'token' });
  const err = h('p', { class: 'error', id: 'signin-error' }, message || '');
  const form = h('form', { class: 'signin', method: 'post', onsubmit: async (e) => {
    e.preventDefault();
    try {
      const r = await api('POST', '/console/signin', { token: token.value });
      token.value = '';
      setCsrf(r.csrf);
      await boot();
    } catch (x) {
      err.textContent = x.message;
    }
  } },
  h('h1', {}, 'Sign in'),
  h('p', {}, 'Paste the operator token that ', h('code', {}, 'brain serve'), ' printed at its first start (saved in ', h('code', {}, 'tokens.json'), ').'),
  token, ' ', h('button', { type: 'submit', class: 'primary' }, 'Sign in'), err);
  nav.replaceChildren();
  who.replaceChildren();
  main.replaceChildren(form);
  token.focus();
  if (!performance.getEntriesByName('brain:first-view').length) performance.mark('brain:first-view');
}

async function boot() {
  try {
    me = await api('GET', '/console/me');
  } catch (e) {
    if (e.status === 401) { signInView(); return; }
    main.replaceChildren(h('p', { class: 'error' }, 'The console cannot reach the kernel: ', e.message));
    return;
  }
  nav.replaceChildren(h('a', { href: '#/sessions' }, 'Sessions'), ' ', h('a', { href: '#/approvals' }, 'Approvals ', inboxCount), ' ',
    h('button', { class: 'small', type: 'button', onclick: () => palette.open() }, 'Ctrl-K'));
  who.replaceChildren('operator ', h('strong', { id: 'operator-name' }, me.name), ' ',
    h('button', { class: 'small', type: 'button', onclick: async () => { await api('POST', '/console/signout'); setCsrf(''); location.hash = ''; signInView('Signed out.'); } }, 'sign out'));
  route();
}

function route() {
  if (!me) return;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map((p) => { try { return decodeURIComponent(p); } catch { return ''; } });
  if (parts[0] === 's' && parts[1]) {
    const callId = parts[2] === 'call' ? parts[3] : null;
    if (!sessionView || sessionView.id !== parts[1]) {
      stop();
      sessionView = new SessionView(parts[1], me, palette);
      stop = () => { sessionView.stop(); sessionView = null; };
      sessionView.start();
    }
    sessionView.show(main, callId);
    return;
  }
  stop();
  stop = () => {};
  if (parts[0] === 'approvals') {
    stop = approvalsView(main, me, (n) => { inboxCount.hidden = n === 0; inboxCount.textContent = String(n); });
  } else {
    stop = sessionsView(main);
  }
  if (!performance.getEntriesByName('brain:first-view').length) performance.mark('brain:first-view');
}

window.addEventListener('hashchange', route);
window.addEventListener('unhandledrejection', (e) => { console.error(e.reason); });
boot();
