// Cloudlet Console: the records page — query builder, paging, record view, create, edit with conflict merge, delete.
import { actions, api, db, dialog, field, h, pages, q, schema, schemaCache, scopePicker, select, state, toast } from './ui.js';
import { assetEditor, editText, parseValue, valueNode, valueText } from './values.js';

// MARK: Records

export const COMPARATORS = ['EQUALS', 'NOT_EQUALS', 'LESS_THAN', 'LESS_THAN_OR_EQUALS', 'GREATER_THAN', 'GREATER_THAN_OR_EQUALS',
  'BEGINS_WITH', 'NOT_BEGINS_WITH', 'IN', 'NOT_IN', 'CONTAINS_ALL_TOKENS', 'CONTAINS_ANY_TOKENS', 'NEAR',
  'LIST_CONTAINS', 'NOT_LIST_CONTAINS', 'LIST_CONTAINS_ANY', 'NOT_LIST_CONTAINS_ANY', 'LIST_CONTAINS_ALL',
  'NOT_LIST_CONTAINS_ALL', 'LIST_MEMBER_BEGINS_WITH', 'NOT_LIST_MEMBER_BEGINS_WITH'];
/** The comparators that apply to a field of `type` (every one of them, across the types). */
export function comparatorsFor(type) {
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

export const SYSTEM_FIELDS = [['___recordID', 'recordName', 'STRING'], ['___createTime', 'createdTimestamp', 'TIMESTAMP'],
  ['___modTime', 'modifiedTimestamp', 'TIMESTAMP']];

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
export async function recordView(picker, recordName, type) {
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

export function refreshRecords() {
  const run = document.getElementById('run-query');
  if (run) run.click();
}

/** The create / edit form. On a change-tag conflict it shows the server's record beside the edit and saves the merge. */
export async function editRecord(picker, type, record) {
  const inputs = {};
  const assets = {};  // asset fields: a file picker each (values.js assetEditor)
  const rows = type.fields.map((f) => {
    if (f.type.startsWith('ASSETID')) {
      const editor = assetEditor(f, record ? record.fields[f.name] : null);
      assets[f.name] = editor;
      editor.input.id = `in-${f.name}`;
      return h('tr', {}, h('th', { scope: 'row' }, h('label', { for: editor.input.id }, f.name), h('div', { class: 'muted' }, f.type, ' · a file to upload')), h('td', {}, editor.node));
    }
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
      if (assets[f.name]) continue;
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
        for (const [name, editor] of Object.entries(assets)) {
          const value = await editor.value((file) => uploadAsset(picker, type.name, name, rec.recordName, file));
          if (value) fields[name] = value;
        }
        const r = await db(picker.scope, 'records/modify', {
          zoneID: picker.zoneID, operations: [{ operationType: record ? 'replace' : 'create', record: rec }],
        }, picker.user);
        const out = r.records[0];
        if (out.serverErrorCode === 'CONFLICT' && out.serverRecord) {
          changeTag = out.serverRecord.recordChangeTag;
          err.replaceChildren(mergeView(type, fields, out.serverRecord, (f, value) => {
            if (assets[f.name]) assets[f.name].keep(value);
            else inputs[f.name].value = editText(value, f.type);
          }));
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

/**
 * An asset's bytes, uploaded for field `fieldName` of a `recordType` record (the Web Services flow: `assets/upload`
 * for a signed upload URL on this server, then the bytes to it): the upload's `singleFile`, with the receipt
 * `records/modify` takes.
 */
export async function uploadAsset(picker, recordType, fieldName, recordName, file) {
  const token = { recordType, fieldName };
  if (recordName) token.recordName = recordName;
  const r = await db(picker.scope, 'assets/upload', { zoneID: picker.zoneID, tokens: [token] }, picker.user);
  const response = await fetch(r.tokens[0].url, { method: 'POST', body: file, credentials: 'omit' });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`uploading ${file.name}: ${json.reason || `HTTP ${response.status}`}`);
  return json.singleFile;
}

/**
 * The conflict: per field, your value and the server's; choosing one puts it in the form (`set(field, value)`), which
 * saves over the server's change tag.
 */
export function mergeView(type, mine, server, set) {
  const rows = type.fields.map((f) => {
    const yours = mine[f.name] ? valueText({ value: mine[f.name].value, type: f.type }) : '';
    const theirs = valueText(server.fields[f.name]);
    const differs = yours !== theirs;
    const keepMine = h('input', { type: 'radio', name: `merge-${f.name}`, checked: true, 'aria-label': `Keep my ${f.name}` });
    const takeTheirs = h('input', {
      type: 'radio', name: `merge-${f.name}`, 'aria-label': `Take the server's ${f.name}`,
      onchange: () => set(f, server.fields[f.name]),
    });
    keepMine.addEventListener('change', () => set(f, mine[f.name]));
    return h('tr', { class: differs ? 'differs' : '' }, h('th', { scope: 'row' }, f.name),
      h('td', { class: 'mine' }, h('label', { class: 'check' }, keepMine, yours || '—')),
      h('td', { class: 'theirs' }, h('label', { class: 'check' }, takeTheirs, theirs || '—')));
  });
  return h('div', { class: 'panel', id: 'conflict' },
    h('h3', {}, 'Someone else changed this record'),
    h('p', {}, `The server has change tag ${server.recordChangeTag}, saved ${server.modified ? new Date(server.modified.timestamp).toISOString() : ''}. Pick a value per field, then Save again to write the merge.`),
    h('table', { class: 'merge' }, h('thead', {}, h('tr', {}, h('th', {}, 'Field'), h('th', {}, 'Yours'), h('th', {}, 'Server'))), h('tbody', {}, rows)));
}
