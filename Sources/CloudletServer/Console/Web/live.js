// Cloudlet Console: the live pages — the change feed (websocket) and the health charts (metrics).
import { api, field, h, pages, q, scopePicker, select, state, toast } from './ui.js';

// MARK: Changes

pages.changes = async (view) => {
  view.append(h('h1', { class: 'page' }, 'Changes'),
    h('p', { class: 'lead' }, 'A live view of a change feed, pushed over a websocket as each change commits: every record saved or deleted in a zone, or every zone of a database that changed.'));
  const picker = scopePicker(() => stop());
  const kind = select([['zone', 'The zone\'s records'], ['database', 'The database\'s zones (private, shared)']], 'zone', { id: 'feed-kind' });
  kind.addEventListener('change', () => stop());
  const history = h('input', { type: 'checkbox', id: 'feed-history' });
  history.addEventListener('change', () => stop());
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
    const params = q({ container: state.container, environment: state.environment, database: picker.scope, user: picker.user, zone: picker.zoneID.zoneName, feed: kind.value, history: history.checked ? '1' : '' });
    const ws = new WebSocket(`${scheme}//${location.host}/cloudlet/console/ws/changes?${params}`);
    socket = ws;
    state.sockets.push(ws);
    // Events of a socket stopped earlier (its close arrives late) are not about the current one.
    // Open, then caught up: the server says {live: true} once it has read the feed up to now.
    ws.addEventListener('open', () => { if (socket === ws) { status.textContent = 'catching up…'; toggle.textContent = 'Stop'; } });
    ws.addEventListener('close', () => { if (socket === ws) stop(); });
    ws.addEventListener('message', (m) => {
      const change = JSON.parse(m.data);
      if (change.error) { toast(change.error, true); return; }
      if (change.live) {
        if (socket === ws) { status.className = 'live on'; status.textContent = 'live'; }
        return;
      }
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
  view.append(picker.node, h('div', { class: 'toolbar' }, field('Feed', kind),
    h('label', { class: 'check' }, history, ' From the start (what changed before too)'), toggle, status,
    h('button', { type: 'button', onclick: () => feed.replaceChildren() }, 'Clear')),
  h('div', { class: 'panel' }, feed));
};

// MARK: Health

/** Parses Prometheus text: [{name, labels, value}]. */
export function parseMetrics(text) {
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

export function sum(samples, name) { return samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0); }

/** p99 over all routes from two histogram snapshots (the requests between them); null without requests. */
export function p99(prev, cur) {
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

export const CHARTS = [
  ['requests', 'Requests / s', (v) => v.toFixed(1)],
  ['p99', 'p99 latency (bucket bound)', (v) => `${(v * 1000).toFixed(1)} ms`],
  ['commits', 'Commits / s', (v) => v.toFixed(1)],
  ['fsyncs', 'fsyncs / s', (v) => v.toFixed(1)],
  ['logBytes', 'Log size', (v) => bytes(v)],
  ['compaction', 'Compaction progress', (v) => bytes(v)],
  ['records', 'Live records', (v) => String(Math.round(v))],
  ['inflight', 'Requests in flight', (v) => String(Math.round(v))],
  ['lag', 'Replication lag (slowest replica)', (v) => `${Math.round(v)} LSNs`],
];

/** The largest value of metric `name` (over its labels); undefined when the server has none. */
export function max(samples, name) {
  const values = samples.filter((s) => s.name === name).map((s) => s.value);
  return values.length ? Math.max(...values) : undefined;
}

export function bytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

export function drawChart(svg, points) {
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
      // A cluster node's replicas, behind the leader of each partition (none on a single node).
      lag: max(cur, 'cloudlet_cluster_replica_lag_lsns'),
    };
    cards.lag.value.classList.toggle('note', values.lag === undefined);
    if (values.lag === undefined) cards.lag.value.textContent = 'A single node: nothing replicates.';
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
