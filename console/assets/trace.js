// trace.js: the session's turns as a trace. Each turn with its reason;
// its model steps with their duration and the token usage the provider
// reported (journaled with each assistant message); each step's tool calls
// with their durations and outcomes, linked to their call pages. It reads
// what the conversation view built, and redraws when shown or told.
import { h, route, fill } from './dom.js';
import { fmtMs, REASONS, endError } from './conversation.js';

export class TraceView {
  constructor(sv) {
    this.sv = sv;
    this.body = h('div', { class: 'trace-turns' });
    this.el = h('section', { class: 'trace', id: 'trace' }, h('h2', {}, 'Turns'), this.body);
  }

  draw() {
    const cv = this.sv.conversation;
    const turns = [...cv.turns.values()].sort((a, b) => b.n - a.n);
    if (!turns.length) { fill(this.body, h('p', { class: 'muted' }, 'No turns yet.')); return; }
    fill(this.body, ...turns.map((t) => this.turn(t, cv)));
  }

  turn(t, cv) {
    let inTok = 0, outTok = 0, ms = 0, calls = 0, waited = 0;
    const steps = t.steps.map((s, i) => {
      const u = s.msg.usage;
      if (u) { inTok += u.inputTokens; outTok += u.outputTokens; }
      ms += s.msg.durationMs || 0;
      calls += s.cards.length;
      return h('li', { class: 'trace-step', tabindex: '0', dataset: { step: s.n } },
        h('div', {}, h('strong', {}, 'step ', String(s.n)), ' · model ', s.msg.durationMs ? fmtMs(s.msg.durationMs) : '—',
          u ? [' · ', h('span', { class: 'usage' }, `${u.inputTokens} in / ${u.outputTokens} out`), u.cachedInputTokens ? ` (${u.cachedInputTokens} cached)` : ''] : ' · no usage reported',
          s.cards.length ? '' : ' · ' + this.stepEnd(t, i)),
        s.cards.length ? h('ul', { class: 'trace-calls' }, s.cards.map((c) => {
          const took = c.final && c.final.durationMs;
          // The time a person took to decide is not the tool's.
          const wait = took && c.waitMs !== undefined ? Math.min(took, c.waitMs) : 0;
          if (took) { ms += took - wait; waited += wait; }
          return h('li', { class: 'trace-call', dataset: { state: c.state } },
            c.callId ? h('a', { href: route('s', cv.sv.id, 'call', c.callId) }, h('code', {}, c.tc.name)) : h('code', {}, c.tc.name),
            ' · ', took ? fmtMs(took - wait) : c.state === 'pending' || c.state === 'running' || c.state === 'awaiting_approval' ? c.state.replace('_', ' ') : '—',
            wait ? [' · ', h('span', { class: 'approval-wait' }, fmtMs(wait), ' awaiting approval')] : took && c.askedApproval() ? ' (approval wait included)' : '',
            ' · ', h('span', { class: 'state-' + c.state }, c.stateEl.textContent));
        })) : null);
    });
    const running = cv.running && cv.turn === t.n;
    return h('section', { class: 'trace-turn', dataset: { turn: t.n } },
      h('h3', {}, 'turn ', String(t.n), ' · ', running ? h('span', { class: 'conn-state reconnecting' }, 'running') : (t.reason || '—'),
        endError(t.reason, t.error) ? h('span', { class: 'muted' }, ' · ', endError(t.reason, t.error)) : null),
      h('p', { class: 'muted' }, `${plural(t.steps.length, 'step')} · ${plural(calls, 'tool call')} · ${fmtMs(ms) || '0 ms'} in the model and tools${waited ? ` · ${fmtMs(waited)} awaiting approval` : ''} · ${inTok} in / ${outTok} out tokens`,
        t.startedBy ? ' · started by ' + t.startedBy : ''),
      h('ol', { class: 'trace-steps' }, steps));
  }

  // stepEnd labels a step that made no call: the model answered, or —
  // the last step of a turn that ended otherwise (its text kept when it
  // was cancelled or failed mid-stream) — how the turn ended.
  stepEnd(t, i) {
    if (i < t.steps.length - 1 || !t.reason || t.reason === 'completed') return 'answered';
    return REASONS[t.reason] || t.reason;
  }
}

function plural(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }
