// Cloudlet Console: the zones and subscriptions pages.
import { confirmDialog, db, field, h, pages, schema, scopePicker, select, toast } from './ui.js';

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
