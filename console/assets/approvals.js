// approvals.js: the approvals inbox across sessions, live from
// GET /v1/approvals/ws. Each decision is sent to the call's session as
// capability_approve (POST /v1/sessions/{id}/frames) with decidedBy = the
// operator's name and the digest the request carries; a decision made
// anywhere else removes the row as soon as the stream says so.
import { h, age, short, json, route, socket } from './dom.js';
import { sendFrame } from './conn.js';

export function approvalsView(main, me, onCount) {
  const rows = new Map(); // session/callId → row
  const tbody = h('tbody');
  const state = h('span', { class: 'conn-state' }, 'connecting');
  const empty = h('p', { class: 'muted', id: 'inbox-empty' }, 'No pending approvals.');
  main.replaceChildren(h('h1', {}, 'Approvals ', state), empty,
    h('table', { class: 'grid', id: 'inbox' },
      h('thead', {}, h('tr', {}, ['session', 'capability', 'invoker', 'input', 'age', 'decision'].map((t) => h('th', {}, t)))), tbody));
  const key = (s, c) => s + '/' + c;
  const count = () => { empty.hidden = rows.size > 0; onCount(rows.size); };
  const add = (a) => {
    const k = key(a.session, a.callId);
    if (rows.has(k)) rows.get(k).remove(); // a new request for the call (re-registered): its digest changed
    const feedback = h('input', { type: 'text', class: 'feedback', placeholder: 'feedback (sent to the model)', 'aria-label': 'feedback' });
    const err = h('div', { class: 'error' });
    const decide = async (decision) => {
      const msg = { type: 'capability_approve', callId: a.callId, decision, decidedBy: me.name };
      if (feedback.value) msg.feedback = feedback.value;
      if (a.inputDigest) msg.inputDigest = a.inputDigest;
      for (const b of row.querySelectorAll('button')) b.disabled = true;
      try {
        await sendFrame(a.session, msg);
        remove(a.session, a.callId);
      } catch (e) {
        err.textContent = (e.code || 'error') + ': ' + e.message;
        for (const b of row.querySelectorAll('button')) b.disabled = false;
      }
    };
    const since = a.since;
    const ageCell = h('td', { class: 'age' }, since ? age(since) : 'since restart');
    const row = h('tr', { dataset: { session: a.session, call: a.callId } },
      h('td', {}, h('a', { href: route('s', a.session) }, a.session)),
      h('td', {}, h('a', { href: route('s', a.session, 'call', a.callId) }, a.name)),
      h('td', {}, a.invoker),
      h('td', {}, h('details', {}, h('summary', {}, short(a.input, 60)), h('pre', {}, json(a.input)))),
      ageCell,
      h('td', {}, feedback, ' ',
        h('button', { class: 'small primary approve', onclick: () => decide('approved') }, 'Approve'), ' ',
        h('button', { class: 'small danger reject', onclick: () => decide('rejected') }, 'Reject'), err));
    row.tick = () => { if (since) ageCell.textContent = age(since); };
    rows.set(k, row);
    tbody.append(row);
    count();
  };
  const remove = (s, c) => {
    const k = key(s, c);
    const row = rows.get(k);
    if (row) { row.remove(); rows.delete(k); count(); }
  };
  let ws = null;
  let closed = false;
  let backoff = 200;
  const open = () => {
    ws = socket('/v1/approvals/ws');
    ws.onopen = () => { state.textContent = 'live'; backoff = 200; };
    ws.onmessage = (m) => {
      let ev; try { ev = JSON.parse(m.data); } catch { return; }
      if (ev.type === 'approvals') {
        const keep = new Set(ev.approvals.map((a) => key(a.session, a.callId)));
        for (const [k, row] of rows) if (!keep.has(k)) { row.remove(); rows.delete(k); }
        ev.approvals.forEach(add);
        count();
      } else if (ev.type === 'approval_added') add(ev.approval);
      else if (ev.type === 'approval_removed') remove(ev.session, ev.callId);
    };
    ws.onclose = () => {
      if (closed) return;
      state.textContent = 'reconnecting';
      setTimeout(() => { if (!closed) open(); }, backoff);
      backoff = Math.min(backoff * 2, 5000);
    };
  };
  open();
  const ticker = setInterval(() => { for (const r of rows.values()) r.tick(); }, 1000);
  return () => { closed = true; clearInterval(ticker); if (ws) ws.close(1000); };
}
