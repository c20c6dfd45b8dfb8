'use strict';
// Cloudlet Console: a single page over the console's JSON API (/cloudlet/console/api/…). Plain JavaScript, no build
// step, no libraries. Every value from the server reaches the page as text nodes (never as HTML).

const BASE = '/cloudlet/console/api/';
const state = {
  csrf: null,
  container: localStorage.getItem('cloudlet.container') || '',
  environment: localStorage.getItem('cloudlet.environment') || 'development',
  timers: [],
  sockets: [],
};

// MARK: - DOM helpers

/** Creates an element: h('button', {class: 'primary', onclick: f}, 'Save'). */
function h(tag, attrs, ...children) {
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

let fieldCounter = 0;
/** A labelled control: {label, control} where control gets an id the label points to. */
function field(label, control) {
  if (!control.id) control.id = `f${++fieldCounter}`;
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control);
}

function select(options, value, attrs) {
  const s = h('select', attrs || {});
  for (const o of options) {
    const [v, text] = Array.isArray(o) ? o : [o, o];
    s.append(h('option', { value: v, selected: v === value }, text));
  }
  return s;
}

function toast(message, isError) {
  const t = document.getElementById('toast');
  t.textContent = message;
  t.className = isError ? 'error' : '';
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, isError ? 8000 : 3500);
}

/** A modal dialog; resolves with the value `build` passes to its `close`, or null when cancelled. */
function dialog(title, build) {
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

function actions(...buttons) { return h('div', { class: 'dialog-actions' }, ...buttons); }

// MARK: - The API

class APIError extends Error {
  constructor(status, body) {
    super(body.reason || `HTTP ${status}`);
    this.status = status;
    this.code = body.serverErrorCode;
  }
}

/** Calls the console API. GET unless a body or method is given; every other method carries the CSRF token. */
async function api(path, { method, body, text } = {}) {
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
    window.location.replace('/cloudlet/console/');  // the session ended: back to sign-in
    throw new APIError(401, { reason: 'signed out' });
  }
  if (text && response.ok) return response.text();
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, json);
  return json;
}

function q(params) {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') s.set(k, v);
  return s.toString();
}

function needContainer() {
  if (state.container) return true;
  document.getElementById('view').replaceChildren(
    h('h1', { class: 'page' }, 'Choose a container'),
    h('p', { class: 'lead' }, 'Type a container identifier (such as iCloud.com.example.app) in the bar above.'));
  document.getElementById('container').focus();
  return false;
}

/** A CloudKit operation on a database, performed for the admin (as the developer, or as `user`). */
function db(scope, op, body, user) {
  const path = `database/${encodeURIComponent(state.container)}/${state.environment}/${scope}/${op}`;
  return api(`${path}${user ? '?' + q({ user }) : ''}`, { body: body || {} });
}

const schemaCache = {};
const schemaRoles = {};
async function schema(environment) {
  const env = environment || state.environment;
  const r = await api(`schema?${q({ container: state.container, environment: env })}`);
  schemaCache[env] = r.recordTypes;
  schemaRoles[env] = r.roles;
  return r.recordTypes;
}

// MARK: - Values

const FIELD_TYPES = ['STRING', 'INT64', 'DOUBLE', 'TIMESTAMP', 'BYTES', 'LOCATION', 'REFERENCE', 'ASSET'];

/** Text for a field value of the wire, `{value, type}`. */
function valueText(f) {
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
function valueNode(f, onReference) {
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
function miniMap(loc) {
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
function parseValue(text, type) {
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
function editText(f, type) {
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

// MARK: - Pages

const pages = {};

pages.schema = async (view) => {
  const types = await schema();
  const roles = schemaRoles[state.environment] || [];
  const dev = state.environment === 'development';
  view.append(
    h('h1', { class: 'page' }, 'Schema'),
    h('p', { class: 'lead' }, dev
      ? 'Record types of the development environment. Add types, fields and indexes here; deploy to reach production.'
      : 'Record types of the production environment. Production changes only by deploying development.'));
  const bar = h('div', { class: 'toolbar' });
  if (dev) {
    bar.append(
      h('button', { class: 'primary', type: 'button', onclick: () => addTypeDialog() }, 'Add record type'),
      h('button', { type: 'button', onclick: () => deployDialog() }, 'Deploy to production…'),
      h('button', { class: 'danger', type: 'button', onclick: () => resetDialog() }, 'Reset development…'));
  }
  bar.append(h('button', { type: 'button', onclick: () => { location.hash = '#schema-text'; } }, 'Schema text'));
  view.append(bar);
  if (types.length === 0) {
    view.append(h('div', { class: 'panel empty' }, 'No record types yet.'));
    return;
  }
  for (const t of types) view.append(typePanel(t, dev, roles));
  // While indexes build, look again every 2 s (the page is replaced when they are done).
  if (types.some((t) => t.fields.some((f) => f.building))) {
    const again = () => {
      const busy = document.getElementById('dialog').open || ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement.tagName);
      if (busy) state.timers.push(setTimeout(again, 2000));  // not while someone is typing
      else route();
    };
    state.timers.push(setTimeout(again, 2000));
  }
  view.append(await rolesPanel(roles, dev));
};

const BUILT_IN_ROLES = ['_world', '_icloud', '_creator'];
const PERMISSIONS = ['READ', 'CREATE', 'WRITE'];

/** Custom security roles with their members (per container), and forms to create roles and change members. */
async function rolesPanel(roles, dev) {
  const listed = await api(`admin/roles/list?${q({ container: state.container })}`).catch(() => ({ roles: [] }));
  const userList = await api('admin/users/list').catch(() => ({ users: [] }));
  const nameOf = Object.fromEntries(userList.users.map((u) => [u.userRecordName, u.name]));
  // Members are kept as userRecordNames; shown (and removed) by user name.
  const members = Object.fromEntries(listed.roles.map((r) => [r.name, r.members.map((m) => nameOf[m] || m)]));
  const member = async (action, role, user) => {
    try {
      await api(`admin/roles/${action}?${q({ container: state.container, role, user })}`, { method: 'POST' });
      toast(action === 'add-member' ? `${user} is a member of ${role}.` : `${user} left ${role}.`);
      route();
    } catch (e) { toast(e.message, true); }
  };
  const rows = roles.map((role) => {
    const user = h('input', { 'aria-label': `User to add to ${role}`, list: 'role-users', placeholder: 'user name', spellcheck: 'false' });
    return h('tr', {}, h('td', {}, h('code', {}, role)),
      h('td', {}, (members[role] || []).length ? (members[role] || []).map((m) => h('span', { class: 'badge on' }, m, ' ',
        h('button', { class: 'link', type: 'button', 'aria-label': `Remove ${m} from ${role}`, onclick: () => member('remove-member', role, m) }, '✕'))) : h('span', { class: 'muted' }, 'no members')),
      h('td', {}, h('form', { class: 'row', onsubmit: (e) => { e.preventDefault(); if (user.value.trim()) member('add-member', role, user.value.trim()); } },
        user, ' ', h('button', { type: 'submit' }, 'Add member'))));
  });
  const name = h('input', { id: 'new-role', placeholder: 'Editors', spellcheck: 'false', required: true });
  const users = h('datalist', { id: 'role-users' }, userList.users.map((u) => h('option', { value: u.name })));
  return h('section', { class: 'panel', 'aria-label': 'Security roles', id: 'roles' },
    h('h2', {}, 'Security roles'),
    h('p', { class: 'muted' }, 'Grants of the public database go to _world (everyone), _icloud (signed-in users), _creator (who created the record) and custom roles, whose members are users of the container (both environments).'),
    users,
    rows.length ? h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Role'), h('th', {}, 'Members'), h('th', {}, ''))), h('tbody', {}, rows))
      : h('p', { class: 'muted' }, 'No custom roles.'),
    dev ? h('form', {
      class: 'toolbar', style: 'margin-top:12px',
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          await importSchema(`DEFINE SCHEMA CREATE ROLE ${ident(name.value.trim())};`);
          toast(`Role ${name.value.trim()} created in development.`);
          route();
        } catch (x) { toast(x.message, true); }
      },
    }, field('New role', name), h('button', { type: 'submit' }, 'Create role')) : null);
}

function grantsDialog(t, roles) {
  const current = Object.fromEntries(t.grants.map((g) => [g.role, g.permissions.split(', ')]));
  const boxes = [];
  const rows = [...BUILT_IN_ROLES, ...roles].map((role) => h('tr', {}, h('th', { scope: 'row' }, role),
    PERMISSIONS.map((p) => {
      const box = h('input', { type: 'checkbox', checked: (current[role] || []).includes(p), 'aria-label': `${role} ${p}` });
      boxes.push([role, p, box]);
      return h('td', {}, box);
    })));
  const err = h('p', { class: 'error', role: 'alert' });
  return dialog(`Grants on ${t.name} (public database)`, (close) => [
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Role'), PERMISSIONS.map((p) => h('th', {}, p)))), h('tbody', {}, rows)),
    err,
    actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'),
      h('button', {
        class: 'primary', type: 'button',
        onclick: async () => {
          const byRole = {};
          for (const [role, p, box] of boxes) if (box.checked) (byRole[role] = byRole[role] || []).push(p);
          const clauses = Object.entries(byRole).map(([role, ps]) => `GRANT ${ps.join(', ')} TO ${role.startsWith('_') ? `"${role}"` : ident(role)}`);
          if (!clauses.length) { err.textContent = 'Grant something to someone (with no grants, no one could read the records).'; return; }
          try {
            await importSchema(`DEFINE SCHEMA RECORD TYPE ${ident(t.name)} (${clauses.join(', ')});`);
            close(true);
            toast(`Grants on ${t.name} saved in development.`);
            route();
          } catch (x) { err.textContent = x.message; }
        },
      }, 'Save grants')),
  ]);
}

function flagBadges(f) {
  return ['queryable', 'sortable', 'searchable'].map((k) => h('span', { class: 'badge' + (f[k] ? ' on' : '') }, k.toUpperCase()));
}

function typePanel(t, dev, roles) {
  const rows = t.fields.map((f) => {
    const boxes = ['queryable', 'sortable', 'searchable'].map((flag) => {
      const box = h('input', {
        type: 'checkbox', checked: f[flag], disabled: !dev || f[flag],
        'aria-label': `${flag} ${t.name}.${f.name}`,
        title: f[flag] ? 'Set (index flags are removed only by a development reset)' : `Make ${f.name} ${flag}`,
        onchange: async () => {
          try {
            await importSchema(`DEFINE SCHEMA RECORD TYPE ${ident(t.name)} (${ident(f.name)} ${schemaType(f.type)} ${flag.toUpperCase()});`);
            toast(`${t.name}.${f.name} is ${flag}; its index builds in the background.`);
            route();
          } catch (e) { toast(e.message, true); box.checked = false; }
        },
      });
      return h('td', {}, box);
    });
    return h('tr', {}, h('td', {}, h('code', {}, f.name),
      f.building ? h('span', { class: 'badge building', title: 'Its index is being built over the records saved before it was defined' }, ' building index…') : null),
    h('td', {}, f.type), boxes);
  });
  const sys = t.systemIndexes.length
    ? h('p', { class: 'muted' }, 'System field indexes: ', t.systemIndexes.map((s) => h('span', {}, h('code', {}, s.name), ' ', flagBadges(s), ' ')))
    : null;
  return h('section', { class: 'panel', 'aria-label': `Record type ${t.name}` },
    h('div', { class: 'panel-head' }, h('h2', {}, t.name),
      dev ? h('button', { type: 'button', onclick: () => addFieldDialog(t.name) }, 'Add field') : null),
    h('table', {},
      h('thead', {}, h('tr', {}, ['Field', 'Type', 'Queryable', 'Sortable', 'Searchable'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No fields yet.')))),
    sys,
    h('p', { class: 'muted grants' }, 'Public database grants: ',
      t.grants.map((g) => h('span', {}, h('span', { class: 'badge on' }, g.role), ` ${g.permissions}  `)),
      dev ? h('button', { class: 'link', type: 'button', onclick: () => grantsDialog(t, roles) }, 'Edit grants') : null));
}

/** A name as the schema language writes it (quoted when it is not a plain identifier). */
function ident(name) { return /^[A-Za-z][A-Za-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '')}"`; }
/** `STRING_LIST` → `LIST<STRING>`, `ASSETID` → `ASSET`. */
function schemaType(t) {
  const base = t.replace(/_LIST$/, '').replace('ASSETID', 'ASSET');
  return t.endsWith('_LIST') ? `LIST<${base}>` : base;
}

function importSchema(text) {
  return api(`admin/schema/import?${q({ container: state.container })}`, { body: text });
}

function fieldInputs() {
  const name = h('input', { required: true, spellcheck: 'false', placeholder: 'title' });
  const type = select(FIELD_TYPES, 'STRING');
  const list = h('input', { type: 'checkbox' });
  const flags = ['QUERYABLE', 'SORTABLE', 'SEARCHABLE'].map((f) => [f, h('input', { type: 'checkbox', 'aria-label': f })]);
  const node = h('div', { class: 'toolbar' }, field('Field name', name), field('Type', type),
    h('label', { class: 'check' }, list, 'List'),
    flags.map(([f, box]) => h('label', { class: 'check' }, box, f)));
  const text = () => {
    const t = list.checked ? `LIST<${type.value}>` : type.value;
    return `${ident(name.value.trim())} ${t} ${flags.filter(([, b]) => b.checked).map(([f]) => f).join(' ')}`.trim();
  };
  return { node, name, text };
}

function addTypeDialog() {
  const typeName = h('input', { required: true, spellcheck: 'false', placeholder: 'Article' });
  const fi = fieldInputs();
  const err = h('p', { class: 'error', role: 'alert' });
  return dialog('Add record type', (close) => [
    h('form', {
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          await importSchema(`DEFINE SCHEMA RECORD TYPE ${ident(typeName.value.trim())} (${fi.text()});`);
          close(true);
          toast(`Record type ${typeName.value.trim()} added to development.`);
          route();
        } catch (x) { err.textContent = x.message; }
      },
    }, field('Record type name', typeName), h('h3', {}, 'Its first field'), fi.node, err,
    actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'), h('button', { class: 'primary', type: 'submit' }, 'Add type'))),
  ]);
}

function addFieldDialog(typeName) {
  const fi = fieldInputs();
  const err = h('p', { class: 'error', role: 'alert' });
  return dialog(`Add a field to ${typeName}`, (close) => [
    h('form', {
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          await importSchema(`DEFINE SCHEMA RECORD TYPE ${ident(typeName)} (${fi.text()});`);
          close(true);
          toast(`Field ${fi.name.value.trim()} added to ${typeName}.`);
          route();
        } catch (x) { err.textContent = x.message; }
      },
    }, fi.node, err,
    actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'), h('button', { class: 'primary', type: 'submit' }, 'Add field'))),
  ]);
}

/** What deploying development would add to production: [{kind, text, conflict}]. */
function schemaDiff(dev, prod) {
  const out = [];
  const prodTypes = Object.fromEntries(prod.map((t) => [t.name, t]));
  for (const t of dev) {
    const p = prodTypes[t.name];
    if (!p) out.push({ kind: 'type', text: `record type ${t.name}` });
    const pf = Object.fromEntries((p ? p.fields : []).map((f) => [f.name, f]));
    for (const f of t.fields) {
      const old = pf[f.name];
      if (!old) out.push({ kind: 'field', text: `field ${t.name}.${f.name} ${f.type}` });
      else if (old.type !== f.type) out.push({ kind: 'conflict', text: `field ${t.name}.${f.name} is ${old.type} in production, ${f.type} in development` });
      for (const flag of ['queryable', 'sortable', 'searchable']) {
        if (f[flag] && !(old && old[flag])) out.push({ kind: 'index', text: `index ${t.name}.${f.name} ${flag.toUpperCase()}` });
      }
    }
  }
  return out;
}

async function deployDialog() {
  const [dev, prod] = await Promise.all([schema('development'), schema('production')]);
  const diff = schemaDiff(dev, prod);
  const conflicts = diff.filter((d) => d.kind === 'conflict');
  const err = h('p', { class: 'error', role: 'alert' });
  return dialog('Deploy the schema to production', (close) => [
    h('p', {}, diff.length ? `Deploying adds to production (${state.container}):` : 'Production already has everything development has.'),
    h('ul', { id: 'deploy-diff' }, diff.map((d) => h('li', {},
      h('span', { class: 'badge ' + (d.kind === 'conflict' ? 'bad' : 'add') }, d.kind === 'conflict' ? 'conflict' : '+ ' + d.kind), ' ', d.text))),
    conflicts.length ? h('p', { class: 'error' }, 'Deploying is additive: resolve the conflicts first (reset development).') : null,
    err,
    actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'),
      h('button', {
        class: 'primary', type: 'button', disabled: conflicts.length > 0,
        onclick: async () => {
          try {
            const r = await api(`admin/schema/deploy?${q({ container: state.container })}`, { method: 'POST' });
            close(true);
            toast(`Deployed: ${r.changes} change${r.changes === 1 ? '' : 's'} in production.`);
            route();
          } catch (x) { err.textContent = x.message; }
        },
      }, 'Deploy')),
  ]);
}

function resetDialog() {
  const confirmInput = h('input', { spellcheck: 'false', autocomplete: 'off' });
  const err = h('p', { class: 'error', role: 'alert' });
  return dialog('Reset the development schema', (close) => [
    h('p', {}, 'Development\'s schema becomes production\'s: types, fields and indexes only development has are forgotten. Records are kept.'),
    field(`Type the container name (${state.container}) to confirm`, confirmInput), err,
    actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'),
      h('button', {
        class: 'danger', type: 'button',
        onclick: async () => {
          if (confirmInput.value.trim() !== state.container) { err.textContent = 'The name does not match.'; return; }
          try {
            await api(`admin/schema/reset?${q({ container: state.container })}`, { method: 'POST' });
            close(true);
            toast('Development was reset to production.');
            route();
          } catch (x) { err.textContent = x.message; }
        },
      }, 'Reset development')),
  ]);
}

pages['schema-text'] = async (view) => {
  const text = await api(`admin/schema/export?${q({ container: state.container, environment: state.environment })}`, { text: true });
  const area = h('textarea', { class: 'code', id: 'schema-source', spellcheck: 'false' });
  area.value = text;
  const result = h('div', { role: 'alert', id: 'schema-result' });
  const file = h('input', { type: 'file', accept: '.ckdb,.txt,.schema,text/plain', id: 'schema-file' });
  file.addEventListener('change', async () => {
    if (file.files.length) area.value = await file.files[0].text();
  });
  const download = () => {
    const url = URL.createObjectURL(new Blob([area.value], { type: 'text/plain' }));
    const a = h('a', { href: url, download: `${state.container}-${state.environment}.ckdb` });
    document.body.append(a);
    a.click();
    a.remove();
    URL.revokeObjectURL(url);
  };
  const upload = async () => {
    result.replaceChildren();
    try {
      const r = await importSchema(area.value);
      const added = ['recordTypes', 'fields', 'indexes', 'roles', 'grants'].flatMap((k) => r[k].map((x) => `${k.replace(/s$/, '')} ${x}`));
      result.replaceChildren(h('p', { class: 'ok' }, added.length ? `Imported into development: ${added.join('; ')}` : 'Nothing new: development already has all of it.'));
    } catch (e) {
      const m = /line (\d+), column (\d+)/.exec(e.message);
      const parts = [h('p', { class: 'error' }, e.message)];
      if (m) {
        const line = Number(m[1]);
        const lines = area.value.split('\n');
        parts.push(h('pre', { class: 'errorline' }, `${line} | ${lines[line - 1] || ''}\n${' '.repeat(String(line).length + 3 + Number(m[2]) - 1)}^`));
        const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
        area.focus();
        area.setSelectionRange(start, start + (lines[line - 1] || '').length);
      }
      result.replaceChildren(...parts);
    }
  };
  view.append(
    h('h1', { class: 'page' }, 'Schema text'),
    h('p', { class: 'lead' }, `The ${state.environment} schema in the CloudKit Schema Language. Edit or upload a file, then import it into development (additive).`),
    h('div', { class: 'toolbar' },
      h('button', { type: 'button', onclick: () => { location.hash = '#schema'; } }, '← Schema'),
      h('button', { type: 'button', onclick: download }, 'Download'),
      field('Open a file', file),
      h('button', { class: 'primary', type: 'button', id: 'schema-import', onclick: upload, disabled: state.environment !== 'development' }, 'Import into development')),
    h('label', { for: 'schema-source', class: 'muted' }, 'Schema source'), area, result);
};

// MARK: Records

const COMPARATORS = ['EQUALS', 'NOT_EQUALS', 'LESS_THAN', 'LESS_THAN_OR_EQUALS', 'GREATER_THAN', 'GREATER_THAN_OR_EQUALS',
  'BEGINS_WITH', 'NOT_BEGINS_WITH', 'IN', 'NOT_IN', 'CONTAINS_ALL_TOKENS', 'CONTAINS_ANY_TOKENS', 'NEAR',
  'LIST_CONTAINS', 'NOT_LIST_CONTAINS', 'LIST_CONTAINS_ANY', 'NOT_LIST_CONTAINS_ANY', 'LIST_CONTAINS_ALL',
  'NOT_LIST_CONTAINS_ALL', 'LIST_MEMBER_BEGINS_WITH', 'NOT_LIST_MEMBER_BEGINS_WITH'];
/** The comparators that apply to a field of `type` (every one of them, across the types). */
function comparatorsFor(type) {
  const ordered = ['EQUALS', 'NOT_EQUALS', 'LESS_THAN', 'LESS_THAN_OR_EQUALS', 'GREATER_THAN', 'GREATER_THAN_OR_EQUALS', 'IN', 'NOT_IN'];
  if (type.endsWith('_LIST')) {
    const list = COMPARATORS.filter((c) => c.startsWith('LIST_') || c.startsWith('NOT_LIST_'));
    return type === 'STRING_LIST' ? [...list, 'CONTAINS_ALL_TOKENS', 'CONTAINS_ANY_TOKENS'] : list.filter((c) => !c.includes('BEGINS_WITH'));
  }
  switch (type) {
    case 'STRING': return [...ordered, 'BEGINS_WITH', 'NOT_BEGINS_WITH', 'CONTAINS_ALL_TOKENS', 'CONTAINS_ANY_TOKENS'];
    case 'LOCATION': return ['NEAR'];
    case 'REFERENCE': case 'BYTES': case 'ASSETID': return ['EQUALS', 'NOT_EQUALS', 'IN', 'NOT_IN'];
    default: return ordered;
  }
}

const SYSTEM_FIELDS = [['___recordID', 'recordName', 'STRING'], ['___createTime', 'createdTimestamp', 'TIMESTAMP'],
  ['___modTime', 'modifiedTimestamp', 'TIMESTAMP']];

/** The database pickers shared by the records, zones, subscriptions and changes pages. */
function scopePicker(onChange, { zones = true } = {}) {
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

pages.records = async (view) => {
  const types = await schema();
  view.append(h('h1', { class: 'page' }, 'Records'),
    h('p', { class: 'lead' }, 'Query, view, create, edit and delete records. The console acts as the developer on the public database and as the chosen user on a private or shared one.'));
  const results = h('div', { id: 'results' });
  const picker = scopePicker(() => {});
  view.append(picker.node);
  await picker.ready;
  if (types.length === 0) {
    view.append(h('div', { class: 'panel empty' }, 'No record types in this environment yet: add one on the Schema page.'));
    return;
  }
  const saved = sessionStorage.getItem('cloudlet.recordType');
  const typeSel = select(types.map((t) => t.name), types.some((t) => t.name === saved) ? saved : types[0].name, { id: 'record-type' });
  const filters = h('div', { class: 'filters', id: 'filters' });
  const sortField = h('select', { id: 'sort-field' });
  const sortOrder = select([['asc', 'Ascending'], ['desc', 'Descending']], 'asc', { id: 'sort-order' });
  const limit = h('input', { type: 'number', min: 1, max: 200, value: 50, id: 'limit', style: 'width:80px' });
  const current = () => types.find((t) => t.name === typeSel.value);
  const allFields = () => [...SYSTEM_FIELDS.map(([n, label, type]) => ({ name: n, label, type })),
    ...current().fields.map((f) => ({ name: f.name, label: f.name, type: f.type }))];
  const refreshFields = () => {
    sortField.replaceChildren(h('option', { value: '' }, '(none)'), ...allFields().map((f) => h('option', { value: f.name }, f.label)));
    filters.replaceChildren();
  };
  const addFilter = () => {
    const n = filters.children.length + 1;
    const f = select(allFields().map((x) => [x.name, x.label]), undefined, { 'aria-label': `Filter ${n} field`, class: 'filter-field' });
    const c = h('select', { 'aria-label': `Filter ${n} comparator`, class: 'filter-comparator' });
    const typeOf = (name) => (name === '___recordID' ? 'REFERENCE' : allFields().find((x) => x.name === name).type);
    const offer = () => {
      const choices = comparatorsFor(typeOf(f.value));
      const keep = choices.includes(c.value) ? c.value : choices[0];
      c.replaceChildren(...choices.map((x) => h('option', { value: x, selected: x === keep }, x)));
      c.dispatchEvent(new Event('change'));
    };
    f.addEventListener('change', offer);
    const v = h('input', { 'aria-label': `Filter ${n} value`, class: 'filter-value', placeholder: 'value (lists: a, b; NEAR: lat, lon)' });
    const d = h('input', { 'aria-label': `Filter ${n} distance (km)`, class: 'filter-distance', placeholder: 'km', style: 'width:70px', hidden: true });
    c.addEventListener('change', () => { d.hidden = c.value !== 'NEAR'; });
    const row = h('div', { class: 'row' }, f, c, v, d, h('button', { type: 'button', 'aria-label': `Remove filter ${n}`, onclick: () => row.remove() }, '✕'));
    offer();
    filters.append(row);
    f.focus();
  };
  typeSel.addEventListener('change', () => { sessionStorage.setItem('cloudlet.recordType', typeSel.value); refreshFields(); results.replaceChildren(); });
  refreshFields();

  const queryBody = () => {
    const fieldTypes = Object.fromEntries(allFields().map((x) => [x.name, x.type]));
    const filterBy = [...filters.children].map((row) => {
      const name = row.querySelector('.filter-field').value;
      const comparator = row.querySelector('.filter-comparator').value;
      const text = row.querySelector('.filter-value').value;
      let type = fieldTypes[name];
      if (name === '___recordID') type = 'REFERENCE';
      const listOperand = ['IN', 'NOT_IN', 'LIST_CONTAINS_ANY', 'NOT_LIST_CONTAINS_ANY', 'LIST_CONTAINS_ALL', 'NOT_LIST_CONTAINS_ALL'].includes(comparator);
      const elementOp = comparator.startsWith('LIST_') || comparator.startsWith('NOT_LIST_');
      let valueType = type;
      if (listOperand) valueType = type.replace(/_LIST$/, '') + '_LIST';
      else if (elementOp) valueType = type.replace(/_LIST$/, '');
      const filter = { fieldName: name, comparator, fieldValue: { value: parseValue(text, valueType), type: valueType.replace('ASSET_', 'ASSETID_') } };
      if (comparator === 'NEAR') filter.distance = Number(row.querySelector('.filter-distance').value || 1);
      return filter;
    });
    const query = { recordType: typeSel.value, filterBy };
    if (sortField.value) query.sortBy = [{ fieldName: sortField.value, ascending: sortOrder.value === 'asc' }];
    return { zoneID: picker.zoneID, query, resultsLimit: Number(limit.value) || 50 };
  };

  const run = async (marker) => {
    let body;
    try { body = queryBody(); } catch (e) { toast(e.message, true); return; }
    if (marker) body.continuationMarker = marker;
    try {
      const r = await db(picker.scope, 'records/query', body, picker.user);
      renderResults(r, marker);
    } catch (e) { results.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message)); }
  };
  const renderResults = (r, marker) => {
    const t = current();
    const cols = t.fields.slice(0, 5);
    const rows = r.records.map((rec) => {
      const tr = h('tr', { class: 'clickable', tabindex: 0, dataset: { recordName: rec.recordName } },
        h('td', {}, h('code', {}, rec.recordName)),
        cols.map((c) => h('td', {}, valueText(rec.fields[c.name]))),
        h('td', { class: 'muted' }, rec.modified ? new Date(rec.modified.timestamp).toLocaleString() : ''));
      const open = () => recordView(picker, rec.recordName, t);
      tr.addEventListener('click', open);
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); open(); } });
      return tr;
    });
    const next = r.continuationMarker;
    results.replaceChildren(
      h('p', { class: 'muted', id: 'result-count' }, `${r.records.length} record${r.records.length === 1 ? '' : 's'}${next ? ' (more on the next page)' : ''}`),
      h('table', { id: 'records-table' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Record name'), cols.map((c) => h('th', { scope: 'col' }, c.name)), h('th', { scope: 'col' }, 'Modified'))),
        h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: cols.length + 2, class: 'empty' }, 'No records match.')))),
      h('div', { class: 'toolbar', style: 'margin-top:10px' },
        marker ? h('button', { type: 'button', id: 'first-page', onclick: () => run() }, '← First page') : null,
        next ? h('button', { type: 'button', id: 'next-page', onclick: () => run(next) }, 'Next page →') : null));
  };
  const explain = async () => {
    let body;
    try { body = queryBody(); } catch (e) { toast(e.message, true); return; }
    try {
      const plan = await api(`admin/query/explain?${q({ container: state.container, environment: state.environment, database: picker.scope, user: picker.user })}`, { body });
      results.replaceChildren(h('div', {}, h('h2', {}, 'Query plan'), h('p', { id: 'plan-summary' }, plan.description || ''),
        (plan.notes || []).length ? h('ul', {}, plan.notes.map((n) => h('li', { class: 'muted' }, n))) : null,
        h('pre', { class: 'plan', id: 'plan' }, JSON.stringify(plan, null, 2))));
    } catch (e) { results.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message)); }
  };

  view.append(
    h('form', {
      class: 'panel', 'aria-label': 'Query builder',
      onsubmit: (e) => { e.preventDefault(); run(); },
    },
    h('div', { class: 'toolbar' }, field('Record type', typeSel), field('Sort by', sortField), field('Order', sortOrder), field('Page size', limit)),
    h('fieldset', {}, h('legend', {}, 'Filters (all must match)'), filters,
      h('button', { type: 'button', id: 'add-filter', onclick: addFilter }, '+ Add filter')),
    h('div', { class: 'toolbar' },
      h('button', { class: 'primary', type: 'submit', id: 'run-query' }, 'Run query'),
      h('button', { type: 'button', id: 'explain', onclick: explain }, 'Explain plan'),
      h('button', { type: 'button', id: 'new-record', onclick: () => editRecord(picker, current(), null).then((saved) => { if (saved) run(); }) }, 'New record'))),
    results);
  run();
};

/** Shows one record (looked up fresh) with every field rendered, and its actions. */
async function recordView(picker, recordName, type) {
  let record;
  try {
    const r = await db(picker.scope, 'records/lookup', { zoneID: picker.zoneID, records: [{ recordName }] }, picker.user);
    record = r.records[0];
    if (record.serverErrorCode) throw new Error(record.reason);
  } catch (e) { toast(e.message, true); return; }
  const types = schemaCache[state.environment] || [];
  const t = type || types.find((x) => x.name === record.recordType) || { name: record.recordType, fields: [] };
  const follow = (ref) => recordView(picker, ref.recordName, null);
  const rows = Object.keys(record.fields).sort().map((name) =>
    h('tr', {}, h('th', { scope: 'row' }, name, h('div', { class: 'muted' }, record.fields[name].type)), h('td', {}, valueNode(record.fields[name], (ref) => { document.getElementById('dialog').close(); follow(ref); }))));
  const meta = [['Record type', record.recordType], ['Change tag', record.recordChangeTag],
    ['Created', record.created ? `${new Date(record.created.timestamp).toISOString()} by ${record.created.userRecordName || ''}` : ''],
    ['Modified', record.modified ? `${new Date(record.modified.timestamp).toISOString()} by ${record.modified.userRecordName || ''}` : '']];
  const result = await dialog(`Record ${record.recordName}`, (close) => [
    h('table', { class: 'kv', id: 'record-fields' }, h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { class: 'muted' }, 'No fields.')))),
    h('h3', {}, 'System fields'),
    h('table', { class: 'kv' }, h('tbody', {}, meta.map(([k, v]) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, v))))),
    actions(
      h('button', { class: 'danger', type: 'button', id: 'delete-record', onclick: () => close('delete') }, 'Delete'),
      h('button', { type: 'button', onclick: () => close(null) }, 'Close'),
      h('button', { class: 'primary', type: 'button', id: 'edit-record', onclick: () => close('edit') }, 'Edit')),
  ]);
  if (result === 'edit') {
    if (await editRecord(picker, t, record)) refreshRecords();
  } else if (result === 'delete') {
    const ok = await dialog(`Delete ${record.recordName}?`, (close) => [
      h('p', {}, 'The record is deleted for good (a tombstone stays in the change feed).'),
      actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'),
        h('button', { class: 'danger', type: 'button', id: 'confirm-delete', onclick: () => close(true) }, 'Delete')),
    ]);
    if (!ok) return;
    try {
      const r = await db(picker.scope, 'records/modify', {
        zoneID: picker.zoneID,
        operations: [{ operationType: 'delete', record: { recordName: record.recordName, recordChangeTag: record.recordChangeTag } }],
      }, picker.user);
      if (r.records[0].serverErrorCode) throw new Error(r.records[0].reason);
      toast(`Deleted ${record.recordName}.`);
      refreshRecords();
    } catch (e) { toast(e.message, true); }
  }
}

function refreshRecords() {
  const run = document.getElementById('run-query');
  if (run) run.click();
}

/** The create / edit form. On a change-tag conflict it shows the server's record beside the edit and saves the merge. */
async function editRecord(picker, type, record) {
  const inputs = {};
  const rows = type.fields.map((f) => {
    const input = h('input', { spellcheck: 'false', 'aria-label': `${f.name} (${f.type})`, class: 'record-input', dataset: { field: f.name } });
    input.value = record ? editText(record.fields[f.name], f.type) : '';
    inputs[f.name] = input;
    const hint = { TIMESTAMP: 'ISO date or ms', LOCATION: 'lat, lon', REFERENCE: 'record name', BYTES: 'text' }[f.type.replace(/_LIST$/, '')];
    return h('tr', {}, h('th', { scope: 'row' }, h('label', { for: input.id || (input.id = `in-${f.name}`) }, f.name), h('div', { class: 'muted' }, f.type, hint ? ` · ${hint}` : '', f.type.endsWith('_LIST') ? ' · comma separated' : '')), h('td', {}, input));
  });
  const nameInput = h('input', { spellcheck: 'false', id: 'new-record-name', placeholder: 'left empty: the server picks one' });
  const err = h('div', { role: 'alert', class: 'error' });
  const fieldsOf = () => {
    const fields = {};
    for (const f of type.fields) {
      const text = inputs[f.name].value;
      if (text.trim() === '') continue;
      fields[f.name] = { value: parseValue(text, f.type) };
    }
    return fields;
  };
  return dialog(record ? `Edit ${record.recordName}` : `New ${type.name}`, (close) => {
    let changeTag = record ? record.recordChangeTag : undefined;
    const save = async (e) => {
      e.preventDefault();
      err.replaceChildren();
      let fields;
      try { fields = fieldsOf(); } catch (x) { err.textContent = x.message; return; }
      const rec = { recordType: type.name, fields };
      if (record) { rec.recordName = record.recordName; rec.recordChangeTag = changeTag; }
      else if (nameInput.value.trim()) rec.recordName = nameInput.value.trim();
      try {
        const r = await db(picker.scope, 'records/modify', {
          zoneID: picker.zoneID, operations: [{ operationType: record ? 'replace' : 'create', record: rec }],
        }, picker.user);
        const out = r.records[0];
        if (out.serverErrorCode === 'CONFLICT' && out.serverRecord) {
          changeTag = out.serverRecord.recordChangeTag;
          err.replaceChildren(mergeView(type, fields, out.serverRecord, inputs));
          return;
        }
        if (out.serverErrorCode) throw new Error(out.reason);
        close(true);
        toast(`Saved ${out.recordName}.`);
      } catch (x) { err.textContent = x.message; }
    };
    return [h('form', { onsubmit: save, id: 'record-form' },
      record ? null : field('Record name', nameInput),
      h('table', { class: 'kv' }, h('tbody', {}, rows)), err,
      actions(h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'), h('button', { class: 'primary', type: 'submit', id: 'save-record' }, 'Save')))];
  });
}

/** The conflict: per field, your value and the server's; choosing one writes it into the form, which saves over the server's change tag. */
function mergeView(type, mine, server, inputs) {
  const rows = type.fields.map((f) => {
    const yours = mine[f.name] ? valueText({ value: mine[f.name].value, type: f.type }) : '';
    const theirs = valueText(server.fields[f.name]);
    const differs = yours !== theirs;
    const keepMine = h('input', { type: 'radio', name: `merge-${f.name}`, checked: true, 'aria-label': `Keep my ${f.name}` });
    const takeTheirs = h('input', {
      type: 'radio', name: `merge-${f.name}`, 'aria-label': `Take the server's ${f.name}`,
      onchange: () => { inputs[f.name].value = editText(server.fields[f.name], f.type); },
    });
    keepMine.addEventListener('change', () => { inputs[f.name].value = editText(mine[f.name], f.type); });
    return h('tr', { class: differs ? 'differs' : '' }, h('th', { scope: 'row' }, f.name),
      h('td', { class: 'mine' }, h('label', { class: 'check' }, keepMine, yours || '—')),
      h('td', { class: 'theirs' }, h('label', { class: 'check' }, takeTheirs, theirs || '—')));
  });
  return h('div', { class: 'panel', id: 'conflict' },
    h('h3', {}, 'Someone else changed this record'),
    h('p', {}, `The server has change tag ${server.recordChangeTag}, saved ${server.modified ? new Date(server.modified.timestamp).toISOString() : ''}. Pick a value per field, then Save again to write the merge.`),
    h('table', { class: 'merge' }, h('thead', {}, h('tr', {}, h('th', {}, 'Field'), h('th', {}, 'Yours'), h('th', {}, 'Server'))), h('tbody', {}, rows)));
}

// MARK: Zones and subscriptions

pages.zones = async (view) => {
  view.append(h('h1', { class: 'page' }, 'Zones'), h('p', { class: 'lead' }, 'Custom zones live in private databases; the public database has only _defaultZone.'));
  const list = h('div', { id: 'zones' });
  const picker = scopePicker(() => load(), { zones: false });
  const name = h('input', { id: 'zone-name', spellcheck: 'false', placeholder: 'Inbox', required: true });
  const load = async () => {
    try {
      const r = await db(picker.scope, 'zones/list', {}, picker.user);
      list.replaceChildren(h('table', { id: 'zones-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Zone'), h('th', {}, 'Owner'), h('th', {}, 'Actions'))),
        h('tbody', {}, r.zones.map((z) => h('tr', {}, h('td', {}, h('code', {}, z.zoneID.zoneName)), h('td', {}, z.zoneID.ownerRecordName || ''),
          h('td', {}, z.zoneID.zoneName === '_defaultZone' ? h('span', { class: 'muted' }, 'built in') : h('button', {
            class: 'danger', type: 'button', 'aria-label': `Delete zone ${z.zoneID.zoneName}`,
            onclick: async () => {
              if (!await confirmDialog(`Delete zone ${z.zoneID.zoneName}?`, 'Every record in it is deleted.')) return;
              modifyZone('delete', z.zoneID).then(load);
            },
          }, 'Delete')))))));
    } catch (e) { list.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message)); }
  };
  const modifyZone = async (operationType, zoneID) => {
    try {
      const r = await db(picker.scope, 'zones/modify', { operations: [{ operationType, zone: { zoneID } }] }, picker.user);
      const z = r.zones[0];
      if (z && z.serverErrorCode) throw new Error(z.reason);
      toast(`Zone ${zoneID.zoneName} ${operationType === 'create' ? 'created' : 'deleted'}.`);
    } catch (e) { toast(e.message, true); }
  };
  view.append(picker.node, h('form', {
    class: 'toolbar', 'aria-label': 'Create a zone',
    onsubmit: async (e) => { e.preventDefault(); await modifyZone('create', { zoneName: name.value.trim() }); name.value = ''; load(); },
  }, field('New zone name', name), h('button', { class: 'primary', type: 'submit' }, 'Create zone')), list);
  load();
};

function confirmDialog(title, text) {
  return dialog(title, (close) => [h('p', {}, text), actions(
    h('button', { type: 'button', onclick: () => close(null) }, 'Cancel'),
    h('button', { class: 'danger', type: 'button', onclick: () => close(true) }, 'Delete'))]);
}

pages.subscriptions = async (view) => {
  view.append(h('h1', { class: 'page' }, 'Subscriptions'), h('p', { class: 'lead' }, 'Subscriptions belong to a user: choose one.'));
  const list = h('div', { id: 'subscriptions' });
  const picker = scopePicker(() => load());
  const types = await schema().catch(() => []);
  const kind = select([['query', 'Query'], ['zone', 'Zone'], ['database', 'Database']], 'query', { id: 'sub-kind' });
  const recordType = select(types.map((t) => t.name), undefined, { id: 'sub-type' });
  const fires = ['create', 'update', 'delete'].map((f) => [f, h('input', { type: 'checkbox', checked: true })]);
  const newID = () => `console-${[...crypto.getRandomValues(new Uint8Array(6))].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
  const subscriptionID = h('input', { id: 'sub-id', spellcheck: 'false', value: newID(), required: true });
  const load = async () => {
    if (!picker.user) { list.replaceChildren(h('p', { class: 'muted' }, 'Type a user name above.')); return; }
    try {
      const r = await db(picker.scope, 'subscriptions/list', {}, picker.user);
      list.replaceChildren(h('table', { id: 'subscriptions-table' },
        h('thead', {}, h('tr', {}, ['ID', 'Type', 'Details', 'Actions'].map((c) => h('th', {}, c)))),
        h('tbody', {}, r.subscriptions.length ? r.subscriptions.map((s) => h('tr', {},
          h('td', {}, h('code', {}, s.subscriptionID)), h('td', {}, s.subscriptionType),
          h('td', {}, s.query ? `${s.query.recordType} on ${(s.firesOn || []).join(', ')}` : (s.zoneID ? s.zoneID.zoneName : '')),
          h('td', {}, h('button', {
            class: 'danger', type: 'button', 'aria-label': `Delete subscription ${s.subscriptionID}`,
            onclick: async () => {
              if (!await confirmDialog(`Delete subscription ${s.subscriptionID}?`, 'Its user stops getting its notifications.')) return;
              await modifySubscription({ operationType: 'delete', subscription: { subscriptionID: s.subscriptionID } });
              load();
            },
          }, 'Delete')))) : h('tr', {}, h('td', { colspan: 4, class: 'empty' }, 'No subscriptions.')))));
    } catch (e) { list.replaceChildren(h('p', { class: 'error', role: 'alert' }, e.message)); }
  };
  const modifySubscription = async (op) => {
    try {
      const r = await db(picker.scope, 'subscriptions/modify', { operations: [op] }, picker.user);
      const s = r.subscriptions[0];
      if (s && s.serverErrorCode) throw new Error(s.reason);
      toast(`Subscription ${op.operationType === 'create' ? 'created' : 'deleted'}.`);
    } catch (e) { toast(e.message, true); }
  };
  const create = async (e) => {
    e.preventDefault();
    const sub = { subscriptionID: subscriptionID.value.trim(), subscriptionType: kind.value, zoneID: picker.zoneID };
    if (kind.value === 'query') {
      sub.query = { recordType: recordType.value };
      sub.firesOn = fires.filter(([, b]) => b.checked).map(([f]) => f);
    }
    if (kind.value === 'database') delete sub.zoneID;
    await modifySubscription({ operationType: 'create', subscription: sub });
    subscriptionID.value = newID();
    load();
  };
  view.append(picker.node, h('form', { class: 'panel', 'aria-label': 'Create a subscription', onsubmit: create },
    h('h2', {}, 'New subscription'),
    h('div', { class: 'toolbar' }, field('Subscription ID', subscriptionID), field('Kind', kind), field('Record type (query)', recordType),
      fires.map(([f, b]) => h('label', { class: 'check' }, b, `fires on ${f}`)),
      h('button', { class: 'primary', type: 'submit' }, 'Create'))), list);
  await picker.ready;
  load();
};

// MARK: Changes

pages.changes = async (view) => {
  view.append(h('h1', { class: 'page' }, 'Changes'),
    h('p', { class: 'lead' }, 'A live view of a change feed, pushed over a websocket: every record saved or deleted in a zone, or every zone of a database that changed.'));
  const picker = scopePicker(() => stop());
  const kind = select([['zone', 'The zone\'s records'], ['database', 'The database\'s zones (private, shared)']], 'zone', { id: 'feed-kind' });
  kind.addEventListener('change', () => stop());
  const feed = h('ul', { class: 'feed', id: 'feed', 'aria-label': 'Changes' });
  const status = h('span', { class: 'live', id: 'live-status' }, 'stopped');
  const toggle = h('button', { class: 'primary', type: 'button', id: 'live-toggle' }, 'Start live view');
  let socket = null;
  const stop = () => {
    if (socket) socket.close();
    socket = null;
    status.className = 'live';
    status.textContent = 'stopped';
    toggle.textContent = 'Start live view';
  };
  const start = () => {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const params = q({ container: state.container, environment: state.environment, database: picker.scope, user: picker.user, zone: picker.zoneID.zoneName, feed: kind.value });
    const ws = new WebSocket(`${scheme}//${location.host}/cloudlet/console/ws/changes?${params}`);
    socket = ws;
    state.sockets.push(ws);
    // Events of a socket stopped earlier (its close arrives late) are not about the current one.
    ws.addEventListener('open', () => { if (socket === ws) { status.className = 'live on'; status.textContent = 'live'; toggle.textContent = 'Stop'; } });
    ws.addEventListener('close', () => { if (socket === ws) stop(); });
    ws.addEventListener('message', (m) => {
      const change = JSON.parse(m.data);
      if (change.error) { toast(change.error, true); return; }
      const time = new Date().toLocaleTimeString();
      let text;
      if (!change.recordName) text = `${time}  zone ${change.zoneID.zoneName} ${change.deleted ? 'deleted' : 'changed'}`;
      else if (change.deleted) text = `${time}  deleted  ${change.recordName}`;
      else text = `${time}  saved    ${change.recordName}  ${change.recordType}  tag ${change.recordChangeTag}`;
      feed.prepend(h('li', {}, text));
      while (feed.children.length > 500) feed.lastChild.remove();
    });
  };
  toggle.addEventListener('click', () => (socket ? stop() : start()));
  view.append(picker.node, h('div', { class: 'toolbar' }, field('Feed', kind), toggle, status,
    h('button', { type: 'button', onclick: () => feed.replaceChildren() }, 'Clear')),
  h('div', { class: 'panel' }, feed));
};

// MARK: Health

/** Parses Prometheus text: [{name, labels, value}]. */
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const p of m[3].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

function sum(samples, name) { return samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0); }

/** p99 over all routes from two histogram snapshots (the requests between them); null without requests. */
function p99(prev, cur) {
  const buckets = (ss) => {
    const b = {};
    for (const s of ss) if (s.name === 'cloudlet_http_request_duration_seconds_bucket') b[s.labels.le] = (b[s.labels.le] || 0) + s.value;
    return b;
  };
  const a = buckets(prev), b = buckets(cur);
  const les = Object.keys(b).filter((k) => k !== '+Inf').map(Number).sort((x, y) => x - y);
  const total = (b['+Inf'] || 0) - (a['+Inf'] || 0);
  if (total <= 0) return null;
  for (const le of les) if ((b[String(le)] || 0) - (a[String(le)] || 0) >= 0.99 * total) return le;
  return les[les.length - 1];
}

const CHARTS = [
  ['requests', 'Requests / s', (v) => v.toFixed(1)],
  ['p99', 'p99 latency (bucket bound)', (v) => `${(v * 1000).toFixed(1)} ms`],
  ['commits', 'Commits / s', (v) => v.toFixed(1)],
  ['fsyncs', 'fsyncs / s', (v) => v.toFixed(1)],
  ['logBytes', 'Log size', (v) => bytes(v)],
  ['compaction', 'Compaction progress', (v) => bytes(v)],
  ['records', 'Live records', (v) => String(Math.round(v))],
  ['inflight', 'Requests in flight', (v) => String(Math.round(v))],
];

function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

function drawChart(svg, points) {
  const ns = 'http://www.w3.org/2000/svg';
  svg.replaceChildren();
  const w = 300, hgt = 100;
  const max = Math.max(1e-9, ...points) * 1.15;
  for (const y of [0.25, 0.5, 0.75]) {
    const l = document.createElementNS(ns, 'line');
    Object.entries({ x1: 0, x2: w, y1: hgt * y, y2: hgt * y, class: 'grid' }).forEach(([k, v]) => l.setAttribute(k, v));
    svg.append(l);
  }
  if (points.length < 2) return;
  // The samples so far across the whole width (up to the last 60: 2 minutes).
  const step = w / (points.length - 1);
  const x0 = 0;
  const coords = points.map((p, i) => `${(x0 + i * step).toFixed(1)},${(hgt - (p / max) * hgt).toFixed(1)}`);
  const area = document.createElementNS(ns, 'polygon');
  area.setAttribute('points', `${x0},${hgt} ${coords.join(' ')} ${w},${hgt}`);
  const line = document.createElementNS(ns, 'polyline');
  line.setAttribute('points', coords.join(' '));
  svg.append(area, line);
}

pages.health = async (view) => {
  view.append(h('h1', { class: 'page' }, 'Health'), h('p', { class: 'lead' }, 'The server\'s metrics, sampled every 2 seconds (the last 2 minutes).'));
  const grid = h('div', { class: 'charts', id: 'charts' });
  const cards = {};
  for (const [key, title] of CHARTS) {
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('viewBox', '0 0 300 100');
    svg.setAttribute('preserveAspectRatio', 'none');
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', `${title} over time`);
    const value = h('div', { class: 'value', id: `metric-${key}` }, '–');
    cards[key] = { svg, value, points: [] };
    grid.append(h('section', { class: 'panel chart' }, h('h3', {}, title), value, svg));
  }
  view.append(grid);
  let prev = null, prevTime = 0;
  const sample = async () => {
    let text;
    try { text = await api('metrics', { text: true }); } catch (e) { return; }
    const cur = parseMetrics(text), now = performance.now();
    const values = {
      logBytes: sum(cur, 'cloudlet_store_log_bytes'),
      compaction: sum(cur, 'cloudlet_compaction_progress_bytes'),
      records: sum(cur, 'cloudlet_store_records'),
      inflight: sum(cur, 'cloudlet_http_requests_in_flight'),
    };
    if (prev) {
      const dt = (now - prevTime) / 1000;
      const rate = (name) => Math.max(0, (sum(cur, name) - sum(prev, name)) / dt);
      values.requests = rate('cloudlet_http_requests_total');
      values.commits = rate('cloudlet_store_commits_total');
      values.fsyncs = rate('cloudlet_store_fsyncs_total');
      values.p99 = p99(prev, cur) || 0;
    }
    for (const [key, , format] of CHARTS) {
      if (values[key] === undefined) continue;
      const c = cards[key];
      c.points.push(values[key]);
      if (c.points.length > 60) c.points.shift();
      c.value.textContent = format(values[key]);
      drawChart(c.svg, c.points);
    }
    prev = cur;
    prevTime = now;
    grid.dataset.samples = String(Number(grid.dataset.samples || 0) + 1);
  };
  await sample();
  state.timers.push(setInterval(sample, 2000));
};

// MARK: - Frame

async function route() {
  for (const t of state.timers) clearInterval(t);
  for (const s of state.sockets) s.close();
  state.timers = [];
  state.sockets = [];
  const name = (location.hash || '#schema').slice(1);
  const page = pages[name] ? name : 'schema';
  for (const a of document.querySelectorAll('.sidebar a')) {
    if (a.dataset.page === page.replace('-text', '')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const view = document.getElementById('view');
  view.replaceChildren();
  document.title = `${page[0].toUpperCase()}${page.slice(1).replace('-', ' ')} · Cloudlet Console`;
  if (page !== 'health' && !needContainer()) return;
  try {
    await pages[page](view);
  } catch (e) {
    view.append(h('p', { class: 'error', role: 'alert' }, e.message));
  }
}

async function start() {
  const session = await api('session');
  state.csrf = session.csrfToken;
  const container = document.getElementById('container');
  const environment = document.getElementById('environment');
  container.value = state.container;
  environment.value = state.environment;
  const changed = () => {
    state.container = container.value.trim();
    state.environment = environment.value;
    localStorage.setItem('cloudlet.container', state.container);
    localStorage.setItem('cloudlet.environment', state.environment);
    route();
  };
  container.addEventListener('change', changed);
  environment.addEventListener('change', changed);
  document.getElementById('scope').addEventListener('submit', (e) => { e.preventDefault(); changed(); });
  // Containers the server has API tokens for, as suggestions.
  api('admin/tokens/list').then((r) => {
    const names = [...new Set(r.tokens.map((t) => t.container).filter(Boolean))].sort();
    document.getElementById('containers').replaceChildren(...names.map((n) => h('option', { value: n })));
    if (!state.container && names.length) { container.value = names[0]; changed(); }
  }).catch(() => {});
  document.getElementById('signout').addEventListener('click', async () => {
    await api('signout', { method: 'POST' }).catch(() => {});
    window.location.replace('/cloudlet/console/');
  });
  window.addEventListener('hashchange', () => { route(); document.getElementById('view').focus(); });
  // A click on the page already shown reloads it (no hashchange then).
  for (const a of document.querySelectorAll('.sidebar a')) {
    a.addEventListener('click', () => { if (location.hash === a.getAttribute('href')) route(); });
  }
  route();
}

start();
