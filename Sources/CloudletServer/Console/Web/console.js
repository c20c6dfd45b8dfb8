// Cloudlet Console: the frame — the container and environment bar, the sidebar's pages, sign-out. Plain JavaScript
// modules, no build step, no libraries; each page module registers itself in `pages` (ui.js).
import { api, h, nav, needContainer, pages, route, state } from './ui.js';
import './schema.js';
import './records.js';
import './zones.js';
import './live.js';

// MARK: - Frame

async function render() {
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
  nav.render = render;
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
