// registry.js: a session's registry, readable: one line per capability —
// name, displayName and badges (approval, audience, render, scope) — with
// its description, details and input schema one click away, and "try it"
// (the palette's form) for every capability the operator may invoke. The
// audience shown is the one the kernel enforces: llm as registered (both
// llm and user when omitted, the spec's default), user only when the
// spec's isUserInvokable says so. A deleted session's registry has no
// "try it".
import { h, json, originLabel, isUserInvokable, fill, append } from './dom.js';

export function audiences(c) {
  const set = Array.isArray(c.audience);
  const out = [];
  if (set ? c.audience.includes('llm') : true) out.push('llm');
  if (isUserInvokable(c)) out.push('user');
  if (set && c.audience.includes('runtime')) out.push('runtime');
  return { list: out, byDefault: !set };
}

export class RegistryView {
  constructor(sv) {
    this.sv = sv;
    this.list = h('ul', { class: 'registry', id: 'registry' });
    this.count = h('span', { class: 'muted' });
    this.el = h('section', { class: 'registry-view' }, h('h2', {}, 'Registry ', this.count), this.list);
    this.open = new Set(); // names shown expanded
  }

  draw() {
    const caps = [...this.sv.caps.values()].sort((a, b) => a.name.localeCompare(b.name));
    this.count.textContent = `${caps.length} capabilities`;
    fill(this.list, ...caps.map((c) => this.item(c)));
  }

  item(c) {
    const a = audiences(c);
    const badges = [];
    if (c.requiresApproval) badges.push(h('span', { class: 'badge warn' }, 'approval'));
    badges.push(h('span', { class: 'badge' + (a.list.length ? '' : ' muted') }, a.list.length ? a.list.join(' · ') : 'no audience', a.byDefault ? ' (default)' : ''));
    if (c.render) badges.push(h('span', { class: 'badge' }, 'render → ', (c.render.targets || []).join(', ')));
    if (c.scope === 'turn') badges.push(h('span', { class: 'badge' }, 'turn scope'));
    if (c.fireAndForget) badges.push(h('span', { class: 'badge' }, 'fire-and-forget'));
    const detail = h('div', { class: 'cap-detail', hidden: !this.open.has(c.name) });
    const row = h('button', { type: 'button', class: 'cap-row', 'aria-expanded': this.open.has(c.name) ? 'true' : 'false',
      onclick: () => {
        const show = detail.hidden;
        detail.hidden = !show;
        row.setAttribute('aria-expanded', show ? 'true' : 'false');
        if (show) this.open.add(c.name); else this.open.delete(c.name);
      } },
    h('code', { class: 'cap-name' }, c.name), c.displayName ? h('span', { class: 'cap-display' }, c.displayName) : null, h('span', { class: 'badges' }, badges));
    const userOK = isUserInvokable(c);
    append(detail, [
      h('p', { class: 'cap-desc' }, c.description || ''),
      h('p', { class: 'muted' }, 'origin ', originLabel(c.origin), ' · side ', c.side, c.kind ? ' · kind ' + c.kind : '', ' · scope ', c.scope || 'session',
        ' · timeout ', c.callTimeoutMs != null ? c.callTimeoutMs + ' ms' : 'default',
        ' · ', userOK ? 'user-invokable' : 'not user-invokable (isUserInvokable)'),
      h('details', { class: 'cap-schema' }, h('summary', {}, 'input schema'), h('pre', {}, json(c.inputSchema))),
      c.render ? h('details', { class: 'cap-render' }, h('summary', {}, 'render'), h('pre', {}, json(c.render))) : null,
      userOK && !this.sv.deleted ? h('button', { type: 'button', class: 'small primary try', onclick: () => this.sv.palette.form(c) }, 'Try it') : null]);
    return h('li', { class: 'cap', dataset: { name: c.name } }, row, detail);
  }
}
