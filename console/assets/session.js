// session.js: one session, live, as a workspace. A header (the
// connection, the current turn, the calls pending and awaiting approval)
// over four tabs — Conversation (conversation.js), Trace (trace.js),
// Registry (registry.js), Events (the render surfaces and the timeline) —
// and a call's page (call.js). It reads the session's snapshot
// (GET /v1/sessions/{id}), then its events from one WebSocket (?after=0:
// the whole log the kernel keeps), resuming from the last seq after a
// dropped connection; every tab is fed from it.
import { h, api, route, fill } from './dom.js';
import { SessionConn } from './conn.js';
import { Timeline } from './timeline.js';
import { Surfaces } from './render.js';
import { ConversationView } from './conversation.js';
import { RegistryView } from './registry.js';
import { TraceView } from './trace.js';
import { CallView } from './call.js';

export const TABS = ['conversation', 'trace', 'registry', 'events'];
const TAB_LABELS = { conversation: 'Conversation', trace: 'Trace', registry: 'Registry', events: 'Events' };

export class SessionView {
  constructor(id, me, palette) {
    this.id = id;
    this.me = me;
    this.palette = palette;
    this.caps = new Map();
    this.snapSeq = 0;
    this.outcomes = new Map();
    this.waiters = new Map();
    this.pending = new Map(); // call id → awaiting_approval | running
    this.hasTurns = false;
    this.ready = false;
    this.tab = null;
    this.timeline = new Timeline(id);
    this.surfaces = new Surfaces(h('div', { class: 'surfaces' }), me);
    this.conversation = new ConversationView(this);
    this.registry = new RegistryView(this);
    this.trace = new TraceView(this);
    this.conversation.onState = () => this.drawStatus();
    this.conversation.onComplete = () => { if (this.tab === 'trace') this.trace.draw(); this.drawStatus(); };
    this.state = h('span', { class: 'conn-state', id: 'conn-state' }, 'connecting');
    this.stats = h('span', { class: 'muted', id: 'conn-stats' });
    this.status = h('span', { class: 'session-status', id: 'session-status' });
    this.tabsEl = h('nav', { class: 'tabs', 'aria-label': 'session views' });
    this.content = h('div', { class: 'session-content' });
    this.deleteErr = h('span', { class: 'error' });
    this.deleteBtn = h('button', { class: 'small danger', type: 'button', onclick: () => this.delete() }, 'delete session');
    this.notice = h('p', { class: 'session-deleted', id: 'session-deleted', role: 'status', hidden: true });
    this.head = h('header', { class: 'session-head' },
      h('h1', {}, 'Session ', h('code', {}, id), ' ', this.state),
      h('p', { class: 'session-line' }, this.status, ' ', this.deleteBtn, ' ', this.deleteErr),
      this.notice,
      this.tabsEl);
    this.el = h('div', { class: 'session-view' });
    this.ctx = {
      conn: null,
      capabilities: () => [...this.caps.values()],
      outcome: (callId) => this.outcome(callId),
    };
  }

  async start() {
    const conv = this.conversation.fetch(); // in parallel with the snapshot
    try {
      const snap = await api('GET', `/v1/sessions/${encodeURIComponent(this.id)}`);
      this.snapSeq = snap.seq;
      this.hasTurns = !!snap.turn;
      for (const c of snap.capabilities) this.caps.set(c.name, c);
    } catch (e) {
      fill(this.el, h('h1', {}, 'Session ', this.id), h('p', { class: 'error' }, e.status === 404 ? 'No such session.' : 'Cannot read the session: ' + e.message));
      this.failed = true;
      return;
    }
    this.palette.attach(this.ctx);
    this.conversation.build(await conv);
    this.ready = true;
    if (this.main) this.show(this.main, this.wantTab, this.callId);
    // The events (the whole log, replayed) once the first view is
    // drawn: they queue in the conversation until its history is.
    requestAnimationFrame(() => setTimeout(() => { if (!this.stopped) this.connect(0); }, 0));
  }

  connect(after) {
    if (this.conn) this.conn.close();
    const conn = new SessionConn(this.id, { after });
    this.conn = conn;
    this.ctx.conn = conn;
    conn.addEventListener('state', (e) => {
      this.state.textContent = e.detail;
      this.state.className = 'conn-state ' + e.detail.split(':')[0];
      this.drawStats();
      // Closed for good (the session deleted, or the connection refused):
      // no turn runs, no call is pending any more.
      if (e.detail.startsWith('closed')) {
        this.pending.clear();
        this.conversation.end(e.detail.replace(/^closed:\s*/, ''), conn.deleted);
        if (conn.deleted) this.markDeleted();
        this.drawStatus();
      }
    });
    conn.addEventListener('snapshot', (e) => {
      const m = e.detail.msg;
      this.caps.clear();
      for (const c of m.capabilities) this.caps.set(c.name, c);
      this.pending.clear();
      for (const c of m.pendingCalls || []) this.pending.set(c.callId, c.state);
      this.snapSeq = m.seq;
      this.timeline.add(e.detail);
      this.conversation.onSnapshot(m); // the events up to it are gone: what they said, from the history
      this.drawRegistry();
      this.drawStatus();
    });
    conn.addEventListener('event', (e) => this.onEvent(e.detail));
    conn.start();
  }

  onEvent(f) {
    const m = f.msg;
    this.timeline.add(f);
    const seq = Number(f.seq);
    if (seq > this.snapSeq) {
      if (m.type === 'capability_register') { for (const c of m.capabilities) this.caps.set(c.name, c); this.drawRegistry(); }
      if (m.type === 'capability_deregister') { for (const n of m.names) this.caps.delete(n); this.drawRegistry(); }
    }
    switch (m.type) {
      case 'approval_requested': this.pending.set(m.callId, 'awaiting_approval'); break;
      case 'approval_decided': if (m.decision === 'approved') this.pending.set(m.callId, 'running'); break;
      case 'capability_invoked': this.pending.set(m.callId, 'running'); break;
      case 'turn_started': this.hasTurns = true; break;
    }
    if (m.type === 'render_invoked') this.surfaces.show(this.caps.get(m.capabilityName), m, seq);
    if (m.type === 'capability_outcome') {
      this.pending.delete(m.callId);
      this.surfaces.ended(m.callId, m.outcome);
      this.outcomes.set(m.callId, m.outcome);
      const w = this.waiters.get(m.callId);
      if (w) { this.waiters.delete(m.callId); w(m.outcome); }
    }
    this.conversation.onEvent(f);
    if (this.callView && m.callId === this.callView.callId) this.callView.refresh();
    if (this.tab === 'trace' && (m.type === 'conversation_message' || m.type === 'turn_ended' || m.type === 'capability_outcome')) this.redrawTrace = true;
    this.drawStatus();
  }

  // delete deletes the session (DELETE /v1/sessions/{id}) and goes back
  // to the sessions list; one already deleted is shown so.
  async delete() {
    if (!confirm(`Delete session ${this.id}? Its pending calls end cancelled.`)) return;
    this.deleteBtn.disabled = true;
    fill(this.deleteErr);
    try {
      await api('DELETE', `/v1/sessions/${encodeURIComponent(this.id)}`);
      location.hash = '#/sessions';
    } catch (e) {
      if (e.status === 404) { this.markDeleted(); return; }
      fill(this.deleteErr, 'delete failed: ' + e.message);
      this.deleteBtn.disabled = false;
    }
  }

  // markDeleted: the session is gone. What it showed stays; every control
  // that acts on it goes (delete, Try it, replay from seq, the palette's
  // forms, a call's approval; the message box says so itself), and the
  // header says why.
  markDeleted() {
    if (this.deleted) return;
    this.deleted = true;
    this.ctx.deleted = true;
    this.deleteBtn.remove();
    this.deleteErr.remove();
    fill(this.notice, 'This session was deleted: nothing can be sent, approved or invoked in it any more. What it showed stays here until you leave. ',
      h('a', { href: route('sessions') }, '← sessions'));
    this.notice.hidden = false;
    if (this.replayBtn) this.replayBtn.disabled = true;
    this.drawRegistry();
    if (this.callView) this.callView.draw();
    this.palette.ended(this.ctx);
  }

  outcome(callId) {
    if (this.outcomes.has(callId)) return Promise.resolve(this.outcomes.get(callId));
    return new Promise((resolve) => this.waiters.set(callId, resolve));
  }

  drawStats() {
    const c = this.conn;
    if (!c) return;
    this.stats.textContent = `last seq ${c.lastSeq} · reconnects ${c.reconnects} · gaps ${c.gaps} · duplicates ${c.duplicates}`;
  }

  // drawStatus redraws the header's line (and the connection's numbers,
  // and the trace when told), once a frame: a replay of thousands of
  // events draws it once.
  drawStatus() {
    if (this.statusPending) return;
    this.statusPending = requestAnimationFrame(() => {
      this.statusPending = 0;
      this.drawStatusNow();
      this.drawStats();
      if (this.redrawTrace && this.tab === 'trace') this.trace.draw();
      this.redrawTrace = false;
    });
  }

  // drawStatusNow is the header's line: the turn, pending calls, approvals.
  drawStatusNow() {
    const cv = this.conversation;
    let awaiting = 0;
    for (const s of this.pending.values()) if (s === 'awaiting_approval') awaiting++;
    const parts = [];
    if (cv.turn) parts.push(cv.running ? h('span', { class: 'turn-running' }, h('span', { class: 'spinner' }), ' turn ', String(cv.turn), ' running') : 'last turn ' + cv.turn);
    else parts.push('no turn yet');
    parts.push(' · ', String(this.pending.size), this.pending.size === 1 ? ' pending call' : ' pending calls');
    parts.push(' · ', awaiting ? h('a', { href: route('approvals'), class: 'awaiting' }, String(awaiting), ' awaiting approval') : '0 awaiting approval');
    fill(this.status, ...parts);
    this.status.dataset.running = cv.running ? 'true' : 'false';
    this.status.dataset.pending = String(this.pending.size);
    this.status.dataset.awaiting = String(awaiting);
  }

  drawRegistry() {
    if (this.tab === 'registry') this.registry.draw();
  }

  defaultTab() {
    return this.hasTurns || this.conversation.messages || this.me.model ? 'conversation' : 'events';
  }

  // show draws the session page at tab, or a call's page when callId is
  // set.
  show(main, tab, callId) {
    this.main = main;
    this.wantTab = tab;
    this.callId = callId;
    fill(main, this.el);
    if (this.failed) return;
    if (callId) {
      this.tab = null;
      this.callView = new CallView(this, callId);
      fill(this.el, h('p', {}, h('a', { href: route('s', this.id) }, '← session ', this.id)), this.callView.el);
      this.callView.refresh();
      return;
    }
    this.callView = null;
    if (!this.ready) { fill(this.el, this.head, h('p', { class: 'muted' }, 'Loading…')); return; }
    const was = this.tab;
    this.tab = TABS.includes(tab) ? tab : this.defaultTab();
    fill(this.tabsEl, ...TABS.map((t) => h('a', { href: route('s', this.id, t), class: 'tab' + (t === this.tab ? ' sel' : ''), 'aria-current': t === this.tab ? 'page' : null, dataset: { tab: t } }, TAB_LABELS[t])));
    fill(this.el, this.head, this.content);
    this.el.dataset.tab = this.tab;
    switch (this.tab) {
      case 'conversation':
        this.conversation.attach(this.content);
        break;
      case 'trace':
        fill(this.content, this.trace.el);
        this.trace.draw();
        break;
      case 'registry':
        fill(this.content, this.registry.el);
        this.registry.draw();
        break;
      default:
        fill(this.content, this.eventsTab());
        this.timeline.draw();
    }
    // A tab opened anew starts at its top (the Trace's newest turn), not
    // where the previous one was scrolled; the conversation at its end.
    if (was !== this.tab && this.tab !== 'conversation') window.scrollTo(0, 0);
    this.drawStatus();
  }

  eventsTab() {
    const replayIn = h('input', { type: 'number', min: '0', placeholder: 'seq', class: 'replay-seq', 'aria-label': 'replay from seq' });
    this.replayBtn = h('button', { class: 'small replay', type: 'button', disabled: !!this.deleted, onclick: () => { this.timeline.reset(); this.connect(Math.max(0, Number(replayIn.value) || 0)); } }, 'replay from seq');
    return h('div', { class: 'events-tab' },
      h('p', {}, this.stats, ' ', h('span', { class: 'muted' }, '· Ctrl-K: command palette · '), replayIn, this.replayBtn),
      h('section', {}, h('h2', {}, 'Renders'), this.surfaces.el),
      this.timeline.el);
  }

  stop() {
    this.stopped = true;
    this.conversation.stop();
    this.palette.detach(this.ctx);
    if (this.conn) this.conn.close();
  }
}
