// conversation.js: a session's conversation, as a person reads it. User
// and assistant messages (the assistant's as markdown, streamed in place
// from assistant_delta while the model writes), each tool call the model
// made as a card — its input, a spinner while pending, the approval to
// decide inline, a render whose target is the chat drawn in it, then the
// outcome or the error — and each turn's end with its reason. Below it,
// the message box that starts a turn (turn_start) and cancels one
// (turn_cancel).
//
// History comes from GET /v1/sessions/{id}/conversation, events from the
// session's WebSocket (the SessionView's, from ?after=0, resuming after a
// drop). A message is added once: conversation_message events up to the
// history's last seq are already in it. The history also carries each
// turn's start and end and the text the running step has streamed so far
// (up to its seq: later deltas are appended), so a session whose early
// events are gone from the kernel's log (a snapshot instead of a replay)
// shows the same conversation: on a snapshot past the history, what came
// between is read again (?after=), and the calls the snapshot lists as
// pending are bound to their cards, an approval decidable inline. The kernel's events do not say
// which tool call a session call serves: a call's first event is bound to
// the earliest open tool call, in the conversation's order (made before
// it, not yet answered), with the same capability and the same input — a
// replayed call never takes a later turn's card; render props streamed before the
// assistant's message are bound to its first call of that capability. A
// call nobody made through the model (a palette, an MCP caller) binds to
// nothing, and stays in the events.
import { h, api, json, short, route, fill, visible, draft, setDraft } from './dom.js';
import { markdownNode } from './markdown.js';
import { createSurface } from './render.js';
import { sendFrame } from './conn.js';

// FIRST is about how many of the history's last messages the first view
// draws (more than a screen holds), CHUNK how many earlier ones are drawn
// a task after it; DRAIN how many queued events are applied a task.
const FIRST = 16;
const CHUNK = 40;
const DRAIN = 400;

// A scroll event within INTENT_MS of the reader's wheel, touch, key or
// press on the scroll bar is the reader's (a smooth scroll lasts a few
// hundred ms); the keys that scroll the page:
const INTENT_MS = 1000;
const SCROLL_KEYS = new Set(['PageUp', 'PageDown', 'ArrowUp', 'ArrowDown', 'Home', 'End', ' ']);

// atEnd: the page is scrolled to (within a line of) its end.
function atEnd() {
  const d = document.documentElement;
  return window.scrollY + window.innerHeight >= d.scrollHeight - 40;
}

// editable: keys typed there edit text, they do not scroll the page.
function editable(el) {
  return !!el && (el.isContentEditable || el.tagName === 'TEXTAREA' || el.tagName === 'INPUT' || el.tagName === 'SELECT');
}

export const REASONS = {
  completed: 'completed', step_limit: 'stopped at the step limit', cancelled: 'cancelled',
  error: 'failed', interrupted: 'interrupted by a kernel restart',
};

// canon is a JSON value's text with object keys sorted, for comparing a
// tool call's input with a call event's.
function canon(v) {
  if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
  if (v && typeof v === 'object') return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
  return JSON.stringify(v);
}

function chatTarget(cap) {
  return !!(cap && cap.render && Array.isArray(cap.render.targets) && cap.render.targets.includes('chat'));
}

export class ConversationView {
  constructor(sv) {
    this.sv = sv; // the SessionView: id, me, caps, conn, approvals
    this.list = h('div', { class: 'conv-list', role: 'log', 'aria-label': 'conversation' });
    this.empty = h('p', { class: 'muted conv-empty' }, 'No messages yet.');
    this.turns = new Map();      // turn → {el, body, end, step}
    this.open = [];              // tool cards not yet bound to a call, nor answered
    this.byCall = new Map();     // session call id → card
    this.byToolCall = new Map(); // turn/tool call id → card
    this.provisional = new Map(); // call id → a render card drawn before its assistant message
    this.replayed = [];          // partial render_invoked of the history's calls, awaiting their message
    this.streaming = null;       // {turn, el, text, cards} of the text streaming in
    this.held = null;            // {turn, text}: replayed deltas the history may not hold (unsaved)
    this.loaded = false;
    this.buffer = [];
    this.histSeq = 0;            // the last seq of the history read
    this.readSeq = 0;            // the seq the history was read as of
    this.records = new Map();    // turn → {startedBy, reason, error} of the history
    this.streamTurn = 0;         // the turn and last seq of the streamed text
    this.streamSeq = 0;          //   the history carried (its deltas are in it)
    this.lastSeq = 0;            // the last event applied
    this.snapSeq = 0;            // the last snapshot's seq
    this.turn = 0;
    this.running = false;
    this.messages = 0;
    this.follow = true;
    this.box = this.makeBox();
    this.el = h('section', { class: 'conversation', id: 'conversation' }, this.list, this.box.el);
    // The page scrolls (a phone's own way), the message box sticks to
    // the bottom; the view follows new content while the reader is at
    // the end. Only the reader decides that: a scroll event is read only
    // right after the reader scrolled (wheel, touch, scroll keys, the
    // scroll bar), never one that growth caused (a streamed piece, a
    // render's frame, a turn laid out as it came into view), which could
    // arrive with the end already further down; scrolling up leaves the
    // end at once. While following, every change of the conversation's
    // size (a ResizeObserver) and of the window's keeps the end in view.
    this.intent = -Infinity; // when the reader last scrolled
    this.onScroll = () => {
      if (!this.el.isConnected || performance.now() - this.intent > INTENT_MS) return;
      this.follow = atEnd();
    };
    this.onReader = (e) => {
      if (!this.el.isConnected) return;
      if (e.type === 'keydown') {
        if (!SCROLL_KEYS.has(e.key) || editable(e.target)) return;
        if ((e.key === 'PageUp' || e.key === 'ArrowUp' || e.key === 'Home' || (e.key === ' ' && e.shiftKey)) && window.scrollY > 0) this.follow = false;
      }
      if (e.type === 'pointerdown' && !(e.clientX >= document.documentElement.clientWidth || e.target === document.documentElement)) return; // not the scroll bar
      if (e.type === 'wheel' && e.deltaY < 0 && window.scrollY > 0) this.follow = false;
      this.intent = performance.now();
    };
    this.readerEvents = ['wheel', 'touchmove', 'keydown', 'pointerdown'];
    window.addEventListener('scroll', this.onScroll, { passive: true });
    for (const ev of this.readerEvents) window.addEventListener(ev, this.onReader, { passive: true });
    this.onResize = () => { if (this.follow) this.scrollEnd(true); };
    window.addEventListener('resize', this.onResize, { passive: true });
    this.sizes = new ResizeObserver(this.onResize);
    this.sizes.observe(this.list);
    this.sizes.observe(this.box.el);
  }

  // fetch reads the history (GET /v1/sessions/{id}/conversation); the
  // session view calls it with the snapshot's, and build once both came.
  fetch() {
    return api('GET', `/v1/sessions/${encodeURIComponent(this.sv.id)}/conversation`).catch((e) => ({ error: e }));
  }

  // build draws the history, then applies the events that came meanwhile.
  // The newest messages first (the first view shows the end), then the
  // earlier ones a chunk a frame, put before them, then the events: a
  // conversation of any length shows its end as fast as a short one.
  build(hist) {
    if (hist && hist.error) {
      this.list.append(h('p', { class: 'error' }, 'cannot read the conversation: ', hist.error.message, ' (showing what the events carry)'));
      hist = null;
    }
    const msgs = (hist && hist.messages) || [];
    if (hist) {
      this.turn = hist.turn || 0;
      this.running = !!hist.running;
      this.readSeq = hist.seq || 0;
      for (const e of msgs) this.histSeq = Math.max(this.histSeq, e.seq);
      for (const r of hist.turns || []) this.records.set(r.turn, r);
    }
    // chunks of whole turns, of about CHUNK messages, from the end
    const chunks = [];
    for (let end = msgs.length; end > 0;) {
      let start = Math.max(0, end - (chunks.length ? CHUNK : FIRST));
      while (start > 0 && msgs[start].turn === msgs[start - 1].turn) start--;
      chunks.push(msgs.slice(start, end));
      end = start;
    }
    const draw = (chunk, frag) => { for (const e of chunk) this.addMessage(e.turn, e.message, e.seq, frag); };
    const frag = document.createDocumentFragment();
    if (chunks.length) draw(chunks.shift(), frag);
    this.list.append(frag);
    if (hist) this.streamed(hist.streaming);
    this.drawState();
    this.scrollEnd(true);
    requestAnimationFrame(() => performance.mark('brain:conversation-shown'));
    const more = () => {
      if (chunks.length) {
        draw(chunks.shift(), null); // each turn goes before the later ones (ensureTurn)
        this.scrollEnd(false);
        setTimeout(more, 0);
        return;
      }
      for (const n of this.records.keys()) this.ensureTurn(n); // turns without messages
      this.drain();
    };
    setTimeout(more, 0);
  }

  // drain applies the events that came while the history was drawn, a
  // batch a task; new ones queue behind them.
  drain() {
    const batch = this.buffer.splice(0, DRAIN);
    this.loaded = true;
    for (let i = 0; i < batch.length; i++) {
      if (!batch[i].snapshot) { this.apply(batch[i]); continue; }
      if (this.catchUp(batch[i].snapshot)) { // the rest waits for the history
        this.buffer.unshift(...batch.slice(i + 1));
        this.loaded = false;
        return;
      }
    }
    if (this.buffer.length) { this.loaded = false; setTimeout(() => this.drain(), 0); return; }
    this.settle();
    if (!this.complete) performance.mark('brain:conversation-complete');
    this.complete = true;
    this.drawState();
    if (this.follow) this.scrollEnd(true);
    if (this.onComplete) this.onComplete();
  }

  // onEvent applies one event of the session (in seq order, once), or
  // queues it while the history is being drawn.
  onEvent(f) {
    if (!this.loaded) { this.buffer.push(f); return; }
    const was = this.running;
    this.apply(f);
    this.settle();
    if (this.running !== was || f.msg.type.startsWith('turn_')) this.drawState();
  }

  // onSnapshot: the session's stream began (or resumed) with a snapshot
  // instead of a replay: the events up to its seq are gone. It is applied
  // in order with the events (catchUp).
  onSnapshot(m) {
    this.buffer.push({ snapshot: m });
    if (this.loaded) { this.loaded = false; this.drain(); }
  }

  // catchUp applies a snapshot: when it is past the history, what came
  // between is read (GET …/conversation?after=) and drawn, the drain
  // waiting (it returns true then); then the calls it lists as pending
  // are bound to their cards.
  catchUp(snap) {
    this.snapSeq = Math.max(this.snapSeq || 0, snap.seq);
    const bind = () => this.bindPending(snap.pendingCalls || [], snap.seq);
    if (snap.seq <= this.readSeq) { bind(); return false; }
    api('GET', `/v1/sessions/${encodeURIComponent(this.sv.id)}/conversation?after=${this.readSeq}`).then((hist) => this.merge(hist)).catch((e) => {
      this.list.append(h('p', { class: 'error' }, 'cannot read the conversation: ', String(e.message || e), ' (reload to see what the events no longer carry)'));
    }).then(() => { bind(); this.drawState(); this.drain(); });
    return true;
  }

  // merge draws a history read after the first (?after=): its messages,
  // its turns' starts and ends, the text streaming now.
  merge(hist) {
    this.readSeq = Math.max(this.readSeq, hist.seq || 0);
    for (const r of hist.turns || []) this.records.set(r.turn, r);
    for (const e of hist.messages || []) {
      if (e.seq <= this.histSeq) continue;
      this.addMessage(e.turn, e.message, e.seq, null);
      this.histSeq = e.seq;
    }
    for (const r of hist.turns || []) this.record(this.ensureTurn(r.turn), r);
    if (hist.turn >= this.turn) { this.turn = hist.turn; this.running = !!hist.running; }
    const s = this.streaming;
    if (s && (!this.running || s.turn !== this.turn)) this.endStreaming((this.records.get(s.turn) || {}).reason || '');
    this.streamed(hist.streaming);
  }

  // streamed draws the text the running step has streamed so far, as the
  // history read it; the deltas up to its seq are in it.
  streamed(st) {
    if (!st || !this.running || st.turn !== this.turn) return;
    const s = this.streaming;
    if (s && s.turn === st.turn) s.node.data = visible(st.text);
    else this.delta(st.turn, st.text);
    this.streamTurn = st.turn;
    this.streamSeq = st.seq;
  }

  // bindPending binds the model's calls a snapshot lists as pending to
  // their cards (the events that would have are gone): one awaiting
  // approval shows the approval, decidable.
  bindPending(calls, seq) {
    for (const c of calls) {
      if (c.invoker && c.invoker !== 'llm') continue;
      let card = this.byCall.get(c.callId);
      if (!card) {
        const i = this.openFor(c.name, canon(c.input), seq);
        if (i < 0) continue;
        card = this.open[i];
        this.open.splice(i, 1);
        card.bind(c.callId);
      }
      if (c.state === 'awaiting_approval') card.apply({ type: 'approval_requested', callId: c.callId, name: c.name, input: c.input, inputDigest: c.inputDigest, invoker: c.invoker }, 0);
      else card.apply({ type: 'capability_invoked', callId: c.callId, name: c.name, input: c.input }, 0);
    }
  }

  // record draws a turn's start and end as the history has them.
  record(t, r) {
    if (r.startedBy && !t.startedBy) t.started(r);
    if (r.reason && t.reason !== r.reason) t.ended(r);
  }

  apply(f) {
    const seq = Number(f.seq);
    if (seq <= this.lastSeq) return;
    this.lastSeq = seq;
    const m = f.msg;
    switch (m.type) {
      case 'turn_started':
        this.turn = Math.max(this.turn, m.turn);
        this.running = true;
        this.ensureTurn(m.turn).started(m, seq);
        break;
      case 'turn_ended':
        this.turn = Math.max(this.turn, m.turn);
        if (m.turn === this.turn) this.running = false;
        this.ensureTurn(m.turn).ended(m);
        this.closeTurn(m.turn, m.reason);
        if (this.streaming && this.streaming.turn === m.turn) this.endStreaming(m.reason);
        if (this.held && this.held.turn === m.turn) this.drawHeld(m.reason);
        break;
      case 'conversation_message':
        if (m.message.role === 'assistant' && this.held && this.held.turn === m.turn) this.held = null; // the text was kept
        if (seq > this.histSeq) this.addMessage(m.turn, m.message, seq, null);
        else this.markOpen(m.message, m.turn);
        break;
      case 'assistant_delta':
        if (m.turn === this.streamTurn && seq <= this.streamSeq) break; // in the streamed text read
        if (seq > this.histSeq) this.delta(m.turn, m.text);
        else this.hold(m.turn, m.text);
        break;
      default:
        if (m.callId) this.callEvent(m, seq);
    }
  }

  ensureTurn(n) {
    let t = this.turns.get(n);
    if (t) return t;
    const head = h('div', { class: 'turn-head muted' }, 'turn ', String(n));
    const body = h('div', { class: 'turn-body' });
    const end = h('div', { class: 'turn-end', hidden: true });
    const el = h('section', { class: 'turn', dataset: { turn: n } }, head, body, end);
    t = {
      n, el, body, end, step: 0, steps: [], reason: '', error: '', startedBy: '',
      started: (m) => { t.startedBy = starter(m.startedBy); fill(head, 'turn ', String(n), t.startedBy ? ' · started by ' + t.startedBy : ''); },
      ended: (m) => {
        t.reason = m.reason;
        t.error = m.error || '';
        end.hidden = false;
        el.dataset.reason = m.reason;
        end.className = 'turn-end reason-' + m.reason;
        const why = endError(m.reason, m.error);
        fill(end, h('strong', {}, 'turn ', String(n), ' ', REASONS[m.reason] || m.reason), why ? [': ', why] : null);
      },
    };
    this.turns.set(n, t);
    const r = this.records.get(n);
    if (r) this.record(t, r);
    // Turns only grow, but one without messages may first be seen after
    // later ones (from its events, after the history).
    const after = [...this.turns.keys()].filter((k) => k > n).sort((a, b) => a - b)[0];
    if (after !== undefined && this.turns.get(after).el.parentNode) this.turns.get(after).el.before(el);
    else if (!this.pendingFrag) this.list.append(el);
    else this.pendingFrag.append(el);
    this.empty.remove();
    return t;
  }

  // addMessage draws one message of turn n (into frag while the history
  // is built).
  addMessage(n, msg, seq, frag) {
    this.pendingFrag = frag;
    const t = this.ensureTurn(n);
    this.pendingFrag = null;
    this.messages++;
    if (msg.role === 'user') {
      t.body.append(h('div', { class: 'msg user', tabindex: '0', dataset: { seq } },
        h('div', { class: 'who' }, 'you'), h('div', { class: 'text' }, msg.text || '')));
    } else if (msg.role === 'assistant') {
      t.step++;
      const cards = h('div', { class: 'cards' });
      const el = h('div', { class: 'msg assistant', tabindex: '0', dataset: { seq, step: t.step } },
        h('div', { class: 'who' }, 'assistant'),
        msg.text ? markdownNode(msg.text) : null, cards, stepMeta(t.step, msg));
      const streamed = this.streaming && this.streaming.turn === n ? this.streaming : null;
      if (streamed) { streamed.el.replaceWith(el); this.streaming = null; } else t.body.append(el);
      const step = { n: t.step, msg, cards: [] };
      t.steps.push(step);
      for (const tc of msg.toolCalls || []) {
        const card = this.toolCard(n, tc, streamed, seq);
        step.cards.push(card);
        cards.append(card.el);
      }
    } else if (msg.role === 'tool') {
      const card = this.byToolCall.get(n + '/' + msg.toolCallId);
      if (card) card.answered(msg);
    }
    if (!frag) this.scrollEnd(false);
  }

  // markOpen: a conversation_message replayed from the log that the
  // history already drew. Its tool calls are open for binding again from
  // here (the calls' events follow it).
  markOpen(msg, n) {
    if (msg.role === 'tool') { // answered: closed for good
      const card = this.byToolCall.get(n + '/' + msg.toolCallId);
      const i = card ? this.open.indexOf(card) : -1;
      if (i >= 0) this.open.splice(i, 1);
      return;
    }
    if (msg.role !== 'assistant') return;
    for (const tc of msg.toolCalls || []) {
      const card = this.byToolCall.get(n + '/' + tc.id);
      if (!card || card.callId) continue;
      const i = this.replayed.findIndex((m) => m.capabilityName === tc.name);
      if (i >= 0) { // its props streamed before the message
        const m = this.replayed.splice(i, 1)[0];
        card.bind(m.callId);
        card.apply(m, 0);
        continue;
      }
      this.reopen(card);
    }
  }

  // reopen puts a card among the open ones, which are kept in the order
  // of the messages that made them (the history is drawn from its end,
  // and replayed messages open their cards again): "earliest" is the
  // conversation's order, never the order cards were opened in.
  reopen(card) {
    if (this.open.includes(card)) return;
    let i = this.open.length;
    while (i > 0 && this.open[i - 1].seq > card.seq) i--;
    this.open.splice(i, 0, card);
  }

  // settle closes the cards of the turns that ended, once the events up to
  // the history's seq are applied (before, a replayed call may still bind
  // one; past a snapshot, they are gone).
  settle() {
    if (this.settled || !this.loaded || Math.max(this.lastSeq, this.snapSeq) < this.readSeq) return;
    this.settled = true;
    for (const t of this.turns.values()) if (t.reason) this.closeTurn(t.n, t.reason);
  }

  // closeTurn closes the cards of turn n, which ended: no call of it can
  // come any more. One that no call was bound to and no tool message
  // answered says that no result was recorded (the model reads the
  // same), rather than wait forever or take a later call's events.
  closeTurn(n, reason) {
    for (const c of this.open.filter((x) => x.turn === n)) {
      this.open.splice(this.open.indexOf(c), 1);
      if (!c.final && !c.callId) c.unrecorded(n, reason);
    }
  }

  // openFor is the index of the earliest open card a call of capability
  // name with input (canonical) may be: its message came before the
  // call's event at seq, so a replayed call never binds a card of a
  // later message (a call of turn 6 to turn 7's card of the same call).
  openFor(name, want, seq) {
    return this.open.findIndex((c) => c.tc.name === name && c.inputKey === want && (!seq || !c.seq || c.seq < seq));
  }

  // toolCard draws one tool call of an assistant message, adopting a
  // render surface streamed before it.
  toolCard(n, tc, streamed, seq) {
    const cap = this.sv.caps.get(tc.name);
    const card = new ToolCard(this, n, tc, cap);
    card.seq = Number(seq) || 0;
    this.byToolCall.set(n + '/' + tc.id, card);
    if (streamed) {
      for (const [callId, p] of streamed.cards) {
        if (p.tc.name === tc.name) { streamed.cards.delete(callId); this.provisional.delete(callId); card.adopt(callId, p); break; }
      }
    }
    if (!card.callId) this.reopen(card);
    return card;
  }

  delta(n, text) {
    let s = this.streaming;
    if (!s || s.turn !== n) {
      const t = this.ensureTurn(n);
      const node = document.createTextNode('');
      const cards = h('div', { class: 'cards' });
      const el = h('div', { class: 'msg assistant streaming', tabindex: '0' }, h('div', { class: 'who' }, 'assistant ', h('span', { class: 'spinner', 'aria-label': 'writing' })),
        h('div', { class: 'text' }, node), cards);
      t.body.append(el);
      s = this.streaming = { turn: n, el, node, cardsEl: cards, cards: new Map() };
    }
    s.node.appendData(visible(text)); // painted with the next frame: no layout is waited for
    if (text && this.onDelta) this.onDelta(text);
    this.scrollEnd(false);
  }

  endStreaming(reason) {
    const s = this.streaming;
    this.streaming = null;
    s.el.classList.remove('streaming');
    const sp = s.el.querySelector('.spinner');
    if (sp) sp.remove();
    if (reason) markUnsaved(s.el, reason);
  }

  // hold keeps the text of replayed deltas (seq up to the history's): the
  // history holds it when the step's assistant message follows them in
  // the turn; when the turn ends first (a kernel from before the driver
  // journaled a failed step's text, which kept it only on a cancel),
  // drawHeld shows it, as it was shown live.
  hold(n, text) {
    if (!this.held || this.held.turn !== n) this.held = { turn: n, text: '' };
    this.held.text += text;
  }

  drawHeld(reason) {
    const { turn, text } = this.held;
    this.held = null;
    if (!text) return;
    const el = h('div', { class: 'msg assistant', tabindex: '0' }, h('div', { class: 'who' }, 'assistant'), h('div', { class: 'text' }, text));
    markUnsaved(el, reason);
    this.ensureTurn(turn).body.append(el);
  }

  // callEvent applies an event of one call to its card, binding the card
  // at the call's first event.
  callEvent(m, seq) {
    let card = this.byCall.get(m.callId) || this.provisional.get(m.callId);
    if (!card) {
      if (m.type === 'render_invoked' && m.partial) {
        if (seq <= this.histSeq) { // a call of the history: its message follows
          const i = this.replayed.findIndex((r) => r.callId === m.callId);
          if (i >= 0) this.replayed[i] = m; else this.replayed.push(m);
          return;
        }
        card = this.provisionalRender(m);
        if (!card) return;
      } else {
        if (m.type === 'approval_requested' && m.invoker && m.invoker !== 'llm') return;
        const name = m.name || m.capabilityName;
        const input = m.type === 'render_invoked' ? m.props : m.input;
        if (input === undefined || !this.open.some((c) => c.tc.name === name)) return;
        const i = this.openFor(name, canon(input), seq);
        if (i < 0) return;
        card = this.open[i];
        this.open.splice(i, 1);
        card.bind(m.callId);
      }
    }
    card.apply(m, seq);
  }

  // provisionalRender draws streamed props before the assistant message
  // that makes the call, in the streaming bubble of the running turn.
  provisionalRender(m) {
    const cap = this.sv.caps.get(m.capabilityName);
    if (!chatTarget(cap) || !this.running) return null;
    if (!this.streaming) this.delta(this.turn, '');
    const card = new ToolCard(this, this.turn, { id: '', name: m.capabilityName, input: m.props }, cap);
    card.bind(m.callId);
    this.provisional.set(m.callId, card);
    this.streaming.cards.set(m.callId, card);
    this.streaming.cardsEl.append(card.el);
    return card;
  }

  // scrollEnd keeps the end in view: at once when forced, else once per
  // frame (reading the page's height makes the browser lay it out).
  scrollEnd(force) {
    if (!this.el.isConnected || (!force && !this.follow)) return;
    if (force) { window.scrollTo(0, document.documentElement.scrollHeight); return; }
    if (this.scrollPending) return;
    this.scrollPending = requestAnimationFrame(() => {
      this.scrollPending = 0;
      if (this.follow && this.el.isConnected) window.scrollTo(0, document.documentElement.scrollHeight);
    });
  }

  stop() {
    window.removeEventListener('scroll', this.onScroll);
    for (const ev of this.readerEvents) window.removeEventListener(ev, this.onReader);
    window.removeEventListener('resize', this.onResize);
    this.sizes.disconnect();
  }

  // makeBox is the message box: Enter sends, Shift-Enter is a new line,
  // the box keeps focus; Cancel while a turn runs. While a turn runs the
  // box stays editable (the next message can be written) and says so;
  // Enter then sends nothing and says why, the text kept. What is typed
  // is kept as the session's draft (dom.js) until it is sent.
  makeBox() {
    const model = this.sv.me.model;
    const id = this.sv.id;
    const input = h('textarea', { class: 'msg-input', rows: 2, placeholder: model ? 'Message the agent (Enter sends, Shift-Enter for a new line)' : 'no model', 'aria-label': 'message', disabled: !model,
      'aria-describedby': 'box-busy', value: model ? draft(id) : '' });
    input.addEventListener('input', () => setDraft(id, input.value));
    const send = h('button', { type: 'submit', class: 'primary send', disabled: !model }, 'Send');
    const cancel = h('button', { type: 'button', class: 'danger cancel', hidden: true }, 'Cancel');
    const status = h('div', { class: 'box-status', role: 'status' });
    const busy = h('div', { class: 'box-busy muted', id: 'box-busy', hidden: true });
    const note = model ? h('div', { class: 'muted box-note' }, 'turns run on ', h('code', {}, model))
      : h('div', { class: 'muted box-note no-model' }, 'This kernel has no model: start brain serve with a config that has a model: section (docs/agent.md) to talk to the agent here.');
    const form = h('form', { class: 'msg-box', onsubmit: (e) => { e.preventDefault(); this.send(); } },
      note, h('div', { class: 'box-row' }, input, send, cancel), busy, status);
    // Enter sends: its keydown is cancelled, which stops the line break —
    // except where the browser delivers the key's character on its own
    // (a synthetic or remote keyboard: the char may come after the send
    // has already cleared the box). The line break that follows an Enter
    // that sent is refused at beforeinput, so it can never land in the
    // emptied box; Shift-Enter's passes.
    let enterSent = false;
    input.addEventListener('keydown', (e) => {
      enterSent = false;
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); enterSent = true; this.send(); }
    });
    input.addEventListener('beforeinput', (e) => {
      if (enterSent && (e.inputType === 'insertLineBreak' || e.inputType === 'insertParagraph')) e.preventDefault();
      enterSent = false;
    });
    input.addEventListener('keyup', (e) => { if (e.key === 'Enter') enterSent = false; });
    cancel.addEventListener('click', async () => {
      cancel.disabled = true;
      try {
        const r = await this.sv.conn.send({ type: 'turn_cancel', reason: 'from the console by ' + this.sv.me.name });
        if (r.msg.type === 'error') fill(status, r.msg.code + ': ' + r.msg.message);
      } catch (e) { fill(status, String(e.message || e)); }
      cancel.disabled = false;
      input.focus();
    });
    return { el: form, input, send, cancel, status, busy, model };
  }

  async send() {
    const b = this.box;
    const text = b.input.value;
    if (b.model && this.running && text.trim()) {
      fill(b.status, 'not sent: turn ', String(this.turn), ' is still running. Your text is kept: press Enter again once the turn ends, or Cancel the turn.');
      b.status.dataset.why = 'running';
    }
    if (!b.model || this.running || this.sending || !text.trim()) { b.input.focus(); return; }
    this.sending = true;
    fill(b.status);
    delete b.status.dataset.why;
    this.drawState();
    try {
      const r = await this.sv.conn.send({ type: 'turn_start', message: text });
      if (r.msg.type === 'error') fill(b.status, refusal(r.msg));
      else {
        if (b.input.value === text) b.input.value = '';
        setDraft(this.sv.id, b.input.value);
        this.follow = true;
      }
    } catch (e) {
      fill(b.status, 'not sent: ' + (e.message || e));
    }
    this.sending = false;
    this.drawState();
    b.input.focus();
  }

  // end: the session is closed for good (deleted elsewhere, or the
  // connection refused): no turn runs any more and nothing can be sent;
  // the box says why. A turn still running when the session was deleted
  // gets its end line: the kernel cancelled it with the reason the close
  // gives ("the session was deleted"), and its turn_ended, which may come
  // after the close, is then never seen.
  end(why, deleted) {
    this.closedWhy = why;
    const t = this.running && deleted ? this.ensureTurn(this.turn) : null;
    if (t && !t.reason) {
      t.ended({ reason: 'cancelled', error: why });
      this.closeTurn(t.n, 'cancelled');
    }
    this.running = false;
    if (this.streaming) this.endStreaming('');
    for (const c of this.byCall.values()) c.approval.hidden = true;
    this.drawState();
  }

  drawState() {
    const b = this.box;
    if (this.closedWhy) {
      this.el.dataset.running = 'false';
      this.el.dataset.closed = 'true';
      b.input.disabled = b.send.disabled = true;
      b.cancel.hidden = b.busy.hidden = true;
      b.send.textContent = 'Send';
      fill(b.status, 'The session is closed (', this.closedWhy, '): nothing more can be sent. Your text stays in the box.');
      b.status.dataset.why = 'closed';
      if (this.onState) this.onState();
      return;
    }
    this.el.dataset.running = this.running ? 'true' : 'false';
    b.send.disabled = !b.model || this.running || !!this.sending;
    b.cancel.hidden = !this.running;
    if (this.running) b.send.textContent = 'Running…';
    else b.send.textContent = 'Send';
    b.busy.hidden = !this.running || !b.model;
    if (this.running) fill(b.busy, 'turn ', String(this.turn), ' is running: you can write your next message, and send it when the turn ends (or Cancel it).');
    if (!this.running && b.status.dataset.why === 'running') { fill(b.status); delete b.status.dataset.why; }
    if (this.onState) this.onState();
  }

  // show puts the view in main's place (the SessionView's content).
  attach(container) {
    fill(container, this.el);
    if (!this.messages && !this.turns.size) this.list.prepend(this.empty);
    this.follow = true;
    this.scrollEnd(true);
    if (this.box.model) this.box.input.focus();
  }
}

// starter is who started a turn as the kernel says it ("operator (ada)"),
// the name once when it is the side's default ("operator (operator)").
function starter(s) {
  const m = /^([a-z]+) \((.*)\)$/.exec(s || '');
  return m && m[1] === m[2] ? m[1] : s || '';
}

// endError is a turn_ended's error as its end line says it: the kernel's
// "the turn was cancelled: <reason>" after "turn 8 cancelled" would say it
// twice, so only the reason is kept.
export function endError(reason, error) {
  const e = error || '';
  if (reason === 'cancelled' && e.startsWith('the turn was cancelled')) return e.slice('the turn was cancelled'.length).replace(/^:\s*/, '');
  return e;
}

// refusal says why a message was not sent, in plain words for a message
// over the kernel's frame limit (too_large: "frame larger than 1048576
// bytes"), the kernel's words otherwise.
function refusal(e) {
  if (e.code === 'too_large') {
    const n = Number((/larger than (\d+) bytes/.exec(e.message || '') || [])[1]);
    return 'not sent: the message is too long' + (n ? ' (the limit is ' + bytes(n) + ' a message)' : '') + '. Your text is kept in the box: shorten it, or split it into several messages.';
  }
  return e.code + ': ' + e.message;
}

function bytes(n) {
  if (n >= 1 << 20) return +(n / (1 << 20)).toFixed(1) + ' MiB';
  if (n >= 1 << 10) return +(n / (1 << 10)).toFixed(1) + ' KiB';
  return n + ' bytes';
}

// markUnsaved marks a bubble of streamed text that no message followed: the
// turn ended (failed, interrupted) before the model finished that answer.
function markUnsaved(el, reason) {
  el.classList.add('unsaved');
  el.dataset.unsaved = reason;
  el.querySelector('.who').append(h('span', { class: 'unsaved-note' }, ' · not in the conversation (turn ', REASONS[reason] || reason, ' before the answer was complete)'));
}

function stepMeta(step, msg) {
  const parts = ['step ' + step];
  if (msg.durationMs) parts.push(fmtMs(msg.durationMs));
  if (msg.usage) parts.push(`${msg.usage.inputTokens} in / ${msg.usage.outputTokens} out tokens` + (msg.usage.cachedInputTokens ? ` (${msg.usage.cachedInputTokens} cached)` : ''));
  return h('div', { class: 'meta muted' }, parts.join(' · '));
}

export function fmtMs(ms) {
  if (!(ms >= 0)) return '';
  return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(2) + ' s';
}

// ToolCard is one tool call of the model: pending, awaiting approval,
// running, then its outcome.
class ToolCard {
  constructor(cv, turn, tc, cap) {
    this.cv = cv;
    this.turn = turn;
    this.tc = tc;
    this.cap = cap;
    this.inputKey = canon(tc.input);
    this.callId = '';
    this.seq = 0; // of the message that made the call
    this.state = 'pending';
    this.surface = null;
    this.digest = '';
    this.stateEl = h('span', { class: 'state' });
    this.link = h('a', { class: 'call-link', hidden: true }, 'call page');
    this.approval = h('div', { class: 'approval', hidden: true });
    this.renderEl = h('div', { class: 'inline-render' });
    this.outcomeEl = h('div', { class: 'card-outcome' });
    const label = cap && cap.displayName ? [h('strong', {}, cap.displayName), ' ', h('code', {}, tc.name)] : h('strong', {}, h('code', {}, tc.name));
    this.el = h('div', { class: 'card tool', tabindex: '0', dataset: { toolCall: tc.id, name: tc.name, state: 'pending' } },
      h('div', { class: 'card-head' }, label, ' ', this.stateEl, ' ', this.link),
      h('details', { class: 'card-input' }, h('summary', {}, 'input ', h('code', {}, short(tc.input, 80))), h('pre', {}, json(tc.input))),
      this.approval, this.renderEl, this.outcomeEl);
    this.setState('pending');
  }

  setState(s, text) {
    this.state = s;
    this.el.dataset.state = s;
    const spin = s === 'pending' || s === 'running';
    fill(this.stateEl, spin ? h('span', { class: 'spinner', 'aria-hidden': 'true' }) : null, text || s.replace('_', ' '));
  }

  bind(callId) {
    this.callId = callId;
    this.el.dataset.call = callId;
    this.link.hidden = false;
    this.link.setAttribute('href', route('s', this.cv.sv.id, 'call', callId));
    this.cv.byCall.set(callId, this);
    if (this.final) this.readWait();
  }

  // askedApproval: the call waited for a person (the capability requires an
  // approval, or one was requested).
  askedApproval() {
    return this.sawApproval || !!(this.cap && this.cap.requiresApproval);
  }

  // readWait reads, once the call has ended, how long it waited for its
  // approval (the kernel's timings: approval_requested to
  // approval_decided), so that the time a person took is not shown as
  // the tool's. Unknown (timings not kept, the call not bound): waitMs
  // stays undefined and the duration says the wait is in it.
  readWait() {
    if (this.waitAsked || !this.callId || !this.askedApproval() || this.state === 'pending' || this.state === 'running' || this.state === 'awaiting_approval') return;
    this.waitAsked = true;
    api('GET', `/v1/sessions/${encodeURIComponent(this.cv.sv.id)}/calls/${encodeURIComponent(this.callId)}`).then((t) => {
      const at = (k) => { const p = (t.points || []).find((x) => x.kind === k); return p ? Date.parse(p.time) : NaN; };
      const wait = at('approval_decided') - at('approval_requested');
      if (!(wait >= 0)) return;
      this.waitMs = wait;
      this.el.dataset.waitMs = String(Math.round(wait));
      if (this.shown) this.showOutcome(...this.shown);
      this.cv.sv.redrawTrace = true;
      this.cv.sv.drawStatus();
    }).catch(() => { /* not kept: the duration says the wait is in it */ });
  }

  // took is the call's duration as shown: the tool's, the approval's wait
  // apart when known.
  took(ms) {
    if (!ms) return null;
    if (this.waitMs !== undefined) return h('span', { class: 'muted took' }, ' · ', fmtMs(Math.max(0, ms - this.waitMs)), ' · ', fmtMs(this.waitMs), ' awaiting approval');
    return h('span', { class: 'muted took' }, ' · ', fmtMs(ms), this.askedApproval() ? ' (approval wait included)' : '');
  }

  // adopt takes over a provisional card's call and surface.
  adopt(callId, p) {
    this.bind(callId);
    if (p.surface) { this.surface = p.surface; this.renderEl.append(p.surface.card); }
    if (p.state !== 'pending') this.setState(p.state);
    p.el.remove();
  }

  apply(m, seq) {
    // A call answered already (in the history) is replayed for its
    // render only: its state is the tool message's.
    if (this.final && m.type !== 'render_invoked') {
      if (m.type === 'capability_outcome' && this.surface) this.surface.end(m.outcome);
      if (m.type === 'approval_requested') { this.sawApproval = true; this.readWait(); }
      return;
    }
    switch (m.type) {
      case 'approval_requested':
        this.sawApproval = true;
        this.digest = m.inputDigest || '';
        this.setState('awaiting_approval', 'awaiting approval');
        this.drawApproval(m);
        break;
      case 'approval_withdrawn':
        this.approval.hidden = true;
        this.setState('pending', 'approval withdrawn: ' + (m.message || ''));
        break;
      case 'approval_decided':
        this.approval.hidden = true;
        this.decision = m;
        this.setState(m.decision === 'approved' ? 'running' : 'rejected', m.decision + ' by ' + (m.decider && m.decider.name ? m.decider.name : m.decidedBy));
        break;
      case 'capability_invoked':
        if (this.state !== 'ok' && this.state !== 'error') this.setState('running');
        break;
      case 'render_invoked':
        if (!chatTarget(this.cap)) break;
        if (this.surface) this.surface.update(m.props, m.partial === true);
        else {
          this.surface = createSurface(this.cap, m, this.cv.sv.me);
          this.surface.mark(m.partial === true);
          this.renderEl.append(this.surface.card);
        }
        break;
      case 'capability_outcome':
        if (this.surface) this.surface.end(m.outcome);
        this.showOutcome(m.outcome);
        break;
    }
    void seq;
  }

  // answered: the tool message, the outcome as the model read it.
  answered(msg) {
    const i = this.cv.open.indexOf(this);
    if (i >= 0) this.cv.open.splice(i, 1);
    this.final = msg;
    this.showOutcome(msg.outcome, msg.durationMs);
  }

  // unrecorded: the turn ended without this call being made or answered.
  unrecorded(n, reason) {
    this.setState('error', 'no result');
    fill(this.outcomeEl, h('div', { class: 'outcome err' }, h('strong', {}, 'no result'), ': no result was recorded for this call: turn ', String(n), ' ', REASONS[reason] || reason, ' before it finished'));
  }

  showOutcome(o, ms) {
    this.approval.hidden = true;
    if (!o) return;
    this.shown = [o, ms];
    const took = this.took(ms);
    if (o.ok) {
      this.setState('ok');
      fill(this.outcomeEl, h('details', { class: 'outcome ok' }, h('summary', {}, h('strong', {}, 'ok'), ' ', h('code', {}, short(o.value, 100)), took), h('pre', {}, json(o.value))));
    } else {
      const e = o.error || {};
      this.setState('error', e.code || 'error');
      fill(this.outcomeEl, h('div', { class: 'outcome err' }, h('strong', {}, e.code || 'error'), ': ', e.message || '', took));
    }
    this.readWait();
  }

  drawApproval(m) {
    const fb = h('input', { type: 'text', class: 'feedback', placeholder: 'feedback (sent to the model)', 'aria-label': 'feedback' });
    const err = h('span', { class: 'error' });
    const buttons = [];
    const decide = async (decision) => {
      const msg = { type: 'capability_approve', callId: this.callId, decision, decidedBy: this.cv.sv.me.name };
      if (fb.value) msg.feedback = fb.value;
      if (this.digest) msg.inputDigest = this.digest;
      for (const b of buttons) b.disabled = true;
      try { await sendFrame(this.cv.sv.id, msg); } catch (e) {
        fill(err, (e.code || 'error') + ': ' + e.message);
        for (const b of buttons) b.disabled = false;
      }
    };
    buttons.push(h('button', { type: 'button', class: 'small primary approve', onclick: () => decide('approved') }, 'Approve'),
      h('button', { type: 'button', class: 'small danger reject', onclick: () => decide('rejected') }, 'Reject'));
    fill(this.approval, h('div', { class: 'muted' }, 'needs your approval; the input shown is what runs:'),
      h('pre', { class: 'approval-input' }, json(m.input)), h('div', { class: 'approval-row' }, fb, ' ', buttons[0], ' ', buttons[1]), err);
    this.approval.hidden = false;
  }
}
