// markdown.js: markdown made into DOM nodes, for a render capability's
// fallback and an assistant's messages. A fallback template's
// {{prop}} placeholders are filled from the props as plain text, the result
// is parsed by markdown-it with raw HTML disabled, and the token stream is
// turned into DOM nodes here — tag by tag from a fixed list, text through
// text nodes, links only http(s) and mailto — so no string ever becomes
// HTML.
import markdownit from './vendor/markdown-it-15.0.3.esm.min.mjs';
import { textNode } from './dom.js';

const md = markdownit({ html: false, linkify: false, typographer: false });

const TAGS = new Set(['p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'blockquote',
  'strong', 'em', 's', 'a', 'table', 'thead', 'tbody', 'tr', 'th', 'td', 'hr', 'br', 'code', 'pre']);

// fill replaces {{name}} (or {{a.b}}) with the prop's value as text.
export function fill(template, props) {
  return String(template).replace(/\{\{\s*([A-Za-z0-9_.$-]+)\s*\}\}/g, (_, path) => {
    let v = props;
    for (const k of path.split('.')) {
      if (v == null || typeof v !== 'object' || !Object.prototype.hasOwnProperty.call(v, k)) return '';
      v = v[k];
    }
    if (v == null) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
  });
}

// safeHref keeps an absolute http(s) or mailto link; a relative or
// protocol-relative one (`//host/p`) has no base the model or a peer
// chose, and is drawn as text.
function safeHref(href) {
  try {
    const u = new URL(href); // no base: a relative link throws
    if (!/^[a-z][a-z0-9+.-]*:/i.test(href.trim())) return null;
    if (u.protocol === 'http:' || u.protocol === 'https:' || u.protocol === 'mailto:') return u.href;
  } catch { /* not an absolute URL */ }
  return null;
}

function build(tokens, root) {
  const stack = [root];
  const top = () => stack[stack.length - 1];
  for (const t of tokens) {
    if (t.type === 'inline') { build(t.children || [], top()); continue; }
    if (t.nesting === 1) {
      let tag = TAGS.has(t.tag) ? t.tag : 'span';
      // A link whose target is not kept (relative, //host, javascript:)
      // is its text: an <a> without href would look like a link.
      const href = tag === 'a' ? safeHref(t.attrGet('href') || '') : null;
      if (tag === 'a' && !href) tag = 'span';
      const el = document.createElement(tag);
      if (href) { el.setAttribute('href', href); el.setAttribute('rel', 'noopener noreferrer'); el.setAttribute('target', '_blank'); }
      if (tag === 'ol' && t.attrGet('start')) el.setAttribute('start', String(parseInt(t.attrGet('start'), 10) || 1));
      top().append(el);
      stack.push(el);
    } else if (t.nesting === -1) {
      if (stack.length > 1) stack.pop();
    } else {
      switch (t.type) {
        case 'text': top().append(textNode(t.content)); break;
        case 'code_inline': { const c = document.createElement('code'); c.append(textNode(t.content)); top().append(c); break; }
        case 'code_block': case 'fence': {
          const pre = document.createElement('pre'); const c = document.createElement('code');
          c.append(textNode(t.content)); pre.append(c); top().append(pre); break;
        }
        case 'softbreak': top().append(document.createTextNode('\n')); break;
        case 'hardbreak': top().append(document.createElement('br')); break;
        case 'hr': top().append(document.createElement('hr')); break;
        case 'image': top().append(textNode(t.content || '')); break; // alt text only: no fetch
        default: if (t.content) top().append(textNode(t.content));
      }
    }
  }
}

// renderMarkdown returns a <div class="md"> for the filled template.
export function renderMarkdown(template, props) {
  const div = document.createElement('div');
  div.className = 'md';
  build(md.parse(fill(template, props), {}), div);
  return div;
}

// markdownNode returns a <div class="md"> for markdown text (an
// assistant's message), built the same way: no HTML, tags from the list.
export function markdownNode(text) {
  const div = document.createElement('div');
  div.className = 'md';
  build(md.parse(String(text), {}), div);
  return div;
}
