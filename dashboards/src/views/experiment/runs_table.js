// The experiment page's Runs block: the runs table over the coordinator's pages (sorted,
// filtered and paged in SQL: GET .../runs?limit=&offset=), with a tick box per run to
// overlay it, the run's group colour, its worker and device, the values the grid varies
// and the first summary metrics.
import { h } from '../../dom.js';
import { get } from '../../api.js';
import { metricValue, kStatuses, paramText } from '../../format.js';
import { VirtualTable } from '../../table.js';
import { statusBadge, preferredKeys, pairText, deviceLabel, loading } from '../common.js';

const kFilterDelayMs = 250;

// ctx: {id, signal, s, stale, guard, showError}; groups: RunGroups; onTick(runId, on): a
// run's box was ticked or unticked.
export function runsTable(ctx, groups, onTick) {
  const { id, signal, s } = ctx;
  const filterInput = h('input', { type: 'search', placeholder: 'filter: arm, worker, #id, tag, train.lr<=1e-3; seed=1',
    id: 'runs-filter' });
  const statusSelect = h('select', { id: 'status-filter' }, h('option', { value: '' }, 'all statuses'),
    kStatuses.map((st) => h('option', { value: st }, st)));
  const tableEl = h('div', { id: 'runs-table' }, loading('runs'));
  const card = h('section', { class: 'card' },
    h('div', { class: 'row' }, h('h2', {}, 'Runs'), filterInput, statusSelect), tableEl);
  let table = null;

  async function loadPage({ offset, limit, sort, desc }) {
    const q = new URLSearchParams({ offset: String(offset), limit: String(limit), sort, desc: desc ? '1' : '0' });
    if (statusSelect.value) q.set('status', statusSelect.value);
    const f = filterInput.value.trim();
    if (f) q.set('q', f);
    if (!s.summaryKeys) q.set('keys', '1');
    const r = await get(`/experiments/${id}/runs?${q}`, signal);
    if (r.summary_keys) s.summaryKeys = r.summary_keys;
    if (Array.isArray(r.varying)) s.varying = r.varying;
    for (const row of r.runs) s.info.set(row.id, row);
    return { rows: r.runs, matched: r.matched, total: r.total };
  }

  function build() {
    const metricKeys = preferredKeys(s.summaryKeys || [], 4);
    const cols = [
      { label: '', width: '28px', cell: (r) => h('input', {
        type: 'checkbox', checked: s.selected.has(r.id), title: 'overlay this run',
        onchange: (e) => onTick(r.id, e.target.checked) }) },
      { label: 'run', width: '70px', sort: 'id',
        cell: (r) => h('a', { href: `#/runs/${r.id}` }, `#${r.id}`) },
      { label: 'arm', width: `minmax(${armColumnWidth(s.arms, tableEl)}px,2fr)`, sort: 'arm',
        // The colour of the run's group (arm x the axes it is broken down by), as in the charts.
        cell: (r) => h('span', { title: groups.of(r) }, h('span', { class: 'swatch',
          style: { background: groups.color(groups.of(r), r.arm) } }), r.arm) },
      { label: 'status', width: '100px', sort: 'status', cell: (r) => statusBadge(r.status) },
      { label: 'attempt', width: '70px', sort: 'attempts', cell: (r) => r.attempts, cls: 'num' },
      { label: 'worker', width: 'minmax(80px,1fr)', sort: 'worker',
        cell: (r) => h('span', { title: r.worker || '' }, r.worker_name || r.worker || '—') },
      { label: 'device', width: '90px', sort: 'device',
        cell: (r) => (r.attempts ? deviceLabel(r.devices, s.workers.get(r.worker)) : '—') },
      { label: 'pair', width: 'minmax(80px,1fr)', sort: 'pair',
        cell: (r) => pairText(r.pair_key, s.pairBy) },
      // The values the grid varies tell the runs apart (not the config hash).
      ...s.varying.map((k) => ({
        label: k, width: 'minmax(70px,110px)', cls: 'param', sort: `param:${k}`, title: `sort by ${k}`,
        cell: (r) => paramText(r.params ? r.params[k] : undefined),
      })),
      ...metricKeys.map((k) => ({
        label: k, width: '100px', cls: 'num', sort: `summary:${k}`, title: `sort by ${k}`,
        cell: (r) => metricValue(k, r.summary ? r.summary[k] : null),
      })),
      { label: 'tags', width: 'minmax(60px,1fr)', sort: 'tags',
        cell: (r) => h('span', { class: 'tags-cell', title: r.note || '' }, (r.tags || []).join(' ') || (r.note ? '✎' : '')) },
    ];
    table = new VirtualTable(tableEl, cols, {
      load: loadPage,
      rowAttrs: (r) => ({ dataset: { runId: r.id, status: r.status },
        class: `vt-row ${s.selected.has(r.id) ? 'selected' : ''}` }),
    });
  }

  // Filtering is the coordinator's: a keystroke waits kFilterDelayMs for the next one.
  let filterTimer = 0;
  const reload = () => table && table.reload().catch(ctx.showError);
  filterInput.addEventListener('input', () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(reload, kFilterDelayMs);
  });
  statusSelect.addEventListener('change', reload);

  // The first page is asked for at once, beside the experiment's own answer.
  const firstPage = loadPage({ offset: 0, limit: 100, sort: 'idx', desc: false });
  firstPage.catch(() => {});  // awaited below; a page left early must not log a rejection

  // Builds the table from the first page (which tells the summary keys its columns show),
  // then re-reads the rows in view when the experiment's counts change.
  async function refresh() {
    if (!table) {
      const first = await firstPage;
      s.arms = [...new Set([...s.arms, ...first.rows.map((r) => r.arm)])].sort();
      build();
      table.seed(first);
      s.done.table = s.countsSig;
      return;
    }
    if (!ctx.stale('table')) return;
    await table.refreshVisible();
  }

  return { card, refresh, render: () => table && table.render() };
}

// The arm column's least width in px: the longest arm name whole beside its swatch (cell
// padding 16 px, swatch 15 px), within [120, 360]; at 1400 px a 2fr share alone cut
// 28-character names.
function armColumnWidth(arms, el) {
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = getComputedStyle(el).font;
  const text = Math.max(0, ...arms.map((a) => ctx.measureText(a).width));
  return Math.round(Math.min(360, Math.max(120, text + 16 + 15 + 4)));
}
