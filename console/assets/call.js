// call.js: a call's page (#/s/<session>/call/<callId>): input, approval
// request and decision (with decidedBy and feedback), dispatch, render,
// outcome, and the kernel's timings between them
// (GET /v1/sessions/{id}/calls/{callId}). It reads the events its session
// view holds; once the session is deleted it says so and offers no
// decision.
import { h, api, json, fill } from './dom.js';
import { sendFrame } from './conn.js';

const POINTS = { call_started: 'started', approval_requested: 'approval requested', approval_decided: 'decided', call_dispatched: 'dispatched', call_finished: 'finished' };

// CallView is a call's page: input, approval request and decision (with
// decidedBy and feedback), dispatch, render, outcome, and the kernel's
// timings between them (GET /v1/sessions/{id}/calls/{callId}).
export class CallView {
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
      try { await sendFrame(this.sv.id, msg); } catch (e) { fill(err, (e.code || 'error') + ': ' + e.message); }
    };
    fill(this.el, 
      h('h1', {}, 'Call ', h('code', {}, this.callId), ' ', h('span', { class: 'muted' }, name || '')),
      this.sv.deleted ? h('p', { class: 'session-deleted' }, 'This session was deleted: this call can no longer be decided or changed.') : null,
      h('section', {}, h('h2', {}, 'Input'), h('pre', { class: 'call-input' }, input === undefined ? '(not seen)' : json(input))),
      h('section', {}, h('h2', {}, 'Approval'),
        req ? h('div', {},
          h('p', {}, 'requested (seq ', req.seq, ') by invoker ', req.msg.invoker, req.msg.inputDigest ? [' · digest ', h('code', {}, req.msg.inputDigest)] : null),
          dec ? h('p', { class: 'decision' }, 'decision (seq ', dec.seq, '): ', h('strong', {}, dec.msg.decision), ' · decidedBy ', h('code', {}, dec.msg.decidedBy),
            dec.msg.decider ? [' · authenticated as ', h('code', {}, dec.msg.decider.side + (dec.msg.decider.name ? ' ' + dec.msg.decider.name : ''))] : null)
            : t && t.decision ? h('p', { class: 'decision' }, 'decision: ', h('strong', {}, t.decision), ' · decidedBy ', h('code', {}, t.decidedBy || '')) : null,
          dec && dec.msg.feedback ? h('p', { class: 'feedback-shown' }, 'feedback: ', dec.msg.feedback)
            : out && out.msg.outcome && out.msg.outcome.error && out.msg.outcome.error.code === 'rejected' ? h('p', { class: 'feedback-shown' }, 'feedback: ', out.msg.outcome.error.message) : null,
          pending && !this.sv.deleted ? h('p', {}, fb, ' ', h('button', { class: 'small primary', onclick: () => decide('approved') }, 'Approve'), ' ',
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
