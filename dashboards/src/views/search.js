// Runs across experiments, filtered by status, tag (on the run or its experiment) and
// config value (GET /api/v1/runs, coordinator/run_search.h). The filter lives in the URL
// (#/search?status=failed&tag=good&where=train.lr%3D0.001) so a search can be shared.
import { h, replace } from '../dom.js';
import { get } from '../api.js';
import { metricValue, kStatuses } from '../format.js';
import { statusBadge, keyMetrics, loading } from './common.js';

export function searchView(el, [queryText], signal) {
  const params = new URLSearchParams(queryText || '');
  const status = h('select', { id: 'search-status' }, h('option', { value: '' }, 'any status'),
    kStatuses.map((st) => h('option', { value: st, selected: params.get('status') === st }, st)));
  const tag = h('input', { type: 'text', id: 'search-tag', placeholder: 'tag', value: params.get('tag') || '' });
  const where = h('input', { type: 'text', id: 'search-where', placeholder: 'train.lr<=1e-3; seed=1',
    value: params.get('where') || '' });
  const err = h('p', { class: 'error' });
  const out = h('div', { id: 'search-results', class: 'scroll-x' });
  const go = () => {
    const q = new URLSearchParams();
    if (status.value) q.set('status', status.value);
    if (tag.value.trim()) q.set('tag', tag.value.trim());
    if (where.value.trim()) q.set('where', where.value.trim());
    location.hash = `#/search?${q.toString()}`;
  };
  for (const input of [tag, where]) input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  replace(el, h('h1', {}, 'Runs'), err,
    h('section', { class: 'card' }, h('div', { class: 'row', id: 'search-form' },
      status, tag, where, h('button', { onclick: go, id: 'search-go' }, 'search'),
      h('span', { class: 'muted' }, 'across every experiment; where: KEY OP VALUE, OP one of = != < <= > >=, ";" between')),
    out));
  if (![...params.keys()].length) {
    replace(out, h('p', { class: 'muted' }, 'Filter by status, tag or config value.'));
    return;
  }
  replace(out, loading('runs'));
  get(`/runs?${params.toString()}`, signal).then((r) => {
    const runs = r.runs || [];
    const metrics = keyMetrics(runs, 3);
    replace(out, h('p', { class: 'muted', id: 'search-count' },
      `${runs.length}${r.truncated ? '+' : ''} run${runs.length === 1 ? '' : 's'}`),
    runs.length ? h('table', { class: 'grid-table', id: 'search-table' },
      h('thead', {}, h('tr', {}, ['run', 'experiment', 'arm', 'status', 'worker', ...metrics, 'tags']
        .map((c) => h('th', {}, c)))),
      h('tbody', {}, runs.map((x) => h('tr', { dataset: { runId: x.id } },
        h('td', {}, h('a', { href: `#/runs/${x.id}` }, `#${x.id}`)),
        h('td', {}, h('a', { href: `#/experiments/${x.experiment_id}` }, `#${x.experiment_id} ${x.experiment_name}`)),
        h('td', {}, x.arm), h('td', {}, statusBadge(x.status)),
        h('td', { title: x.worker || '' }, x.worker_name || x.worker || '—'),
        metrics.map((m) => h('td', { class: 'num' }, metricValue(m, (x.summary || {})[m]))),
        h('td', {}, (x.tags || []).join(' ')))))) : null);
  }).catch((e) => {
    if (e.name !== 'AbortError') {
      replace(out);
      err.textContent = e.message;
    }
  });
}
