// trace.js: the session's turns as a trace. Each turn with its reason;
// its model steps with their duration and the token usage the provider
// reported (journaled with each assistant message); each step's tool calls
// with their durations and outcomes, linked to their call pages. It reads
// what the conversation view built, and redraws when shown or told.
import { h, route, fill } from './dom.js';
import { fmtMs } from './conversation.js';

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
    let inTok = 0, outTok = 0, ms = 0, calls = 0;
    const steps = t.steps.map((s) => {
      const u = s.msg.usage;
      if (u) { inTok += u.inputTokens; outTok += u.outputTokens; }
      ms += s.msg.durationMs || 0;
      calls += s.cards.length;
      return h('li', { class: 'trace-step', tabindex: '0', dataset: { step: s.n } },
        h('div', {}, h('strong', {}, 'step ', String(s.n)), ' · model ', s.msg.durationMs ? fmtMs(s.msg.durationMs) : '—',
          u ? [' · ', h('span', { class: 'usage' }, `${u.inputTokens} in / ${u.outputTokens} out`), u.cachedInputTokens ? ` (${u.cachedInputTokens} cached)` : ''] : ' · no usage reported',
          s.cards.length ? '' : ' · answered'),
        s.cards.length ? h('ul', { class: 'trace-calls' }, s.cards.map((c) => {
          const took = c.final && c.final.durationMs;
          if (took) ms += took;
          return h('li', { class: 'trace-call', dataset: { state: c.state } },
            c.callId ? h('a', { href: route('s', cv.sv.id, 'call', c.callId) }, h('code', {}, c.tc.name)) : h('code', {}, c.tc.name),
            ' · ', took ? fmtMs(took) : c.state === 'pending' || c.state === 'running' || c.state === 'awaiting_approval' ? c.state.replace('_', ' ') : '—',
            ' · ', h('span', { class: 'state-' + c.state }, c.stateEl.textContent));
        })) : null);
    });
    const running = cv.running && cv.turn === t.n;
    return h('section', { class: 'trace-turn', dataset: { turn: t.n } },
      h('h3', {}, 'turn ', String(t.n), ' · ', running ? h('span', { class: 'conn-state reconnecting' }, 'running') : (t.reason || '—'),
        t.error ? h('span', { class: 'muted' }, ' · ', t.error) : null),
      h('p', { class: 'muted' }, `${plural(t.steps.length, 'step')} · ${plural(calls, 'tool call')} · ${fmtMs(ms) || '0 ms'} in the model and tools · ${inTok} in / ${outTok} out tokens`,
        t.startedBy ? ' · started by ' + t.startedBy : ''),
      h('ol', { class: 'trace-steps' }, steps));
  }
}

function plural(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }
