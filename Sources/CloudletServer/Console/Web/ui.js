// Cloudlet Console: what every page shares — the session's state, DOM helpers, dialogs, the console API, the
// database pickers. Every value from the server reaches the page as text nodes (never as HTML).

export const BASE = '/cloudlet/console/api/';
export const state = {
  csrf: null,
  container: localStorage.getItem('cloudlet.container') || '',
  environment: localStorage.getItem('cloudlet.environment') || 'development',
  timers: [],
  sockets: [],
};

// MARK: - DOM helpers

/** Creates an element: h('button', {class: 'primary', onclick: f}, 'Save'). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'style') el.style.cssText = v;  // through CSSOM: the CSP forbids style attributes
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export let fieldCounter = 0;
/** A labelled control: {label, control} where control gets an id the label points to. */
export function field(label, control) {
  if (!control.id) control.id = `f${++fieldCounter}`;
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
}

export function select(options, value, attrs) {
  const s = h('select', attrs || {});
  for (const o of options) {
    const [v, text] = Array.isArray(o) ? o : [o, o];
    s.append(h('option', { value: v, selected: v === value }, text));
  }
  return s;
}

export function toast(message, isError) {
  const t = document.getElementById('toast');
  t.textContent = message;
  t.className = isError ? 'error' : '';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, isError ? 8000 : 3500);
}

/** A modal dialog; resolves with the value `build` passes to its `close`, or null when cancelled. */
export function dialog(title, build) {
  const d = document.getElementById('dialog');
  d.replaceChildren();
  return new Promise((resolve) => {
    let settled = false;
    // Escape closes the dialog: cancelled. (A close event queued by the previous dialog arrives while this one is
    // open, and is not for this one.)
    function onClose() {
      if (!d.open) close(null);
    }
    function close(value) {
      if (settled) return;
      settled = true;
      d.removeEventListener('close', onClose);
      d.close();
      resolve(value);
    }
    d.append(h('h2', { id: 'dialog-title' }, title), ...build(close).filter((x) => x));
    d.addEventListener('close', onClose);
    d.showModal();
    const first = d.querySelector('input, select, textarea, button.primary, button.danger');
    if (first) first.focus();
  });
}

export function actions(...buttons) { return h('div', { class: 'dialog-actions' }, ...buttons); }

// MARK: - The API

export class APIError extends Error {
  constructor(status, body) {
    super(body.reason || `HTTP ${status}`);
    this.status = status;
    this.code = body.serverErrorCode;
  }
}

/** Calls the console API. GET unless a body or method is given; every other method carries the CSRF token. */
export async function api(path, { method, body, text } = {}) {
  const m = method || (body !== undefined ? 'POST' : 'GET');
  const headers = {};
  if (m !== 'GET') headers['X-Cloudlet-CSRF'] = state.csrf;
  let payload;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    headers['Content-Type'] = typeof body === 'string' ? 'text/plain' : 'application/json';
  }
  const response = await fetch(BASE + path, { method: m, headers, body: payload, credentials: 'same-origin' });
  if (response.status === 401) {
    window.location.reload();  // the session ended: the root serves the sign-in page, which comes back here
    throw new APIError(401, { reason: 'signed out' });
  }
  if (text && response.ok) return response.text();
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, json);
  return json;
}

export function q(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') s.set(k, v);
  return s.toString();
}

export function needContainer() {
  if (state.container) return true;
  document.getElementById('view').replaceChildren(
    h('h1', { class: 'page' }, 'Choose a container'),
    h('p', { class: 'lead' }, 'Type a container identifier (such as iCloud.com.example.app) in the bar above.'));
  document.getElementById('container').focus();
  return false;
}

/** A CloudKit operation on a database, performed for the admin (as the developer, or as `user`). */
export function db(scope, op, body, user) {
  const path = `database/${encodeURIComponent(state.container)}/${state.environment}/${scope}/${op}`;
  return api(`${path}${user ? '?' + q({ user }) : ''}`, { body: body || {} });
}

export const schemaCache = {};
export const schemaRoles = {};
export async function schema(environment) {
  const env = environment || state.environment;
  const r = await api(`schema?${q({ container: state.container, environment: env })}`);
  schemaCache[env] = r.recordTypes;
  schemaRoles[env] = r.roles;
  return r.recordTypes;
}

export const pages = {};

/** Renders the page the address names again; console.js supplies the renderer. */
export const nav = { render: async () => {} };
export function route() { return nav.render(); }

/** The database pickers shared by the records, zones, subscriptions and changes pages. */
export function scopePicker(onChange, { zones = true } = {}) {
  const saved = JSON.parse(sessionStorage.getItem('cloudlet.scope') || '{}');
  const scope = select([['public', 'Public'], ['private', 'Private'], ['shared', 'Shared']], saved.scope || 'public', { id: 'db-scope' });
  const user = h('input', { id: 'db-user', list: 'users', placeholder: 'user name', spellcheck: 'false', value: saved.user || '' });
  const users = h('datalist', { id: 'users' });
  const zone = select([['_defaultZone', '_defaultZone']], saved.zone || '_defaultZone', { id: 'db-zone' });
  const save = () => sessionStorage.setItem('cloudlet.scope', JSON.stringify({ scope: scope.value, user: user.value, zone: zone.value }));
  const loadZones = async () => {
    if (!zones) return;
    const current = zone.value;
    try {
      const r = await db(scope.value, 'zones/list', {}, user.value.trim());
      zone.replaceChildren(...r.zones.map((z) => h('option', { value: z.zoneID.zoneName, selected: z.zoneID.zoneName === current }, z.zoneID.zoneName)));
    } catch (_) {
      zone.replaceChildren(h('option', { value: '_defaultZone' }, '_defaultZone'));
    }
  };
  api('admin/users/list').then((r) => users.replaceChildren(...r.users.map((u) => h('option', { value: u.name })))).catch(() => {});
  for (const el of [scope, user, zone]) el.addEventListener('change', async () => { if (el !== zone) await loadZones(); save(); onChange(); });
  const node = h('div', { class: 'toolbar' }, field('Database', scope), field('User (private, shared, subscriptions)', user), users,
    zones ? field('Zone', zone) : null);
  const ready = loadZones();
  return {
    node, ready,
    get scope() { return scope.value; },
    get user() { return user.value.trim(); },
    get zoneID() { return { zoneName: zone.value || '_defaultZone' }; },
  };
}

export function confirmDialog(title, text) {
  return dialog(title, (close) => [h('p', {}, text), actions(
    h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'),
    h('button', { class: 'danger', type: 'button', onclick: () => close(true) }, 'Delete'))]);
}
