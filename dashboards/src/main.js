// Entry point: page frame (navigation, token box, fleet summary) and a hash router.
// Each view is mount(el, params, signal); the signal aborts when the user navigates away,
// which stops that view's polling.
import './style.css';
import { h, replace, poll } from './dom.js';
import { get, getToken, setToken, restoreToken } from './api.js';

// Each view is a chunk of its own, fetched and compiled when first shown: a first visit
// compiles the frame and the one page it opens (a bundle of every view and the chart
// library, compiled at once, blocked the main thread 0.5 s on a loaded machine).
const kRoutes = [
  [/^#?\/?(experiments)?$/, () => import('./views/experiments.js').then((m) => m.experimentsView), 'experiments'],
  [/^#\/experiments\/(\d+)$/, () => import('./views/experiment.js').then((m) => m.experimentView), 'experiments'],
  [/^#\/runs\/(\d+)$/, () => import('./views/run.js').then((m) => m.runView), 'experiments'],
  [/^#\/workers$/, () => import('./views/workers.js').then((m) => m.workersView), 'workers'],
  [/^#\/search\??(.*)$/, () => import('./views/search.js').then((m) => m.searchView), 'search'],
  [/^#\/diff(?:\/(\d+)\/(\d+))?$/, () => import('./views/diff.js').then((m) => m.diffView), 'search'],
];

function tokenBox() {
  const input = h('input', {
    type: 'password', placeholder: 'token', value: getToken(), id: 'token',
    autocomplete: 'off', size: 14,
  });
  const state = h('span', { class: 'muted', id: 'token-state' });
  const show = () => { state.textContent = getToken() ? 'token set' : 'no token'; };
  const save = () => { setToken(input.value.trim()); show(); };
  input.addEventListener('keydown', (e) => { if (e.key === 'Enter') save(); });
  show();
  return h('span', { class: 'token' }, input,
    h('button', { onclick: save, id: 'token-save' }, 'save'),
    h('button', { onclick: () => { input.value = ''; save(); } }, 'clear'), state);
}

restoreToken();
document.getElementById('boot')?.remove();
const fleet = h('span', { class: 'fleet muted', id: 'fleet' });
const nav = {
  experiments: h('a', { href: '#/' }, 'Experiments'),
  search: h('a', { href: '#/search' }, 'Runs'),
  workers: h('a', { href: '#/workers' }, 'Workers'),
};
const main = h('main', { id: 'view' });
document.body.append(
  h('header', {}, h('a', { class: 'brand', href: '#/' }, 'headlab'),
    h('nav', {}, nav.experiments, nav.search, nav.workers), fleet, tokenBox()),
  main);

let current = null;
function route() {
  if (current) current.abort();
  current = new AbortController();
  const hash = location.hash || '#/';
  for (const [re, load, tab] of kRoutes) {
    const m = hash.match(re);
    if (!m) continue;
    for (const [k, a] of Object.entries(nav)) a.classList.toggle('active', k === tab);
    const el = h('div', {}, h('p', { class: 'muted loading' }, 'loading the page…'));
    replace(main, el);
    const { signal } = current;
    load().then((view) => {
      if (!signal.aborted) view(el, m.slice(1), signal);
    }, (e) => {
      // A build since this tab opened renames the chunks: a reload fetches the new ones.
      if (!signal.aborted) {
        replace(el, h('p', { class: 'error' }, `could not load the page (${e.message}): reload it ` +
          '(the dashboard may have been rebuilt since this tab opened)'));
      }
    });
    return;
  }
  replace(main, h('p', { class: 'error' }, `no such page: ${hash}`));
}
window.addEventListener('hashchange', route);
route();

// Fleet summary in the header, refreshed slowly on every page, and more slowly still while
// nothing runs or waits (an idle tab must cost the coordinator next to nothing). First read
// after kFleetFirstMs: the page opened is what the first second's reads are for.
const kFleetFirstMs = 1500;
let fleetBusy = true;
poll(async () => {
  try {
    const s = await get('/status');
    const by = s.runs_by_status || {};
    fleetBusy = (by.running || 0) + (by.queued || 0) > 0;
    const workers = (s.workers || []).length;
    fleet.textContent = `${workers} worker${workers === 1 ? '' : 's'} · ` +
      `${by.running || 0} running · ${by.queued || 0} queued`;
  } catch (e) {
    fleet.textContent = e.message;
  }
}, () => (fleetBusy ? 5000 : 15000), new AbortController().signal, { first: kFleetFirstMs });
