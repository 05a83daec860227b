// The MCP App of a brain render capability (MCP Apps, SEP-1865): drawn by
// the host in a sandboxed iframe, it speaks JSON-RPC to the host over
// postMessage, is given the call's props as the tool's input (partial
// input while the model streams it) and its result, and draws the props
// with the capability's component or its markdown fallback. Every prop
// reaches the page through textContent or a property: no string the host
// sends ever becomes HTML.
(() => {
  const cap = JSON.parse(document.getElementById('brain-capability').textContent);
  const root = document.getElementById('app');
  const status = document.getElementById('status');
  const host = window.parent;
  let nextID = 1;
  const waiting = new Map();
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = nextID++;
    waiting.set(id, { resolve, reject });
    host.postMessage({ jsonrpc: '2.0', id, method, params }, '*');
  });
  const notify = (method, params) => host.postMessage({ jsonrpc: '2.0', method, params }, '*');

  const el = (tag, text) => { const e = document.createElement(tag); if (text != null) e.textContent = text; return e; };

  // fill replaces {{name}} (or {{a.b}}) with the prop's value as text.
  const fill = (template, props) => String(template).replace(/\{\{\s*([A-Za-z0-9_.$-]+)\s*\}\}/g, (_, path) => {
    let v = props;
    for (const k of path.split('.')) {
      if (v == null || typeof v !== 'object' || !Object.prototype.hasOwnProperty.call(v, k)) return '';
      v = v[k];
    }
    if (v == null) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
  });
  // inline draws **bold**, *em* and `code` spans as nodes, the rest as text.
  const inline = (parent, text) => {
    const re = /(\*\*[^*]+\*\*|`[^`]+`|\*[^*]+\*)/g;
    let last = 0;
    for (const m of text.matchAll(re)) {
      if (m.index > last) parent.append(document.createTextNode(text.slice(last, m.index)));
      const t = m[0];
      if (t.startsWith('**')) parent.append(el('strong', t.slice(2, -2)));
      else if (t.startsWith('`')) parent.append(el('code', t.slice(1, -1)));
      else parent.append(el('em', t.slice(1, -1)));
      last = m.index + t.length;
    }
    if (last < text.length) parent.append(document.createTextNode(text.slice(last)));
  };
  // markdown draws a fallback template's headings, lists, code blocks and
  // paragraphs: a small subset, every piece of text a text node.
  const markdown = (src) => {
    const out = document.createDocumentFragment();
    let list = null, code = null, para = null;
    for (const line of String(src).split('\n')) {
      if (code) {
        if (line.startsWith('```')) { out.append(code); code = null; } else code.firstChild.textContent += line + '\n';
        continue;
      }
      if (line.startsWith('```')) { list = para = null; code = el('pre'); code.append(el('code', '')); continue; }
      const h = /^(#{1,6})\s+(.*)$/.exec(line);
      const li = /^\s*[-*]\s+(.*)$/.exec(line);
      if (h) { list = para = null; const e = el('h' + h[1].length); inline(e, h[2]); out.append(e); } else if (li) {
        para = null;
        if (!list) { list = el('ul'); out.append(list); }
        const e = el('li'); inline(e, li[1]); list.append(e);
      } else if (line.trim() === '') { list = para = null; } else {
        list = null;
        if (!para) { para = el('p'); out.append(para); } else para.append(document.createTextNode(' '));
        inline(para, line);
      }
    }
    if (code) out.append(code);
    return out;
  };

  let props = {};
  let partial = false;
  let draw = null; // set once the source is chosen
  const fallback = (why) => (p) => {
    root.replaceChildren();
    if (why) { const w = el('p', why); w.className = 'why'; root.append(w); }
    if (cap.render && cap.render.fallback) root.append(markdown(fill(cap.render.fallback, p)));
    else root.append(el('pre', JSON.stringify(p, null, 2)));
  };
  const choose = () => {
    const src = cap.render && cap.render.source;
    if (src && src.kind === 'iframe') {
      const frame = document.createElement('iframe');
      frame.setAttribute('sandbox', 'allow-scripts');
      frame.setAttribute('referrerpolicy', 'no-referrer');
      frame.title = cap.displayName || cap.name;
      frame.src = src.url;
      let seq = 0;
      const post = () => frame.contentWindow && frame.contentWindow.postMessage({ type: 'brain.render', props, partial, seq: ++seq }, '*');
      frame.addEventListener('load', post);
      root.replaceChildren(frame);
      return post;
    }
    if (src && src.kind === 'web-component' && /^[a-z][a-z0-9._]*-[a-z0-9._-]*$/.test(src.tagName || '')) {
      let comp = null;
      import(src.url)
        .then(() => customElements.whenDefined(src.tagName))
        .then(() => { comp = document.createElement(src.tagName); comp.props = props; root.replaceChildren(comp); })
        .catch((e) => { draw = fallback('the component could not be loaded here (' + String(e) + '); its fallback instead:'); draw(props); });
      return () => { if (comp) comp.props = props; };
    }
    return fallback(null);
  };
  const show = (p, isPartial) => {
    if (p == null || typeof p !== 'object') p = {};
    props = p; partial = isPartial;
    document.body.dataset.partial = String(isPartial);
    if (!draw) draw = choose();
    draw(props);
    const h = document.documentElement.scrollHeight;
    notify('ui/notifications/size-changed', { height: h });
  };

  window.addEventListener('message', (ev) => {
    if (ev.source !== host) return;
    const m = ev.data;
    if (!m || m.jsonrpc !== '2.0') return;
    if (m.id != null && !m.method) { // a response
      const w = waiting.get(m.id);
      if (w) { waiting.delete(m.id); if (m.error) w.reject(m.error); else w.resolve(m.result); }
      return;
    }
    const p = m.params || {};
    switch (m.method) {
      case 'ui/notifications/tool-input': show(p.arguments, false); break;
      case 'ui/notifications/tool-input-partial': show(p.arguments, true); break;
      case 'ui/notifications/tool-result': {
        const err = p.isError;
        const txt = Array.isArray(p.content) ? p.content.filter((c) => c && c.type === 'text').map((c) => c.text).join('\n') : '';
        status.textContent = err ? 'failed: ' + txt : 'done';
        status.className = err ? 'error' : 'done';
        break;
      }
      case 'ui/notifications/tool-cancelled': status.textContent = 'cancelled'; break;
      case 'ui/resource-teardown': if (m.id != null) host.postMessage({ jsonrpc: '2.0', id: m.id, result: {} }, '*'); break;
      default:
        if (m.id != null && m.method) host.postMessage({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'method not found' } }, '*');
    }
  });

  request('ui/initialize', {
    protocolVersion: '2026-01-26',
    appInfo: { name: 'brain:' + cap.name, version: '1' },
    appCapabilities: {},
  }).then(() => notify('ui/notifications/initialized', {}), () => notify('ui/notifications/initialized', {}));
})();
