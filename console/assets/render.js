// render.js: render surfaces. On render_invoked the console draws the
// capability's render.source: an iframe in a sandbox without
// allow-same-origin (props are posted to it as
// {type:"brain.render", callId, props, seq, partial}); a web component only when its
// URL's origin is allowed in the serve config (console.web_component_origins,
// none by default); otherwise the markdown fallback with {{prop}} filled.
// A later render_invoked for the same call updates the props in place.
// For a capability with render.streaming, the kernel sends the props while
// the model is still writing them, as render_invoked events with
// partial: true (best-effort JSON, never validated) before the call's
// final one: the surface redraws with each and shows "streaming…" until
// the final props arrive, or "not made" when the call's outcome comes
// without them (docs/protocol.md, "Streamed props").
import { h, json, originLabel, fill } from './dom.js';
import { renderMarkdown } from './markdown.js';

const TAG = /^[a-z][a-z0-9._]*-[a-z0-9._-]*$/;

function originOf(url) {
  try { const u = new URL(url); return (u.protocol === 'http:' || u.protocol === 'https:') ? u.origin : null; } catch { return null; }
}

export class Surfaces {
  constructor(container, config) {
    this.el = container;
    this.config = config || { frameOrigins: [], webComponentOrigins: [] };
    this.byCall = new Map();
  }

  // show draws (or updates) the surface of one render_invoked.
  show(cap, ev, seq) {
    const partial = ev.partial === true;
    const existing = this.byCall.get(ev.callId);
    if (existing) { existing.update(ev.props, partial); return existing; }
    const s = createSurface(cap, ev, this.config);
    s.mark(partial);
    this.byCall.set(ev.callId, s);
    this.el.prepend(s.card);
    return s;
  }

  // ended tells a surface its call's outcome arrived: a surface still
  // showing partial props will get no final ones (the call was never made).
  ended(callId, outcome) {
    const s = this.byCall.get(callId);
    if (s) s.end(outcome);
  }
}

// createSurface returns the surface of a render_invoked event:
// {card, mark(partial), update(props, partial), end(outcome)}. config is
// the sign-in's {frameOrigins, webComponentOrigins}.
export function createSurface(cap, ev, config) {
  const render = cap && cap.render;
  const target = render && render.targets && render.targets[0];
  const updates = h('span', { class: 'muted updates' }, 'props #1');
  const marker = h('span', { class: 'streaming-marker', hidden: true }, 'streaming…');
  const body = h('div', { class: 'surface-body' });
  const card = h('section', { class: 'surface', dataset: { call: ev.callId } },
    h('header', {}, h('strong', {}, (cap && (cap.displayName || cap.name)) || ev.capabilityName), ' ',
      h('span', { class: 'muted' }, 'call ', ev.callId, ' · target ', target || '—', ' · ', cap ? originLabel(cap.origin) : ''), ' ',
      render && render.streaming ? h('span', { class: 'badge' }, 'streaming') : null, ' ', updates, ' ', marker),
    body);
  let n = 1;
  let update = () => {};
  const fallback = (why) => {
    const box = h('div', { class: 'fallback' });
    const draw = (props) => fill(box, 
      why ? h('p', { class: 'muted' }, why) : null,
      render && render.fallback ? renderMarkdown(render.fallback, props) : h('pre', {}, json(props)));
    draw(ev.props);
    body.append(box);
    return draw;
  };
  const src = render && render.source;
  if (!render || !src) {
    update = fallback('no render spec');
  } else if (src.kind === 'iframe') {
    const origin = originOf(src.url);
    const port = (o) => { try { const u = new URL(o); return u.port || (u.protocol === 'https:' ? '443' : '80'); } catch { return ''; } };
    if (origin && (origin === location.origin || port(origin) === port(location.origin)) && !config.frameOrigins.includes(origin)) {
      // The console's own origin, maybe under another name: never framed.
      update = fallback(`iframe origin ${origin} may be this console's own; a render is never drawn from it`);
    } else if (!origin || origin === location.origin || !config.frameOrigins.includes(origin)) {
      update = fallback(`iframe origin ${origin || '(invalid)'} is not in this page's frame-src; reload the console to allow newly registered origins`);
    } else {
      // credentialless: the frame's requests carry no cookie of its
      // host, so the console's (which the browser would send to every
      // port of this host) never reaches the render's server (Chromium;
      // elsewhere the CSRF token is what keeps the cookie useless).
      const frame = h('iframe', { sandbox: 'allow-scripts', credentialless: true, src: src.url, referrerpolicy: 'no-referrer', class: 'render-frame', title: ev.capabilityName });
      let props = ev.props;
      const post = () => frame.contentWindow && frame.contentWindow.postMessage({ type: 'brain.render', callId: ev.callId, props, seq: n, partial: card.dataset.partial === 'true' }, '*');
      frame.addEventListener('load', post);
      body.append(frame);
      update = (p) => { props = p; post(); };
    }
  } else if (src.kind === 'web-component') {
    const origin = originOf(src.url);
    if (!origin || !config.webComponentOrigins.includes(origin) || !TAG.test(src.tagName || '')) {
      update = fallback(`web component from ${origin || '(invalid)'} is not allowed (serve config console.web_component_origins)`);
    } else {
      // The element is created once its class is defined, so that the
      // props go through its setter (a property set before the upgrade
      // would shadow it).
      let el = null;
      let props = ev.props;
      import(src.url)
        .then(() => customElements.whenDefined(src.tagName))
        .then(() => { el = document.createElement(src.tagName); el.props = props; body.append(el); })
        .catch((e) => body.append(h('p', { class: 'error' }, 'cannot load the component: ', String(e))));
      update = (p) => { props = p; if (el) el.props = p; };
    }
  } else {
    update = fallback('unknown render source');
  }
  let partial = false;
  const mark = (p) => {
    partial = p;
    card.dataset.partial = p ? 'true' : 'false';
    marker.hidden = !p;
    marker.textContent = 'streaming…';
    marker.className = 'streaming-marker';
  };
  return {
    card,
    mark,
    update: (props, p) => { n++; updates.textContent = 'props #' + n; mark(p); update(props); },
    end: (outcome) => {
      if (!partial) return;
      card.dataset.partial = 'abandoned';
      marker.className = 'streaming-marker abandoned';
      marker.textContent = 'not made' + (outcome && outcome.error ? ': ' + outcome.error.code : '');
    },
  };
}
