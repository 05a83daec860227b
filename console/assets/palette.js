// palette.js: the command palette (Ctrl-K / Cmd-K) of the open session.
// It lists the capabilities for which the spec's isUserInvokable is true,
// by displayName (falling back to name), searchable; choosing one opens a
// form drawn from its inputSchema. Submitting sends capability_invoke (the
// operator invokes as `user`) and shows the outcome when its
// capability_outcome arrives; invalid_input is shown at the fields. Once
// the session is deleted it says so and offers nothing.
import { h, json, isUserInvokable, fill } from './dom.js';
import { schemaForm, problemsOf, FieldError } from './form.js';

export class Palette {
  constructor(overlay) {
    this.overlay = overlay;
    this.ctx = null; // {conn, capabilities(), outcome(callId) → Promise}
    document.addEventListener('keydown', (e) => {
      if ((e.ctrlKey || e.metaKey) && (e.key === 'k' || e.key === 'K')) {
        e.preventDefault();
        if (this.overlay.hidden) this.open(); else this.close();
      } else if (e.key === 'Escape' && !this.overlay.hidden) {
        this.close();
      }
    });
  }

  attach(ctx) { this.ctx = ctx; }
  detach(ctx) { if (this.ctx === ctx) { this.ctx = null; this.close(); } }
  // ended: ctx's session was deleted; the palette, if open, says so
  // instead of offering a form that can only fail.
  ended(ctx) { if (this.ctx === ctx && !this.overlay.hidden) this.open(); }

  // close hides the palette and gives the focus back to where it was.
  close() {
    const was = !this.overlay.hidden;
    this.overlay.hidden = true;
    this.overlay.replaceChildren();
    const back = this.returnFocus;
    this.returnFocus = null;
    if (was && back && back.isConnected) back.focus();
  }

  // remember keeps the element that had the focus before the palette
  // opened (not the palette's own).
  remember() {
    const a = document.activeElement;
    if (a && a !== document.body && !this.overlay.contains(a)) this.returnFocus = a;
  }

  open() {
    this.remember();
    if (!this.ctx) {
      this.show(h('div', { class: 'palette' }, h('p', {}, 'Open a session to use the command palette.')));
      return;
    }
    if (this.ctx.deleted) {
      this.show(h('div', { class: 'palette' }, h('p', {}, 'This session was deleted: nothing can be invoked in it any more.')));
      return;
    }
    const caps = this.ctx.capabilities().filter(isUserInvokable)
      .map((c) => ({ c, label: c.displayName || c.name }))
      .sort((a, b) => a.label.localeCompare(b.label));
    const list = h('ul', { class: 'palette-list', role: 'listbox', id: 'palette-list', 'aria-label': 'capabilities' });
    const search = h('input', { type: 'search', class: 'palette-search', placeholder: 'Search capabilities…', 'aria-label': 'search capabilities', role: 'combobox', 'aria-expanded': 'true', 'aria-controls': 'palette-list' });
    let shown = [];
    let sel = 0;
    const draw = () => {
      const q = search.value.toLowerCase();
      shown = caps.filter(({ c, label }) => label.toLowerCase().includes(q) || c.name.toLowerCase().includes(q) || (c.description || '').toLowerCase().includes(q));
      sel = Math.min(sel, Math.max(0, shown.length - 1));
      fill(list, ...shown.map(({ c, label }, i) => h('li', { class: i === sel ? 'sel' : '', role: 'option', id: 'palette-opt-' + i, 'aria-selected': i === sel ? 'true' : 'false', dataset: { name: c.name }, onclick: () => this.form(c) },
        h('strong', {}, label), ' ', label !== c.name ? h('code', {}, c.name) : null, h('div', { class: 'desc' }, c.description || ''))));
      if (!shown.length) list.append(h('li', { class: 'muted' }, caps.length ? 'no match' : 'no user-invokable capabilities in this session'));
      search.setAttribute('aria-activedescendant', shown.length ? 'palette-opt-' + sel : '');
    };
    search.addEventListener('input', () => { sel = 0; draw(); });
    search.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowDown') { sel = Math.max(0, Math.min(sel + 1, shown.length - 1)); draw(); e.preventDefault(); }
      if (e.key === 'ArrowUp') { sel = Math.max(sel - 1, 0); draw(); e.preventDefault(); }
      if (e.key === 'Enter' && shown[sel]) { this.form(shown[sel].c); e.preventDefault(); }
    });
    draw();
    this.show(h('div', { class: 'palette' }, search, list));
    search.focus();
  }

  show(el) {
    fill(this.overlay, h('div', { class: 'overlay-bg', role: 'dialog', 'aria-modal': 'true', 'aria-label': 'command palette', onclick: (e) => { if (e.target === e.currentTarget) this.close(); } }, el));
    this.overlay.hidden = false;
  }

  form(cap) {
    this.remember();
    const ctx = this.ctx;
    if (!ctx) return;
    if (ctx.deleted) { this.open(); return; }
    const f = schemaForm(cap.inputSchema);
    const status = h('div', { class: 'palette-status' });
    const submit = h('button', { type: 'submit', class: 'primary' }, 'Invoke');
    // novalidate: the kernel validates the input (its errors land at the
    // fields); the form itself refuses only required fields left empty.
    const form = h('form', { class: 'palette palette-form', novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      f.clearErrors();
      let input;
      try { input = f.value(); } catch (err) {
        if (err instanceof FieldError) { f.showErrors(err.problems); return; }
        throw err;
      }
      if (input === undefined) input = {};
      submit.disabled = true;
      fill(status, h('span', { class: 'muted' }, 'invoking…'));
      try {
        if (!ctx.conn) throw new Error('not connected to the session yet: try again in a moment');
        const reply = await ctx.conn.send({ type: 'capability_invoke', name: cap.name, input });
        if (reply.msg.type === 'error') {
          fill(status, h('div', { class: 'outcome err' }, h('strong', {}, reply.msg.code), ': ', reply.msg.message));
          if (reply.msg.code === 'invalid_input') f.showErrors(problemsOf(reply.msg.message));
          return;
        }
        const callId = reply.msg.callId;
        fill(status, h('span', { class: 'muted' }, 'call ', callId, ' running…'));
        const out = await ctx.outcome(callId);
        fill(status, outcomeView(callId, out));
      } catch (err) {
        fill(status, h('div', { class: 'outcome err' }, String(err.message || err)));
      } finally {
        submit.disabled = false;
      }
    } },
    h('header', {}, h('strong', {}, cap.displayName || cap.name), ' ', h('code', {}, cap.name)),
    h('p', { class: 'desc' }, cap.description || ''),
    f.el,
    h('div', { class: 'form-actions' }, submit, h('button', { type: 'button', onclick: () => this.open() }, 'back')),
    status);
    this.show(form);
    const first = form.querySelector('input, select, textarea');
    if (first) first.focus();
  }
}

export function outcomeView(callId, out) {
  if (out && out.ok) {
    return h('div', { class: 'outcome ok' }, h('strong', {}, 'ok'), ' call ', callId, h('pre', {}, json(out.value)));
  }
  const e = (out && out.error) || {};
  return h('div', { class: 'outcome err' }, h('strong', {}, e.code || 'error'), ' call ', callId, ': ', e.message || '');
}
