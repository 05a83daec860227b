// sessions.js: the sessions list (GET /v1/sessions), refreshed every 2 s
// while shown; a new session (POST /v1/sessions) opens an empty
// conversation; delete from here (DELETE /v1/sessions/{id}).
import { h, api, age, route, fill } from './dom.js';

export function sessionsView(main) {
  const tbody = h('tbody');
  const msg = h('p', { class: 'muted', role: 'status' });
  const table = h('table', { class: 'grid cards-narrow', id: 'sessions' },
    h('thead', {}, h('tr', {}, ['session', 'peers', 'last seq', 'pending approvals', 'running calls', 'last activity', ''].map((t) => h('th', {}, t)))),
    tbody);
  const create = h('button', { type: 'button', class: 'primary new-session', onclick: async () => {
    create.disabled = true;
    try {
      const s = await api('POST', '/v1/sessions', {});
      location.hash = route('s', s.id, 'conversation');
    } catch (e) {
      fill(msg, 'cannot create a session: ' + e.message);
    }
    create.disabled = false;
  } }, 'New session');
  fill(main, h('div', { class: 'page-head' }, h('h1', {}, 'Sessions'), create), msg, table);
  let timer = 0;
  let stopped = false;
  const load = async () => {
    try {
      const { sessions } = await api('GET', '/v1/sessions');
      msg.textContent = sessions.length ? '' : 'No sessions yet: start one with "New session", or a client, app or MCP host creates one by connecting.';
      if (!performance.getEntriesByName('brain:sessions-loaded').length) performance.mark('brain:sessions-loaded');
      fill(tbody, ...sessions.map((s) => h('tr', { dataset: { session: s.id } },
        h('td', { class: 'sid', dataset: { label: 'session' } }, h('a', { href: route('s', s.id) }, s.id), s.live ? null : h('span', { class: 'badge muted' }, 'hibernated')),
        h('td', { dataset: { label: 'peers' } }, Object.entries(s.peers || {}).filter(([, n]) => n > 0).map(([side, n]) => h('span', { class: 'badge' }, side, ' ', n))),
        h('td', { class: 'num', dataset: { label: 'last seq' } }, s.live ? s.lastSeq : '—'),
        h('td', { class: 'num', dataset: { label: 'pending approvals' } }, s.pendingApprovals ? h('a', { href: route('approvals') }, s.pendingApprovals) : '0'),
        h('td', { class: 'num', dataset: { label: 'running calls' } }, s.runningCalls),
        h('td', { dataset: { label: 'last activity' } }, age(s.lastActivity)),
        h('td', {}, h('button', { class: 'small danger', onclick: async () => {
          if (!confirm(`Delete session ${s.id}? Its pending calls end cancelled.`)) return;
          try { await api('DELETE', `/v1/sessions/${encodeURIComponent(s.id)}`); load(); } catch (e) { msg.textContent = 'delete failed: ' + e.message; }
        } }, 'delete')))));
    } catch (e) {
      msg.textContent = 'cannot list sessions: ' + e.message;
    }
    if (!stopped) timer = setTimeout(load, 2000);
  };
  load();
  return () => { stopped = true; clearTimeout(timer); };
}
