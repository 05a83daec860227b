// conn.js: one session's WebSocket as the operator, resuming from the last
// seq it saw after a dropped connection (?after=<seq>): events are applied
// in seq order, a seq already seen is dropped, and a gap is counted (for
// the operator, who sees every event, there must be none).
import { api, socket } from './dom.js';

export class SessionConn extends EventTarget {
  constructor(id, { after = 0 } = {}) {
    super();
    this.id = id;
    this.lastSeq = after;     // resume point: every event up to it was applied
    this.state = 'connecting';
    this.states = ['connecting']; // every state shown, for the record
    this.gaps = 0;
    this.duplicates = 0;
    this.reconnects = 0;
    this.n = 0;
    this.replies = new Map();
    this.closed = false;
    this.deleted = false; // closed because the session was deleted
    this.backoff = 200;
    this.ws = null;
  }

  start() { this.open(); return this; }

  setState(s) {
    this.state = s;
    this.states.push(s);
    this.dispatchEvent(new CustomEvent('state', { detail: s }));
  }

  open() {
    const ws = socket(`/v1/sessions/${encodeURIComponent(this.id)}/ws?after=${this.lastSeq}`);
    this.ws = ws;
    ws.onopen = () => { this.backoff = 200; this.setState('live'); };
    ws.onmessage = (m) => this.onFrame(m.data);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      for (const [, r] of this.replies) r.reject(new Error('connection lost before the reply'));
      this.replies.clear();
      if (this.closed) return;
      if (ev.code === 1008 || ev.code === 4404) {
        this.deleted = ev.code === 4404;
        this.setState('closed: ' + (ev.reason || 'refused'));
        return;
      }
      this.setState('reconnecting');
      this.reconnects++;
      setTimeout(() => { if (!this.closed) this.probeAndOpen(); }, this.backoff);
      this.backoff = Math.min(this.backoff * 2, 5000);
    };
  }

  // probeAndOpen checks that the session still exists before reconnecting:
  // a deleted session must not be recreated, and an operator cannot.
  async probeAndOpen() {
    try {
      await api('GET', `/v1/sessions/${encodeURIComponent(this.id)}`);
    } catch (e) {
      if (e.status === 404 || e.status === 401) {
        this.deleted = e.status === 404;
        this.setState(this.deleted ? 'closed: the session was deleted' : 'closed: signed out');
        return;
      }
    }
    if (!this.closed) this.open();
  }

  onFrame(data) {
    let f;
    try { f = JSON.parse(data); } catch { return; }
    const msg = f && f.msg;
    if (!msg || typeof msg.type !== 'string') return;
    if ((msg.type === 'ack' || msg.type === 'error') && f.ref) {
      const r = this.replies.get(f.ref);
      if (r) { this.replies.delete(f.ref); r.resolve(f); }
      return;
    }
    if (msg.type === 'ack' || msg.type === 'error') return;
    const seq = Number(f.seq);
    if (msg.type === 'snapshot') {
      this.lastSeq = seq;
      this.dispatchEvent(new CustomEvent('snapshot', { detail: f }));
      return;
    }
    if (seq <= this.lastSeq) { this.duplicates++; return; }
    if (seq !== this.lastSeq + 1) this.gaps++;
    this.lastSeq = seq;
    this.dispatchEvent(new CustomEvent('event', { detail: f }));
  }

  // send sends one command and resolves with its reply frame (ack or error).
  send(msg) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error('not connected (' + this.state + ')'));
    const id = 'k' + (++this.n);
    return new Promise((resolve, reject) => {
      this.replies.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ v: 2, id, msg }));
    });
  }

  close() {
    this.closed = true;
    if (this.ws) this.ws.close(1000);
  }
}

// sendFrame sends one command over HTTP (POST /v1/sessions/{id}/frames)
// and returns the reply frame; an error reply is thrown with its code.
export async function sendFrame(sessionId, msg) {
  try {
    return await api('POST', `/v1/sessions/${encodeURIComponent(sessionId)}/frames`, { v: 2, id: 'h1', msg });
  } catch (e) {
    if (e.data && e.data.msg) { e.code = e.data.msg.code; e.message = e.data.msg.message; }
    throw e;
  }
}
