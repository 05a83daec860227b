// timeline.js: the live event timeline, a virtualised list: only the rows
// in view (plus a margin) exist in the DOM, so 10,000 events scroll and
// filter as fast as 10. Filter by call, type and capability; jump to a seq;
// click a row (or focus it and press Enter) for its JSON.
import { h, json, short, route, visible, fill } from './dom.js';

const ROW = 22;
const OVERSCAN = 10;

function capOf(msg) {
  if (msg.name) return msg.name;
  if (msg.capabilityName) return msg.capabilityName;
  if (Array.isArray(msg.capabilities)) return msg.capabilities.map((c) => c && c.name).join(', ');
  if (Array.isArray(msg.names)) return msg.names.join(', ');
  return '';
}

export class Timeline {
  constructor(sessionId) {
    this.sessionId = sessionId;
    this.all = [];
    this.filtered = [];
    this.types = new Set();
    this.f = { call: '', type: '', cap: '' };
    this.selected = null;
    this.follow = true;
    this.pending = 0;

    this.typeSel = h('select', { 'aria-label': 'filter by type', class: 'f-type', onchange: () => this.setFilter({ type: this.typeSel.value }) }, h('option', { value: '' }, 'all types'));
    const callIn = h('input', { type: 'search', class: 'f-call', placeholder: 'call id', 'aria-label': 'filter by call', oninput: () => this.setFilter({ call: callIn.value.trim() }) });
    const capIn = h('input', { type: 'search', class: 'f-cap', placeholder: 'capability', 'aria-label': 'filter by capability', oninput: () => this.setFilter({ cap: capIn.value.trim() }) });
    const seqIn = h('input', { type: 'number', class: 'f-seq', placeholder: 'seq', min: '1', 'aria-label': 'jump to seq' });
    const jump = h('button', { type: 'button', class: 'small', onclick: () => this.jump(Number(seqIn.value)) }, 'jump to seq');
    seqIn.addEventListener('keydown', (e) => { if (e.key === 'Enter') this.jump(Number(seqIn.value)); });
    this.count = h('span', { class: 'muted t-count' });
    this.spacer = h('div', { class: 't-spacer' });
    this.rows = h('div', { class: 't-rows' });
    this.viewport = h('div', { class: 't-viewport', tabindex: '0' }, this.spacer, this.rows);
    this.viewport.addEventListener('scroll', () => {
      const v = this.viewport;
      this.follow = v.scrollTop + v.clientHeight >= v.scrollHeight - ROW * 2;
      this.draw();
    });
    this.detail = h('pre', { class: 't-detail', hidden: true });
    this.el = h('section', { class: 'timeline' },
      h('h2', {}, 'Events'),
      h('div', { class: 't-filters' }, callIn, ' ', this.typeSel, ' ', capIn, ' ', seqIn, jump, ' ', this.count),
      h('div', { class: 't-head' }, h('span', { class: 'c-seq' }, 'seq'), h('span', { class: 'c-type' }, 'type'), h('span', { class: 'c-call' }, 'call'), h('span', { class: 'c-cap' }, 'capability'), h('span', { class: 'c-msg' }, 'message')),
      this.viewport, this.detail);
  }

  matches(e) {
    const f = this.f;
    return (!f.type || e.type === f.type) && (!f.call || e.callId.includes(f.call)) && (!f.cap || e.cap.includes(f.cap));
  }

  add(frame) {
    const msg = frame.msg;
    const e = { seq: Number(frame.seq), type: msg.type, callId: typeof msg.callId === 'string' ? msg.callId : '', cap: capOf(msg), msg };
    this.all.push(e);
    if (!this.types.has(e.type)) { this.types.add(e.type); this.typeSel.append(h('option', { value: e.type }, e.type)); }
    if (this.matches(e)) this.filtered.push(e);
    this.schedule();
    return e;
  }

  // reset empties the timeline (a replay from another seq).
  reset() { this.all = []; this.filtered = []; this.selected = null; this.detail.hidden = true; this.schedule(); }

  setFilter(p) {
    Object.assign(this.f, p);
    this.filtered = this.all.filter((e) => this.matches(e));
    this.viewport.scrollTop = 0;
    this.follow = false;
    this.draw();
  }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.draw(); });
  }

  draw() {
    const n = this.filtered.length;
    this.spacer.style.height = (n * ROW) + 'px';
    if (this.follow) this.viewport.scrollTop = n * ROW;
    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 400;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(n, Math.ceil((top + height) / ROW) + OVERSCAN);
    // Rows are recycled: only their text and position change.
    this.pool = this.pool || [];
    while (this.pool.length < last - first) this.pool.push(this.makeRow());
    for (let i = first; i < last; i++) this.fill(this.pool[i - first], this.filtered[i], i);
    for (let j = last - first; j < this.pool.length; j++) this.pool[j].el.hidden = true;
    this.count.textContent = `${n} of ${this.all.length} events`;
  }

  makeRow() {
    const r = {};
    r.seq = h('span', { class: 'c-seq' });
    r.type = h('span', { class: 'c-type' });
    r.link = h('a', { onclick: (ev) => ev.stopPropagation() });
    r.call = h('span', { class: 'c-call' }, r.link);
    r.cap = h('span', { class: 'c-cap' });
    r.msg = h('span', { class: 'c-msg' });
    r.el = h('div', { class: 't-row', tabindex: '0', role: 'row', onclick: () => { if (r.e) this.select(r.e); },
      onkeydown: (ev) => { if ((ev.key === 'Enter' || ev.key === ' ') && r.e) { ev.preventDefault(); this.select(r.e); } } }, r.seq, r.type, r.call, r.cap, r.msg);
    this.rows.append(r.el);
    return r;
  }

  fill(r, e, i) {
    r.el.hidden = false;
    r.el.style.top = (i * ROW) + 'px';
    r.el.classList.toggle('sel', this.selected === e);
    if (r.e === e) return;
    r.e = e;
    r.el.dataset.seq = e.seq;
    r.seq.textContent = e.seq;
    r.type.textContent = e.type;
    r.type.className = 'c-type t-' + e.type;
    r.link.textContent = visible(e.callId);
    if (e.callId) r.link.setAttribute('href', route('s', this.sessionId, 'call', e.callId)); else r.link.removeAttribute('href');
    r.cap.textContent = visible(e.cap);
    if (e.line === undefined) e.line = visible(short(e.msg, 160));
    r.msg.textContent = e.line;
  }

  select(e) {
    this.selected = e;
    this.detail.hidden = false;
    fill(this.detail, `seq ${e.seq}\n`, json(e.msg));
    this.draw();
  }

  // jump scrolls to the event with seq (or the first after it) and selects it.
  jump(seq) {
    if (!(seq > 0)) return;
    const a = this.filtered;
    let lo = 0, hi = a.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (a[mid].seq < seq) lo = mid + 1; else hi = mid; }
    if (lo >= a.length) return;
    this.follow = false;
    this.viewport.scrollTop = Math.max(0, lo * ROW - this.viewport.clientHeight / 2);
    this.select(a[lo]);
  }
}
