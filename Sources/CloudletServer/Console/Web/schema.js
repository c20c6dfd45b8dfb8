// Cloudlet Console: the schema pages — record types, fields, indexes, grants, roles, deploy, reset, schema text.
import { actions, api, dialog, field, h, pages, q, route, schema, schemaRoles, select, state, toast } from './ui.js';
import { FIELD_TYPES } from './values.js';

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

/** "building index… 42 %" (of the records there were when the build started), or "queued" before it starts. */
export function buildBadge(f) {
  const p = f.buildProgress;
  const text = !p ? ' index build queued…' : ` building index… ${p.recordsTotal ? Math.floor((100 * p.recordsDone) / p.recordsTotal) : 100} %`;
  const title = p ? `${p.recordsDone} of ${p.recordsTotal} records indexed; records saved meanwhile are indexed as they are saved`
    : 'Its index will be built over the records saved before it was defined';
  const badge = h('span', { class: 'badge building', title, dataset: { field: f.name } }, text);
  if (p) {
    badge.append(h('progress', { max: String(p.recordsTotal || 1), value: String(p.recordsDone), 'aria-label': `Index build of ${f.name}` }));
  }
  return badge;
}

export const BUILT_IN_ROLES = ['_world', '_icloud', '_creator'];
export const PERMISSIONS = ['READ', 'CREATE', 'WRITE'];

/** Custom security roles with their members (per container), and forms to create roles and change members. */
export async function rolesPanel(roles, dev) {
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

export function grantsDialog(t, roles) {
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

export function flagBadges(f) {
  return ['queryable', 'sortable', 'searchable'].map((k) => h('span', { class: 'badge' + (f[k] ? ' on' : '') }, k.toUpperCase()));
}

export function typePanel(t, dev, roles) {
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
      f.building ? buildBadge(f) : null),
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
export function ident(name) { return /^[A-Za-z][A-Za-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '')}"`; }
/** `STRING_LIST` → `LIST<STRING>`, `ASSETID` → `ASSET`. */
export function schemaType(t) {
  const base = t.replace(/_LIST$/, '').replace('ASSETID', 'ASSET');
  return t.endsWith('_LIST') ? `LIST<${base}>` : base;
}

export function importSchema(text) {
  return api(`admin/schema/import?${q({ container: state.container })}`, { body: text });
}

export function fieldInputs() {
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

export function addTypeDialog() {
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

export function addFieldDialog(typeName) {
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
export function schemaDiff(dev, prod) {
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

export async function deployDialog() {
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

export function resetDialog() {
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
