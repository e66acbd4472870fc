// Runs across experiments, filtered by status, tag (on the run or its experiment) and
// config value (GET /api/v1/runs, coordinator/run_search.h). The filter lives in the URL
// (#/search?status=failed&tag=good&where=train.lr%3D0.001) so a search can be shared.
// Ticked runs overlay in one chart whatever experiment they belong to.
import { h, replace, appendInChunks } from '../dom.js';
import { get, query, sqlInt } from '../api.js';
import { metricValue, kStatuses, xAxisLabel, yAxisLabel, isBytesKey } from '../format.js';
import { CurveChart, colorFor, chartControls } from '../charts.js';
import { RunMetrics } from '../metrics.js';
import { statusBadge, keyMetrics, loading } from './common.js';
import { tickedDiffLink } from './diff.js';

const kMaxOverlay = 20;
const kShownRuns = 200;

// The overlay of ticked runs across experiments: one metric key, a line per run coloured by
// its experiment. Finished runs are read once; running ones again on each tick.
function crossOverlay(signal) {
  const keySelect = h('select', { id: 'overlay-key' });
  const note = h('span', { class: 'muted', id: 'overlay-note' }, 'tick runs (from any experiment) to overlay them');
  const diffEl = h('span', { id: 'overlay-diff' });  // two ticked runs: their config diff
  const chartEl = h('div', { class: 'chart', id: 'overlay-chart' });
  const chart = new CurveChart(chartEl);
  signal.addEventListener('abort', () => chart.destroy());
  const controls = chartControls(() => [chart]);
  const runs = new Map();  // run id -> {run, m: RunMetrics}
  const el = h('section', { class: 'card', id: 'overlay' },
    h('div', { class: 'row' }, h('h2', {}, 'Overlay'), h('label', {}, 'metric ', keySelect), controls, note, diffEl), chartEl);
  el.hidden = true;
  const experiments = [];
  const draw = async () => {
    el.hidden = runs.size === 0;
    note.textContent = `${runs.size} of at most ${kMaxOverlay} runs`;
    replace(diffEl, tickedDiffLink([...runs.keys()]));
    if (!runs.size) return;
    const ids = [...runs.keys()].map(sqlInt).join(',');
    const keys = (await query(`SELECT DISTINCT key FROM metrics WHERE run_id IN (
SELECT coalesce(reused_from, id) FROM runs WHERE id IN (${ids})) ORDER BY key`, signal)).map((r) => r.key);
    const key = keys.includes(keySelect.value) ? keySelect.value
      : ['train.loss', 'eval.loss', 'eval.ppl'].find((k) => keys.includes(k)) || keys[0];
    replace(keySelect, keys.map((k) => h('option', { value: k, selected: k === key }, k)));
    if (!key) return;
    chart.setAxes({ xLabel: xAxisLabel(key), yLabel: yAxisLabel(key), bytes: isBytesKey(key) });
    const lines = [];
    for (const [id, r] of runs) {
      if (!r.m || r.m.key !== key) r.m = new RunMetrics(id, key);
      await r.m.update(signal);
      if (!experiments.includes(r.run.experiment_id)) experiments.push(r.run.experiment_id);
      const d = r.m.get(key);
      lines.push({ label: `#${id} ${r.run.experiment_name} ${r.run.arm}`,
        color: colorFor(experiments.indexOf(r.run.experiment_id)), xs: d.xs, ys: d.ys });
    }
    chart.set(lines);
  };
  keySelect.addEventListener('change', () => draw().catch(() => {}));
  return {
    el,
    // Returns false when the overlay is full.
    toggle(run, on) {
      if (on && runs.size >= kMaxOverlay) return false;
      if (on) runs.set(run.id, { run, m: null }); else runs.delete(run.id);
      draw().catch((e) => { note.textContent = e.message; });
      return true;
    },
  };
}

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
  const overlay = crossOverlay(signal);
  replace(el, h('h1', {}, 'Runs'), err,
    h('section', { class: 'card' }, h('div', { class: 'row', id: 'search-form' },
      status, tag, where, h('button', { onclick: go, id: 'search-go' }, 'search'),
      h('span', { class: 'muted' }, 'across every experiment; where: KEY OP VALUE, OP one of = != < <= > >=, ";" between')),
    out), overlay.el);
  if (![...params.keys()].length) {
    replace(out, h('p', { class: 'muted' }, 'Filter by status, tag or config value.'));
    return;
  }
  replace(out, loading('runs'));
  // A table element per run: the first kShownRuns unless the URL asks for more (limit=),
  // so a search matching 10^5 runs does not freeze the page building 1000 rows.
  const asked = new URLSearchParams(params);
  if (!asked.has('limit')) asked.set('limit', String(kShownRuns));
  get(`/runs?${asked.toString()}`, signal).then((r) => {
    const runs = r.runs || [];
    const metrics = keyMetrics(runs, 3);
    const body = h('tbody', {});
    const more = new URLSearchParams(asked);
    more.set('limit', '1000');
    replace(out, h('p', { class: 'muted', id: 'search-count' },
      `${runs.length}${r.truncated ? '+' : ''} run${runs.length === 1 ? '' : 's'}`,
      r.truncated && Number(asked.get('limit')) < 1000
        ? h('span', {}, ' · ', h('a', { href: `#/search?${more}` }, 'show up to 1000')) : null),
    runs.length ? h('table', { class: 'grid-table', id: 'search-table' },
      h('thead', {}, h('tr', {}, ['', 'run', 'experiment', 'arm', 'status', 'worker', ...metrics, 'tags']
        .map((c) => h('th', {}, c)))), body) : null);
    // Rows a chunk per task: the first chunk is drawn with the table.
    return appendInChunks(body, runs, (x) => h('tr', { dataset: { runId: x.id } },
      h('td', {}, h('input', { type: 'checkbox', class: 'overlay-tick', title: 'overlay this run',
        onchange: (e) => {
          if (!overlay.toggle(x, e.target.checked)) {
            e.target.checked = false;
            err.textContent = `at most ${kMaxOverlay} runs overlay at once`;
          }
        } })),
      h('td', {}, h('a', { href: `#/runs/${x.id}` }, `#${x.id}`)),
      h('td', {}, h('a', { href: `#/experiments/${x.experiment_id}` }, `#${x.experiment_id} ${x.experiment_name}`)),
      h('td', {}, x.arm), h('td', {}, statusBadge(x.status)),
      h('td', { title: x.worker || '' }, x.worker_name || x.worker || '—'),
      metrics.map((m) => h('td', { class: 'num' }, metricValue(m, (x.summary || {})[m]))),
      h('td', {}, (x.tags || []).join(' '))), signal);
  }).catch((e) => {
    if (e.name !== 'AbortError') {
      replace(out);
      err.textContent = e.message;
    }
  });
}
