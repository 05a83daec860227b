// form.js: a form drawn from a JSON Schema (a capability's inputSchema).
// string (format hints, enum as a select), number, integer, boolean,
// arrays, nested objects, required marks, descriptions, defaults, oneOf /
// anyOf as a choice; anything else gets a raw JSON box. Every field
// element carries data-pointer (its JSON pointer) so that the kernel's
// invalid_input errors can be shown at the field. A required field left
// empty is refused in the form; an optional field nobody touched is not
// sent (the tool's own default applies), a checkbox included.
import { h, json, fill } from './dom.js';

const FORMATS = { email: 'email', uri: 'url', url: 'url', date: 'date', 'date-time': 'datetime-local', time: 'time', color: 'color', password: 'password' };

function esc(tok) { return String(tok).replace(/~/g, '~0').replace(/\//g, '~1'); }
function typeOf(s) {
  if (!s || typeof s !== 'object') return null;
  if (Array.isArray(s.type)) return s.type.find((t) => t !== 'null') || null;
  if (s.type) return s.type;
  if (s.properties) return 'object';
  if (s.items) return 'array';
  if (s.enum) return 'enum';
  return null;
}

// touch marks a control edited by the person (not by a default).
function touched(el) {
  const t = { on: false };
  el.addEventListener('input', () => { t.on = true; });
  el.addEventListener('change', () => { t.on = true; });
  return t;
}

// field returns {el, get}: get(errs) returns the value, or undefined to
// omit it; a required value missing is pushed to errs as {pointer,
// message}.
function field(schema, ptr, label, required) {
  schema = schema && typeof schema === 'object' ? schema : {};
  const desc = schema.description ? h('div', { class: 'desc' }, schema.description) : null;
  const lab = label != null ? h('span', { class: 'label' }, label, required ? h('span', { class: 'req', title: 'required' }, ' *') : null) : null;
  const err = h('div', { class: 'field-error', dataset: { errorFor: ptr } });
  const wrap = (control, cls = '') => h('div', { class: 'field ' + cls, dataset: { pointer: ptr } }, h('label', {}, lab, control), desc, err);

  const choices = schema.oneOf || schema.anyOf;
  if (Array.isArray(choices) && choices.length) {
    const sel = h('select', { name: ptr + '#choice', 'aria-label': (label || 'value') + ' variant' },
      choices.map((c, i) => h('option', { value: String(i) }, c.title || c.description || typeOf(c) || ('option ' + (i + 1)))));
    const slot = h('div', { class: 'choice' });
    let cur;
    const draw = () => { cur = field({ ...choices[Number(sel.value)], description: undefined }, ptr, null, false); fill(slot, cur.el); };
    sel.addEventListener('change', draw);
    draw();
    return { el: h('div', { class: 'field choice-field', dataset: { pointer: ptr } }, h('label', {}, lab, sel), desc, slot, err), get: (errs) => cur.get(errs) };
  }
  if (Array.isArray(schema.enum)) {
    const sel = h('select', { name: ptr },
      required ? null : h('option', { value: '' }, '—'),
      schema.enum.map((v, i) => h('option', { value: String(i), selected: schema.default !== undefined && JSON.stringify(schema.default) === JSON.stringify(v) }, typeof v === 'string' ? v : JSON.stringify(v))));
    const t = touched(sel);
    return { el: wrap(sel), get: () => (sel.value === '' || (!required && !t.on) ? undefined : schema.enum[Number(sel.value)]) };
  }
  if ('const' in schema) {
    return { el: wrap(h('code', {}, JSON.stringify(schema.const))), get: () => schema.const };
  }
  const t = typeOf(schema);
  if (t === 'string') {
    const fmt = FORMATS[schema.format];
    const attrs = { name: ptr, type: fmt || 'text', placeholder: schema.format || '' };
    if (typeof schema.default === 'string') attrs.value = schema.default;
    const ctl = schema.maxLength > 200 || schema.format === 'textarea' ? h('textarea', { name: ptr, rows: 3 }) : h('input', attrs);
    if (ctl.tagName === 'TEXTAREA' && typeof schema.default === 'string') ctl.value = schema.default;
    const t = touched(ctl);
    return {
      el: wrap(ctl),
      get: (errs) => {
        if (required) {
          if (ctl.value === '') { errs.push({ pointer: ptr, message: 'required: fill it in' }); return undefined; }
          return ctl.value;
        }
        return ctl.value === '' || !t.on ? undefined : ctl.value;
      },
    };
  }
  if (t === 'number' || t === 'integer') {
    const inp = h('input', { name: ptr, type: 'number', step: t === 'integer' ? '1' : 'any', value: typeof schema.default === 'number' ? String(schema.default) : undefined,
      min: schema.minimum, max: schema.maximum });
    const tch = touched(inp);
    return {
      el: wrap(inp),
      get: (errs) => {
        if (inp.value === '') {
          if (required) errs.push({ pointer: ptr, message: inp.validity.badInput ? 'not a number' : 'required: fill it in' });
          return undefined;
        }
        return required || tch.on ? Number(inp.value) : undefined;
      },
    };
  }
  if (t === 'boolean') {
    const inp = h('input', { name: ptr, type: 'checkbox', checked: schema.default === true });
    const tch = touched(inp);
    return { el: wrap(inp, 'bool'), get: () => (required || tch.on ? inp.checked : undefined) };
  }
  if (t === 'object' && (schema.properties || !schema.additionalProperties)) {
    const req = new Set(Array.isArray(schema.required) ? schema.required : []);
    const kids = Object.entries(schema.properties || {}).map(([k, s]) => [k, field(s, ptr + '/' + esc(k), k, req.has(k))]);
    const fs = h('fieldset', { class: 'object', dataset: { pointer: ptr } },
      label != null ? h('legend', {}, label, required ? h('span', { class: 'req' }, ' *') : null) : null, desc,
      kids.map(([, f]) => f.el), err);
    return {
      el: fs,
      get: (errs) => {
        // An optional object nobody filled in is left out, and so are the
        // required fields inside it.
        const mine = [];
        const o = {};
        for (const [k, f] of kids) { const v = f.get(mine); if (v !== undefined) o[k] = v; }
        const keep = Object.keys(o).length || required || label == null;
        if (keep) errs.push(...mine);
        return keep ? o : undefined;
      },
    };
  }
  if (t === 'array' && schema.items && typeof schema.items === 'object' && !Array.isArray(schema.items)) {
    const list = h('div', { class: 'array-items' });
    const items = [];
    const add = (v) => {
      const i = items.length;
      const f = field(schema.items, ptr + '/' + i, '#' + (i + 1), false);
      const row = h('div', { class: 'array-item' }, f.el, h('button', { type: 'button', class: 'small', onclick: () => { items.splice(items.indexOf(entry), 1); row.remove(); } }, 'remove'));
      const entry = { f, row };
      items.push(entry);
      list.append(row);
      void v;
    };
    if (Array.isArray(schema.default)) schema.default.forEach(add);
    const fs = h('fieldset', { class: 'array', dataset: { pointer: ptr } },
      h('legend', {}, label || 'items', required ? h('span', { class: 'req' }, ' *') : null), desc, list,
      h('button', { type: 'button', class: 'small', onclick: () => add() }, 'add item'), err);
    return { el: fs, get: (errs) => (items.length || required ? items.map((e) => e.f.get(errs)) : undefined) };
  }
  // Anything the form cannot draw: raw JSON for this value.
  const ta = h('textarea', { name: ptr, rows: 3, class: 'raw', placeholder: 'JSON' });
  if (schema.default !== undefined) ta.value = json(schema.default);
  return {
    el: wrap(ta, 'rawfield'),
    get: (errs) => {
      if (ta.value.trim() === '') {
        if (required) errs.push({ pointer: ptr, message: 'required: write its JSON' });
        return undefined;
      }
      try { return JSON.parse(ta.value); } catch { errs.push({ pointer: ptr, message: 'not valid JSON' }); return undefined; }
    },
  };
}

// FieldError is what the form refuses: problems is [{pointer, message}].
export class FieldError extends Error {
  constructor(problems) { super(problems.map((p) => p.message).join('; ')); this.problems = problems; }
}

// schemaForm returns {el, value(), showErrors(problems), clearErrors()}.
// The raw-JSON editor holds the whole input; switching to it copies the
// form's value.
export function schemaForm(schema) {
  const root = field(schema, '', null, true);
  const raw = h('textarea', { class: 'raw-all', rows: 10, name: 'raw-json', hidden: true, spellcheck: 'false' });
  let rawMode = false;
  const toggle = h('button', { type: 'button', class: 'small', onclick: () => {
    rawMode = !rawMode;
    if (rawMode) { const v = root.get([]); raw.value = json(v === undefined ? {} : v); }
    raw.hidden = !rawMode;
    root.el.hidden = rawMode;
    toggle.textContent = rawMode ? 'form' : 'raw JSON';
  } }, 'raw JSON');
  const general = h('div', { class: 'field-error', dataset: { errorFor: '#general' } });
  const el = h('div', { class: 'schema-form' }, h('div', { class: 'form-tools' }, toggle), root.el, raw, general);
  return {
    el,
    value() {
      if (rawMode) {
        try { return JSON.parse(raw.value); } catch (e) { throw new FieldError([{ pointer: '', message: 'the raw JSON does not parse: ' + e.message }]); }
      }
      const errs = [];
      const v = root.get(errs);
      if (errs.length) throw new FieldError(errs);
      return v;
    },
    clearErrors() {
      for (const e of el.querySelectorAll('.field-error')) e.textContent = '';
      for (const e of el.querySelectorAll('.has-error')) e.classList.remove('has-error');
    },
    // showErrors puts each {pointer, message} at the deepest field whose
    // pointer is a prefix of it.
    showErrors(problems) {
      this.clearErrors();
      for (const p of problems) {
        let ptr = p.pointer || '';
        let target = null;
        for (;;) {
          target = [...el.querySelectorAll('[data-pointer]')].find((x) => x.dataset.pointer === ptr);
          if (target || ptr === '') break;
          ptr = ptr.slice(0, ptr.lastIndexOf('/'));
        }
        const box = target ? [...target.querySelectorAll('.field-error')].find((x) => x.dataset.errorFor === ptr) : general;
        (box || general).textContent = ((box || general).textContent ? (box || general).textContent + '; ' : '') + p.message;
        if (target) target.classList.add('has-error');
      }
    },
  };
}

// problemsOf reads the JSON pointers out of a kernel invalid_input message
// ("… at "/a/b": want number; at "/": missing property 'c'"). A missing
// property is placed at the property's own pointer.
export function problemsOf(message) {
  const out = [];
  const re = /at "([^"]*)": ([^;]*?)(?=(?:; at "|$))/g;
  let m;
  while ((m = re.exec(message))) {
    let ptr = m[1] === '/' ? '' : m[1];
    const text = m[2].trim();
    const miss = /missing propert(?:y|ies) (.+)/.exec(text);
    if (miss) {
      for (const name of miss[1].split(',').map((s) => s.trim().replace(/^'|'$/g, ''))) out.push({ pointer: ptr + '/' + esc(name), message: 'required' });
      continue;
    }
    out.push({ pointer: ptr, message: text });
  }
  if (!out.length) out.push({ pointer: '', message });
  return out;
}
