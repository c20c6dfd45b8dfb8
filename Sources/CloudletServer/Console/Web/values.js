// Cloudlet Console: field values — how each type is shown, edited and parsed back.
import { h } from './ui.js';

// MARK: - Values

export const FIELD_TYPES = ['STRING', 'INT64', 'DOUBLE', 'TIMESTAMP', 'BYTES', 'LOCATION', 'REFERENCE', 'ASSET'];

/** Text for a field value of the wire, `{value, type}`. */
export function valueText(f) {
  if (!f) return '';
  const t = f.type || '';
  const one = (v, base) => {
    if (v === null || v === undefined) return '';
    switch (base) {
      case 'TIMESTAMP': return new Date(v).toISOString();
      case 'LOCATION': return `${v.latitude}, ${v.longitude}`;
      case 'REFERENCE': return v.recordName;
      case 'ASSETID': return `asset ${v.fileChecksum ? v.fileChecksum.slice(0, 12) : ''} (${v.size || 0} bytes)`;
      case 'BYTES': return `${atob(v).length} bytes`;
      default: return typeof v === 'object' ? JSON.stringify(v) : String(v);
    }
  };
  if (t.endsWith('_LIST')) return (f.value || []).map((v) => one(v, t.slice(0, -5))).join(', ');
  return one(f.value, t);
}

/** A rendering of a field value: links for references and assets, a small map for locations, lists as lists. */
export function valueNode(f, onReference) {
  const t = f.type || '';
  const one = (v, base) => {
    switch (base) {
      case 'REFERENCE':
        return h('button', { class: 'link', type: 'button', onclick: () => onReference(v) }, `→ ${v.recordName}`,
          v.action && v.action !== 'NONE' ? ` (${v.action})` : '');
      case 'ASSETID': {
        const parts = [h('span', {}, valueText({ value: v, type: base }))];
        if (v.downloadURL) {
          parts.push(' ', h('a', { href: v.downloadURL, download: '' }, 'Download'));
          const img = h('img', { class: 'preview', alt: 'Asset preview', src: v.downloadURL });
          img.addEventListener('error', () => img.remove());
          parts.push(img);
        }
        return h('span', {}, parts);
      }
      case 'LOCATION': return h('span', {}, `${v.latitude.toFixed(5)}, ${v.longitude.toFixed(5)}`, miniMap(v));
      default: return valueText({ value: v, type: base });
    }
  };
  if (t.endsWith('_LIST')) {
    return h('ol', { class: 'list' }, (f.value || []).map((v) => h('li', {}, one(v, t.slice(0, -5)))));
  }
  return one(f.value, t);
}

/** A small equirectangular world map with the location marked (no tiles, no network). */
export function miniMap(loc) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'map');
  svg.setAttribute('viewBox', '-180 -90 360 180');
  svg.setAttribute('width', '180');
  svg.setAttribute('height', '90');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', `Map: latitude ${loc.latitude}, longitude ${loc.longitude}`);
  for (let x = -120; x <= 120; x += 60) {
    const l = document.createElementNS(ns, 'line');
    Object.entries({ x1: x, x2: x, y1: -90, y2: 90, stroke: '#c5d5ea', 'stroke-width': 0.8 }).forEach(([k, v]) => l.setAttribute(k, v));
    svg.append(l);
  }
  for (let y = -60; y <= 60; y += 30) {
    const l = document.createElementNS(ns, 'line');
    Object.entries({ x1: -180, x2: 180, y1: y, y2: y, stroke: '#c5d5ea', 'stroke-width': 0.8 }).forEach(([k, v]) => l.setAttribute(k, v));
    svg.append(l);
  }
  const dot = document.createElementNS(ns, 'circle');
  Object.entries({ cx: loc.longitude, cy: -loc.latitude, r: 5, fill: '#c62f3a', stroke: '#fff', 'stroke-width': 1.5 })
    .forEach(([k, v]) => dot.setAttribute(k, v));
  svg.append(dot);
  return svg;
}

/** The wire value for text typed into a form, given the schema type (`STRING`, `INT64_LIST`, …). */
export function parseValue(text, type) {
  const base = type.replace(/_LIST$/, '');
  const one = (s) => {
    s = s.trim();
    switch (base) {
      case 'INT64': {
        if (!/^-?\d+$/.test(s)) throw new Error(`'${s}' is not an integer`);
        return Number(s);
      }
      case 'DOUBLE': {
        const d = Number(s);
        if (s === '' || Number.isNaN(d)) throw new Error(`'${s}' is not a number`);
        return d;
      }
      case 'TIMESTAMP': {
        const ms = /^\d+$/.test(s) ? Number(s) : Date.parse(s);
        if (Number.isNaN(ms)) throw new Error(`'${s}' is not a date (2026-12-03T10:00:00Z or milliseconds)`);
        return ms;
      }
      case 'LOCATION': {
        const [lat, lon] = s.split(',').map(Number);
        if (Number.isNaN(lat) || Number.isNaN(lon)) throw new Error(`'${s}' is not "latitude, longitude"`);
        return { latitude: lat, longitude: lon };
      }
      case 'REFERENCE': return { recordName: s, action: 'NONE' };
      case 'BYTES': return btoa(s);
      default: return s;
    }
  };
  if (type.endsWith('_LIST')) return text.split(',').filter((s) => s.trim() !== '').map(one);
  return one(text);
}

/** The text a form shows for a value (the inverse of parseValue). */
export function editText(f, type) {
  if (!f) return '';
  const base = type.replace(/_LIST$/, '');
  const one = (v) => {
    switch (base) {
      case 'TIMESTAMP': return new Date(v).toISOString();
      case 'LOCATION': return `${v.latitude}, ${v.longitude}`;
      case 'REFERENCE': return v.recordName;
      case 'BYTES': return atob(v);
      default: return String(v);
    }
  };
  return type.endsWith('_LIST') ? (f.value || []).map(one).join(', ') : one(f.value);
}

/**
 * The editor of an asset field (`ASSETID` or `ASSETID_LIST`): what it holds, a file picker to replace it and Remove.
 * `value(upload)` uploads the chosen files first (`upload(file)` → the upload's `singleFile`, receipt included) and
 * gives the field's wire value (undefined: none); an asset kept as it was is sent back as the record holds it.
 */
export function assetEditor(f, current) {
  const list = f.type.endsWith('_LIST');
  const of = (field) => (field ? (list ? field.value || [] : [field.value]) : []);
  let kept = of(current);
  const shown = h('span', { class: 'muted' });
  const picker = h('input', { type: 'file', multiple: list, class: 'record-input', 'aria-label': `${f.name} (${f.type})`, dataset: { field: f.name } });
  const remove = h('button', { type: 'button', class: 'link', 'aria-label': `Remove ${f.name}` }, 'Remove');
  const show = () => {
    shown.textContent = kept.length ? kept.map((v) => valueText({ value: v, type: 'ASSETID' })).join(', ') : 'no file';
    remove.hidden = kept.length === 0;
  };
  const keep = (field) => { kept = of(field); picker.value = ''; show(); };
  remove.addEventListener('click', () => keep(null));
  show();
  return {
    node: h('div', { class: 'asset-edit' }, shown, ' ', remove, picker),
    input: picker,
    keep,
    async value(upload) {
      if (picker.files.length) {
        const uploaded = [];
        for (const file of picker.files) uploaded.push(await upload(file));
        kept = uploaded;
        picker.value = '';  // saved again after a conflict: the receipts, not a second upload
        show();
      }
      if (kept.length === 0) return undefined;
      const values = kept.map(({ downloadURL, ...asset }) => asset);
      return { value: list ? values : values[0] };
    },
  };
}
