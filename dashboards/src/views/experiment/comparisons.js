// The Comparisons block: arms (mean ± SE per metric, a metric per row so that 40 SAF
// metrics do not make the page wide) and comparisons (paired statistic with its unit, n,
// mean ± SE, 95% CI, which side is better and what the interval says), with each
// comparison's pairs fetched when opened.
import { h, replace } from '../../dom.js';
import { meanSe, num, paramText } from '../../format.js';
import { pairText, resultColumns, loading } from '../common.js';

const kShownPairs = 200;

// "train.lr=0.001 · seed=1": the stratum an arm or comparison entry stands for ("" for none).
export function stratumText(by) {
  return Object.entries(by || {}).map(([k, v]) => `${k}=${paramText(v)}`).join(' · ');
}

// The value of a statistic meaning "no difference".
export function neutral(stat) {
  return stat === 'ratio' || stat === 'speedup' ? 1 : 0;
}

// What a comparison's row says besides its fields: the unit after its numbers, its 95%
// interval (the coordinator's exact t quantile; none for a median or under 2 pairs), the
// number of pairs and whether the interval excludes "no difference".
export function comparisonFacts(c) {
  const ci = c.ci95 ? [c.ci95.lo, c.ci95.hi] : null;
  const neutralValue = c.neutral ?? neutral(c.stat);
  return {
    unit: c.unit === '%' ? ' %' : c.unit === 'x' ? '×' : '',
    ci,
    nPairs: c.n_pairs ?? (c.per_pair || []).length,
    signif: Boolean(ci && (ci[0] > neutralValue || ci[1] < neutralValue)),
  };
}

// The arms and comparisons tables of GET .../results (`r`). loadPairs() -> Promise of the
// results with per_pair lists (asked for when a comparison's pairs are opened: at 10^5
// runs they are most of the answer).
export function resultsTables(r, pairBy, loadPairs) {
  const arms = r.arms || [];
  const comps = r.comparisons || [];
  const columns = resultColumns(arms.flatMap((a) => Object.keys(a.metrics || {})));
  const cell = (key, m) => (m ? meanSe(key, m.mean, m.se, m.n) : '—');
  const armTable = h('table', { class: 'grid-table', id: 'arms-table' },
    h('thead', {}, h('tr', {}, h('th', {}, 'metric'),
      arms.map((a) => h('th', { class: 'num', dataset: { arm: a.arm, stratum: stratumText(a.by) } }, a.arm,
        stratumText(a.by) ? h('div', { class: 'stratum' }, stratumText(a.by)) : null,
        h('div', { class: 'muted' }, `n ${a.n}, ${a.succeeded} ok`))))),
    h('tbody', {}, columns.map((c) => h('tr', { dataset: { metric: c.key } }, h('th', {}, c.key),
      arms.map((a) => (c.unmeasured
        ? h('td', { class: 'muted', title: 'no FLOPs counter was read' }, 'unmeasured')
        : h('td', { class: 'num' }, cell(c.key, (a.metrics || {})[c.key]))))))));
  const compTable = comps.length ? h('table', { class: 'grid-table', id: 'comparisons' },
    h('thead', {}, h('tr', {}, ['comparison', 'treatment vs baseline', 'metric', 'stat', 'pairs',
      'mean ± se', '95% CI', 'better', 'reading', 'per pair'].map((c) => h('th', {}, c)))),
    h('tbody', {}, comps.map((c) => {
      const { unit, ci, nPairs, signif } = comparisonFacts(c);
      return h('tr', { dataset: { comparison: c.name } },
        h('td', {}, c.name), h('td', {}, `${c.treatment} vs ${c.baseline}`), h('td', {}, c.metric),
        h('td', {}, c.stat + (c.unit ? ` (${c.unit})` : '')), h('td', { class: 'num' }, c.n),
        h('td', { class: 'num' }, c.n ? `${meanSe('', c.mean, c.se, c.n)}${unit}` : '—'),
        h('td', { class: `num ci ${signif ? 'signif' : ''}` }, ci ? `[${num(ci[0])}, ${num(ci[1])}]${unit}` : '—'),
        h('td', {}, c.better ? `${c.better}` : '—'),
        h('td', { class: 'verdict' }, c.verdict || c.note || (c.n < 2 ? 'too few pairs' : '—')),
        h('td', {}, nPairs ? pairsDetails(c, nPairs, unit, pairBy, loadPairs, r.experiment) : '—'));
    }))) : h('p', { class: 'muted' }, 'No comparisons in this grid.');
  return [arms.length ? armTable : h('p', { class: 'muted' }, 'No results yet.'), compTable];
}

// A comparison's pairs, built when opened: the first kShownPairs of them, each with its
// two runs (10^5 pairs as elements would be most of the page).
function pairsDetails(c, nPairs, unitText, pairBy, loadPairs, experiment) {
  const list = h('div', { class: 'pairs-box' }, loading('pairs'));
  const box = h('details', { class: 'pairs-details' }, h('summary', {}, `${nPairs} pairs`), list);
  box.addEventListener('toggle', async () => {
    if (!box.open || box.dataset.loaded) return;
    box.dataset.loaded = '1';
    try {
      const all = await loadPairs();
      const mine = ((all.comparisons || []).find((x) => x.name === c.name) || {}).per_pair || [];
      const shown = mine.slice(0, kShownPairs);
      replace(list, h('ul', { class: 'pairs' }, shown.map((p) => h('li', {},
        h('a', { href: `#/runs/${p.treatment_run}` }, `#${p.treatment_run}`), ' vs ',
        h('a', { href: `#/runs/${p.baseline_run}` }, `#${p.baseline_run}`),
        `: ${num(p.value)}${unitText} `, h('span', { class: 'muted' }, pairText(p.pair_key, pairBy))))),
      mine.length > shown.length ? h('p', { class: 'muted' },
        `the first ${shown.length} of ${mine.length} pairs; every one: headlab results ${experiment ?? ''} --json`) : null);
    } catch (e) {
      box.dataset.loaded = '';
      replace(list, h('p', { class: 'error' }, e.message));
    }
  });
  return box;
}

// ctx: {s}; results: resultsReader. refresh() draws the tables of the latest results.
export function comparisonsPanel(ctx, results) {
  const body = h('div', { id: 'results', class: 'scroll-x' }, loading('results'));
  const card = h('section', { class: 'card' }, h('h2', {}, 'Comparisons'), body);
  async function refresh() {
    results.forgetPairs();
    const r = await results.read();
    replace(body, resultsTables(r || {}, ctx.s.pairBy, results.pairs));
  }
  return { card, body, refresh };
}
