// Helpers every view uses. Data only ever becomes text (append/textContent) or attribute values.
const WB = {views: {}};

WB.el = function (tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  }
  return e;
};

WB.fmt = function (x, digits) {
  if (x === null || x === undefined) return '\u2014';
  if (typeof x === 'number') return Number(x.toPrecision(digits || 4)).toString();
  return String(x);
};

// base64 little-endian float32 -> Float32Array
WB.f32 = function (b64) {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  return new Float32Array(bytes.buffer);
};

WB.shade = function (v, max, rgb) {
  const a = max > 0 ? Math.max(0, Math.min(1, v / max)) : 0;
  return `rgba(${rgb}, ${a.toFixed(3)})`;
};

WB.mark = function (ok) {
  return ok === true ? 'ok' : ok === false ? 'bad' : 'plain';
};

WB.section = function (view, title, ...children) {
  return WB.el('div', {'data-view': view, class: 'view'}, WB.el('h4', {}, title), ...children);
};
