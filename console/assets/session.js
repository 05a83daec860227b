// session.js: one session, live. The registry as a table, render surfaces,
// the event timeline, and a call's detail page. It reads the session's
// snapshot (GET /v1/sessions/{id}), then its events from the WebSocket
// (?after=0: the whole log the kernel keeps), resuming from the last seq
// after a dropped connection.
import { h, api, json, originLabel, isUserInvokable, route, short } from './dom.js';
import { SessionConn, sendFrame } from './conn.js';
import { Timeline } from './timeline.js';
import { Surfaces } from './render.js';

export class SessionView {
  constructor(id, me, palette) {
    this.id = id;
    this.me = me;
    this.palette = palette;
    this.caps = new Map();
    this.snapSeq = 0;
    this.outcomes = new Map();
    this.waiters = new Map();
    this.timeline = new Timeline(id);
    this.surfaces = new Surfaces(h('div', { class: 'surfaces' }), me);
    this.state = h('span', { class: 'conn-state', id: 'conn-state' }, 'connecting');
    this.stats = h('span', { class: 'muted', id: 'conn-stats' });
    this.regBody = h('tbody');
    this.el = h('div', { class: 'session-view' });
    this.ctx = {
      conn: null,
      capabilities: () => [...this.caps.values()],
      outcome: (callId) => this.outcome(callId),
    };
  }

  async start() {
    try {
      const snap = await api('GET', `/v1/sessions/${encodeURIComponent(this.id)}`);
      this.snapSeq = snap.seq;
      for (const c of snap.capabilities) this.caps.set(c.name, c);
      this.drawRegistry();
    } catch (e) {
      this.el.replaceChildren(h('h1', {}, 'Session ', this.id), h('p', { class: 'error' }, e.status === 404 ? 'No such session.' : 'Cannot read the session: ' + e.message));
      return;
    }
    this.connect(0);
    this.palette.attach(this.ctx);
  }

  connect(after) {
    if (this.conn) this.conn.close();
    const conn = new SessionConn(this.id, { after });
    this.conn = conn;
    this.ctx.conn = conn;
    conn.addEventListener('state', (e) => { this.state.textContent = e.detail; this.state.className = 'conn-state ' + e.detail.split(':')[0]; this.drawStats(); });
    conn.addEventListener('snapshot', (e) => {
      const m = e.detail.msg;
      this.caps.clear();
      for (const c of m.capabilities) this.caps.set(c.name, c);
      this.snapSeq = m.seq;
      this.timeline.add(e.detail);
      this.drawRegistry();
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
    if (m.type === 'render_invoked') this.surfaces.show(this.caps.get(m.capabilityName), m, seq);
    if (m.type === 'capability_outcome') {
      this.surfaces.ended(m.callId, m.outcome);
      this.outcomes.set(m.callId, m.outcome);
      const w = this.waiters.get(m.callId);
      if (w) { this.waiters.delete(m.callId); w(m.outcome); }
    }
    if (this.callView && m.callId === this.callView.callId) this.callView.refresh();
    this.drawStats();
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

  drawRegistry() {
    const yes = (b) => (b ? 'yes' : '');
    const rows = [...this.caps.values()].sort((a, b) => a.name.localeCompare(b.name)).map((c) => h('tr', { dataset: { name: c.name } },
      h('td', {}, h('code', {}, c.name)),
      h('td', {}, c.displayName || ''),
      h('td', {}, originLabel(c.origin)),
      h('td', {}, c.side),
      h('td', {}, Array.isArray(c.audience) ? c.audience.join(', ') || '(none)' : 'llm, user (default)'),
      h('td', {}, c.kind || ''),
      h('td', {}, c.scope || 'session'),
      h('td', {}, yes(c.requiresApproval)),
      h('td', {}, yes(c.fireAndForget)),
      h('td', {}, c.render ? c.render.source.kind + ' → ' + (c.render.targets || []).join(', ') : ''),
      h('td', { class: 'num' }, c.callTimeoutMs != null ? c.callTimeoutMs + ' ms' : 'default'),
      h('td', {}, yes(isUserInvokable(c))),
      h('td', { class: 'desc' }, short(c.description || '', 80))));
    this.regBody.replaceChildren(...rows);
  }

  // show draws the session page, or a call's page when callId is set.
  show(main, callId) {
    main.replaceChildren(this.el);
    if (callId) {
      this.callView = new CallView(this, callId);
      this.el.replaceChildren(h('p', {}, h('a', { href: route('s', this.id) }, '← session ', this.id)), this.callView.el);
      this.callView.refresh();
      return;
    }
    this.callView = null;
    const replayIn = h('input', { type: 'number', min: '0', placeholder: 'seq', class: 'replay-seq', 'aria-label': 'replay from seq' });
    this.el.replaceChildren(
      h('h1', {}, 'Session ', h('code', {}, this.id), ' ', this.state),
      h('p', {}, this.stats, ' ',
        h('span', { class: 'muted' }, '· Ctrl-K: command palette · '),
        replayIn, h('button', { class: 'small', type: 'button', onclick: () => { this.timeline.reset(); this.connect(Math.max(0, Number(replayIn.value) || 0)); } }, 'replay from seq'), ' ',
        h('button', { class: 'small danger', type: 'button', onclick: async () => {
          if (!confirm(`Delete session ${this.id}? Its pending calls end cancelled.`)) return;
          await api('DELETE', `/v1/sessions/${encodeURIComponent(this.id)}`);
          location.hash = '#/sessions';
        } }, 'delete session')),
      h('section', {}, h('h2', {}, 'Registry'),
        h('table', { class: 'grid', id: 'registry' },
          h('thead', {}, h('tr', {}, ['name', 'displayName', 'origin', 'side', 'audience', 'kind', 'scope', 'approval', 'fire-and-forget', 'render', 'timeout', 'user-invokable', 'description'].map((t) => h('th', {}, t)))),
          this.regBody)),
      h('section', {}, h('h2', {}, 'Renders'), this.surfaces.el),
      this.timeline.el);
    this.drawRegistry();
    this.timeline.draw();
  }

  stop() {
    this.palette.detach(this.ctx);
    if (this.conn) this.conn.close();
  }
}

const POINTS = { call_started: 'started', approval_requested: 'approval requested', approval_decided: 'decided', call_dispatched: 'dispatched', call_finished: 'finished' };

// CallView is a call's page: input, approval request and decision (with
// decidedBy and feedback), dispatch, render, outcome, and the kernel's
// timings between them (GET /v1/sessions/{id}/calls/{callId}).
class CallView {
  constructor(sv, callId) {
    this.sv = sv;
    this.callId = callId;
    this.el = h('div', { class: 'call-view' });
    this.times = null;
    this.loading = false;
  }

  async refresh() {
    this.draw();
    if (this.loading) return;
    this.loading = true;
    try {
      this.times = await api('GET', `/v1/sessions/${encodeURIComponent(this.sv.id)}/calls/${encodeURIComponent(this.callId)}`);
    } catch { this.times = null; }
    this.loading = false;
    this.draw();
    // The kernel records a call's finish just after it emits the outcome:
    // an outcome seen before the timings have it is read again, a few times.
    const ended = this.sv.timeline.all.some((e) => e.callId === this.callId && e.type === 'capability_outcome');
    const recorded = this.times && this.times.points.some((p) => p.kind === 'call_finished');
    if (ended && this.times && !recorded && (this.retries = (this.retries || 0) + 1) <= 3) {
      setTimeout(() => this.refresh(), 100 * this.retries);
    }
  }

  draw() {
    const evs = this.sv.timeline.all.filter((e) => e.callId === this.callId);
    const by = (t) => evs.find((e) => e.type === t);
    const req = by('approval_requested');
    const inv = by('capability_invoked');
    const rens = evs.filter((e) => e.type === 'render_invoked');
    const ren = rens.filter((e) => !e.msg.partial).pop() || rens.pop(); // the final props, else the latest partial
    const partials = rens.filter((e) => e.msg.partial).length;
    const out = by('capability_outcome');
    const dec = by('approval_decided');
    const name = (req || inv || out || {}).msg ? (req || inv || out).msg.name : (this.times && this.times.name);
    const input = (req && req.msg.input) ?? (inv && inv.msg.input);
    const t = this.times;
    const pts = t ? t.points : [];
    const rows = pts.map((p, i) => h('tr', {}, h('td', {}, POINTS[p.kind] || p.kind), h('td', {}, p.time),
      h('td', { class: 'num' }, i ? fmtMs(Date.parse(p.time) - Date.parse(pts[i - 1].time)) : ''),
      h('td', { class: 'num' }, i ? fmtMs(Date.parse(p.time) - Date.parse(pts[0].time)) : '')));
    const pending = req && !out && !inv && !dec;
    const fb = h('input', { type: 'text', placeholder: 'feedback', class: 'feedback' });
    const err = h('span', { class: 'error' });
    const decide = async (decision) => {
      const msg = { type: 'capability_approve', callId: this.callId, decision, decidedBy: this.sv.me.name };
      if (fb.value) msg.feedback = fb.value;
      const last = evs.filter((e) => e.type === 'approval_requested').pop();
      if (last && last.msg.inputDigest) msg.inputDigest = last.msg.inputDigest;
      try { await sendFrame(this.sv.id, msg); } catch (e) { err.textContent = (e.code || 'error') + ': ' + e.message; }
    };
    this.el.replaceChildren(
      h('h1', {}, 'Call ', h('code', {}, this.callId), ' ', h('span', { class: 'muted' }, name || '')),
      h('section', {}, h('h2', {}, 'Input'), h('pre', { class: 'call-input' }, input === undefined ? '(not seen)' : json(input))),
      h('section', {}, h('h2', {}, 'Approval'),
        req ? h('div', {},
          h('p', {}, 'requested (seq ', req.seq, ') by invoker ', req.msg.invoker, req.msg.inputDigest ? [' · digest ', h('code', {}, req.msg.inputDigest)] : null),
          dec ? h('p', { class: 'decision' }, 'decision (seq ', dec.seq, '): ', h('strong', {}, dec.msg.decision), ' · decidedBy ', h('code', {}, dec.msg.decidedBy),
            dec.msg.decider ? [' · authenticated as ', h('code', {}, dec.msg.decider.side + (dec.msg.decider.name ? ' ' + dec.msg.decider.name : ''))] : null)
            : t && t.decision ? h('p', { class: 'decision' }, 'decision: ', h('strong', {}, t.decision), ' · decidedBy ', h('code', {}, t.decidedBy || '')) : null,
          dec && dec.msg.feedback ? h('p', { class: 'feedback-shown' }, 'feedback: ', dec.msg.feedback)
            : out && out.msg.outcome && out.msg.outcome.error && out.msg.outcome.error.code === 'rejected' ? h('p', { class: 'feedback-shown' }, 'feedback: ', out.msg.outcome.error.message) : null,
          pending ? h('p', {}, fb, ' ', h('button', { class: 'small primary', onclick: () => decide('approved') }, 'Approve'), ' ',
            h('button', { class: 'small danger', onclick: () => decide('rejected') }, 'Reject'), ' ', err) : null)
          : h('p', { class: 'muted' }, 'no approval required (or not in the log)')),
      h('section', {}, h('h2', {}, 'Dispatch'), inv ? h('p', {}, 'capability_invoked at seq ', inv.seq) : h('p', { class: 'muted' }, 'not dispatched')),
      ren ? h('section', {}, h('h2', {}, 'Render'), h('p', {}, 'render_invoked at seq ', ren.seq, ren.msg.partial ? ' (partial: the final props never came)' : '',
        partials && !ren.msg.partial ? ` · ${partials} partial render_invoked before it (props streamed)` : ''), h('pre', {}, json(ren.msg.props))) : null,
      h('section', {}, h('h2', {}, 'Outcome'), out ? h('pre', { class: 'call-outcome' }, json(out.msg.outcome)) : h('p', { class: 'muted' }, 'pending')),
      h('section', {}, h('h2', {}, 'Timings (kernel)'), rows.length
        ? h('table', { class: 'grid timings' }, h('thead', {}, h('tr', {}, ['point', 'time', 'since previous', 'since start'].map((x) => h('th', {}, x)))), h('tbody', {}, rows))
        : h('p', { class: 'muted' }, 'not recorded (the call is older than this kernel process, or not among its last 1024 calls)')),
      h('section', {}, h('h2', {}, 'Events'), h('pre', {}, evs.map((e) => `seq ${e.seq} ${e.type}\n`).join(''))));
  }
}

function fmtMs(ms) {
  if (!(ms >= 0)) return '';
  return ms < 1 ? ms.toFixed(3) + ' ms' : ms < 1000 ? ms.toFixed(1) + ' ms' : (ms / 1000).toFixed(2) + ' s';
}
