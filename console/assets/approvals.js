// approvals.js: the pending approvals across sessions, live from
// GET /v1/approvals/ws. One feed per sign-in keeps the list (the header's
// Approvals badge counts it on every page); the inbox view draws it. Each
// decision is sent to the call's session as capability_approve
// (POST /v1/sessions/{id}/frames) with decidedBy = the operator's name and
// the digest the request carries; a decision made anywhere else removes
// the row as soon as the stream says so.
import { h, age, short, json, route, socket, fill } from './dom.js';
import { sendFrame } from './conn.js';

const key = (s, c) => s + '/' + c;

export class ApprovalsFeed extends EventTarget {
  constructor() {
    super();
    this.items = new Map(); // session/callId → approval
    this.state = 'connecting';
    this.closed = false;
    this.backoff = 200;
    this.ws = null;
  }

  start() { this.open(); return this; }

  emit() { this.dispatchEvent(new Event('change')); }

  open() {
    const ws = socket('/v1/approvals/ws');
    this.ws = ws;
    ws.onopen = () => { this.state = 'live'; this.backoff = 200; this.emit(); };
    ws.onmessage = (m) => {
      let ev; try { ev = JSON.parse(m.data); } catch { return; }
      if (ev.type === 'approvals') {
        this.items = new Map(ev.approvals.map((a) => [key(a.session, a.callId), a]));
      } else if (ev.type === 'approval_added') {
        this.items.set(key(ev.approval.session, ev.approval.callId), ev.approval);
      } else if (ev.type === 'approval_removed') {
        this.items.delete(key(ev.session, ev.callId));
      } else return;
      this.emit();
    };
    ws.onclose = () => {
      if (this.closed || this.ws !== ws) return;
      this.state = 'reconnecting';
      this.emit();
      setTimeout(() => { if (!this.closed) this.open(); }, this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    };
  }

  remove(session, callId) {
    if (this.items.delete(key(session, callId))) this.emit();
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close(1000);
  }
}

// approvalsView draws the inbox from feed until the returned stop is
// called.
export function approvalsView(main, me, feed) {
  const rows = new Map(); // session/callId → row
  const tbody = h('tbody');
  const state = h('span', { class: 'conn-state' }, feed.state);
  const empty = h('p', { class: 'muted', id: 'inbox-empty' }, 'No pending approvals.');
  fill(main, h('h1', {}, 'Approvals ', state), empty,
    h('table', { class: 'grid cards-narrow', id: 'inbox' },
      h('thead', {}, h('tr', {}, ['session', 'capability', 'invoker', 'input', 'age', 'decision'].map((t) => h('th', {}, t)))), tbody));
  const row = (a) => {
    const feedback = h('input', { type: 'text', class: 'feedback', placeholder: 'feedback (sent to the model)', 'aria-label': 'feedback' });
    const err = h('div', { class: 'error' });
    let tr;
    const decide = async (decision) => {
      const msg = { type: 'capability_approve', callId: a.callId, decision, decidedBy: me.name };
      if (feedback.value) msg.feedback = feedback.value;
      if (a.inputDigest) msg.inputDigest = a.inputDigest;
      for (const b of tr.querySelectorAll('button')) b.disabled = true;
      try {
        await sendFrame(a.session, msg);
        feed.remove(a.session, a.callId);
      } catch (e) {
        fill(err, (e.code || 'error') + ': ' + e.message);
        for (const b of tr.querySelectorAll('button')) b.disabled = false;
      }
    };
    const since = a.since;
    const ageCell = h('td', { class: 'age', dataset: { label: 'age' } }, since ? age(since) : 'since restart');
    tr = h('tr', { dataset: { session: a.session, call: a.callId } },
      h('td', { dataset: { label: 'session' } }, h('a', { href: route('s', a.session) }, a.session)),
      h('td', { dataset: { label: 'capability' } }, h('a', { href: route('s', a.session, 'call', a.callId) }, a.name)),
      h('td', { dataset: { label: 'invoker' } }, a.invoker),
      h('td', { dataset: { label: 'input' } }, h('details', {}, h('summary', {}, short(a.input, 60)), h('pre', {}, json(a.input)))),
      ageCell,
      h('td', { class: 'decide', dataset: { label: 'decision' } }, feedback, ' ',
        h('button', { class: 'small primary approve', onclick: () => decide('approved') }, 'Approve'), ' ',
        h('button', { class: 'small danger reject', onclick: () => decide('rejected') }, 'Reject'), err));
    tr.approval = a;
    tr.tick = () => { if (since) ageCell.textContent = age(since); };
    return tr;
  };
  const sync = () => {
    state.textContent = feed.state;
    for (const [k, tr] of rows) {
      const a = feed.items.get(k);
      // A new request for the call (re-registered) carries another digest.
      if (!a || a.inputDigest !== tr.approval.inputDigest) { tr.remove(); rows.delete(k); }
    }
    for (const [k, a] of feed.items) {
      if (rows.has(k)) continue;
      const tr = row(a);
      rows.set(k, tr);
      tbody.append(tr);
    }
    empty.hidden = rows.size > 0;
  };
  feed.addEventListener('change', sync);
  sync();
  const ticker = setInterval(() => { for (const r of rows.values()) r.tick(); }, 1000);
  return () => { clearInterval(ticker); feed.removeEventListener('change', sync); };
}
