// The "Config value vs metric" block: one dot per run (a sample past kScatterPoints,
// the coordinator's scatter panel) of a config value the grid varies against a summary
// metric and, beside it, the metric's mean ± SE per group: the arms broken down by the
// chosen axes, as the stored results give them when they break them down by the same
// axes, else computed from the runs' configs (a grouped scan of every run).
import { h, replace } from '../../dom.js';
import { get, query, sqlString } from '../../api.js';
import { meanSe, paramText, yAxisLabel } from '../../format.js';
import { drawScatter } from '../../scatter.js';
import { unpairedAxes, groupLabel, jsonPathSql, groupsFromResults } from '../../groups.js';
import { preferredKeys } from '../common.js';

// Dots of the scatter: config values take few levels, so 2,000 dots show their spread
// (5,000 made the largest answer of the page, 208 KB, and its slowest query).
const kScatterPoints = 2000;

// The choices of x (the keys the grid varies) and y (the summary keys) and the ones
// selected: those already chosen (x, y), else the first unpaired axis and the preferred
// summary metric.
export function scatterChoices(s, x, y) {
  const xs = s.varying.length ? s.varying : [];
  const ys = s.summaryKeys || [];
  const unpaired = unpairedAxes(s.varying, s.pairBy, s.gridArms);
  return { xs, ys, x: x || unpaired[0] || xs[0], y: y || preferredKeys(ys, 1)[0] };
}

// A group of the grouped scan {n, mean, sq (mean of squares)} as mean ± SE: the sample
// standard deviation (n - 1) over √n; no SE for one run.
export function groupMeanSe(g) {
  return { mean: g.mean,
    se: g.n > 1 ? Math.sqrt(Math.max(0, (g.sq - g.mean * g.mean) * g.n / (g.n - 1)) / g.n) : null };
}

// ctx: {id, signal, s, stale, guard}; groups: RunGroups; results: resultsReader.
export function scatterPanel(ctx, groups, results) {
  const { id, signal, s } = ctx;
  const selectX = h('select', { id: 'scatter-x' });
  const selectY = h('select', { id: 'scatter-y' });
  const scatterEl = h('div', { class: 'chart', id: 'scatter' });
  const breakdown = h('div', { id: 'breakdown', class: 'scroll-x' });
  const card = h('section', { class: 'card' },
    h('div', { class: 'row' }, h('h2', {}, 'Config value vs metric'), h('label', {}, 'x ', selectX),
      h('label', {}, 'y ', selectY)),
    h('div', { class: 'charts' }, scatterEl, breakdown));

  function fillSelects() {
    const c = scatterChoices(s, selectX.value, selectY.value);
    const sig = JSON.stringify([c.xs, c.ys]);
    if (selectX.dataset.sig === sig) return;
    selectX.dataset.sig = sig;
    replace(selectX, c.xs.map((k) => h('option', { value: k, selected: k === c.x }, k)));
    replace(selectY, c.ys.map((k) => h('option', { value: k, selected: k === c.y }, k)));
  }

  async function refresh() {
    fillSelects();
    const x = selectX.value;
    const y = selectY.value;
    if (!x || !y) {
      replace(scatterEl, h('p', { class: 'muted' }, !y ? 'No summary metric yet.' : 'The grid varies no config value.'));
      replace(breakdown);
      return;
    }
    if (!ctx.stale('scatter', x + y + s.by)) return;
    const keys = groups.keys();
    const gcols = keys.map((k, i) => `, json_extract(r.config_json, ${jsonPathSql(k)}) AS g${i}`).join('');
    const ggrp = keys.map((_, i) => `, g${i}`).join('');
    const byQuery = async () => (await query(`SELECT r.arm AS arm${gcols}, count(s.value) AS n,
  avg(s.value) AS mean, avg(s.value * s.value) AS sq
FROM runs r JOIN summaries s ON s.run_id = r.id AND s.key = ${sqlString(y)}
WHERE r.experiment_id = ${id} AND r.status = 'succeeded' AND s.value IS NOT NULL
GROUP BY r.arm${ggrp} ORDER BY r.arm${ggrp}`, signal)).map((g) => ({
      arm: g.arm, values: keys.map((_, i) => g[`g${i}`]), n: g.n, ...groupMeanSe(g) }));
    const dotsQuery = new URLSearchParams({ x, y, n: String(kScatterPoints) });
    if (keys.length) dotsQuery.set('by', keys.join(','));
    const [dots, rows] = await Promise.all([
      get(`/experiments/${id}/panels/scatter?${dotsQuery}`, signal).then((a) => a.rows),
      // A finished experiment's results are stored (and kept in the coordinator's memory);
      // an unfinished one's are computed per request, seconds at 10^5 runs.
      s.active ? byQuery()
        : results.read().then((r) => groupsFromResults(r, keys, y), () => null).then((g) => g || byQuery()),
    ]);
    const labelOf = (r) => groupLabel(r.arm, keys, keys.map((_, i) => r[`g${i}`]));
    drawScatter(scatterEl, dots.map((r) => {
      const label = labelOf(r);
      return { x: r.x, y: r.y, label, color: groups.color(label, r.arm) };
    }), { xLabel: x, yLabel: yAxisLabel(y) });
    replace(breakdown, h('table', { class: 'grid-table', id: 'breakdown-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'arm'), keys.map((k) => h('th', {}, k)),
        h('th', { class: 'num' }, 'n'), h('th', { class: 'num' }, `${y} mean ± se`))),
      h('tbody', {}, rows.map((g) => {
        const label = groupLabel(g.arm, keys, g.values);
        return h('tr', { dataset: { group: label } },
          h('td', {}, h('span', { class: 'swatch', style: { background: groups.color(label, g.arm) } }), g.arm),
          g.values.map((v) => h('td', {}, paramText(v))),
          h('td', { class: 'num' }, g.n),
          h('td', { class: 'num' }, meanSe(y, g.mean, g.se, g.n)));
      }))));
  }

  for (const sel of [selectX, selectY]) {
    sel.addEventListener('change', () => { s.done.scatter = ''; ctx.guard(refresh)(); });
  }
  return { card, refresh };
}
