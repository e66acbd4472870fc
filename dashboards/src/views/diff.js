// Two runs side by side: the config keys they differ in, then their summary metrics
// (#/diff/A/B; the same reading as `headlab diff A B`). Runs of different experiments
// compare as well as runs of one.
import { h, replace } from '../dom.js';
import { get, sqlInt } from '../api.js';
import { metricValue, parseJson } from '../format.js';
import { diffObjects } from '../configdiff.js';
import { statusBadge, loading } from './common.js';

// A config value in a diff cell; "—" where the run has no such key.
function configText(v) {
  if (v === undefined) return '—';
  return typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
}

// The form that opens #/diff/A/B (also used on the run page, with A filled in).
export function diffForm(a = '', b = '') {
  const inA = h('input', { type: 'number', min: 1, id: 'diff-a', placeholder: 'run', value: a, style: { width: '8ch' } });
  const inB = h('input', { type: 'number', min: 1, id: 'diff-b', placeholder: 'run', value: b, style: { width: '8ch' } });
  const go = () => {
    if (/^\d+$/.test(inA.value) && /^\d+$/.test(inB.value)) location.hash = `#/diff/${inA.value}/${inB.value}`;
  };
  for (const input of [inA, inB]) input.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  return h('span', { class: 'diff-form' }, 'diff run ', inA, ' with run ', inB,
    h('button', { onclick: go, id: 'diff-go' }, 'diff'));
}

// A link to the diff of two ticked runs: null unless exactly two are ticked.
export function tickedDiffLink(ids) {
  if (ids.length !== 2) return null;
  const [a, b] = [...ids].sort((x, y) => x - y);
  return h('a', { href: `#/diff/${a}/${b}`, class: 'diff-link' }, `diff #${a} and #${b}`);
}

function diffTable(id, diffs, runs, format, same) {
  if (!diffs.length) return h('p', { class: 'muted', id: `${id}-same` }, same);
  return h('div', { class: 'scroll-x' }, h('table', { class: 'grid-table', id },
    h('thead', {}, h('tr', {}, h('th', {}, 'key'), runs.map((r) => h('th', {}, `run #${r.id}`)))),
    h('tbody', {}, diffs.map((d) => h('tr', { dataset: { key: d.key } }, h('th', {}, d.key),
      h('td', { class: 'num' }, format(d.key, d.a)), h('td', { class: 'num' }, format(d.key, d.b)))))));
}

export function diffView(el, [aText, bText], signal) {
  const err = h('p', { class: 'error' });
  const body = h('div', { id: 'diff' });
  replace(el, h('h1', {}, 'Diff'), h('section', { class: 'card' }, diffForm(aText || '', bText || '')), err, body);
  if (!aText || !bText) {
    replace(body, h('p', { class: 'muted' }, 'Two run ids: the config keys and summary metrics they differ in.'));
    return;
  }
  replace(body, loading('runs'));
  Promise.all([get(`/runs/${sqlInt(aText)}`, signal), get(`/runs/${sqlInt(bText)}`, signal)]).then((runs) => {
    const configs = runs.map((r) => parseJson(r.config, r.config) || {});
    const config = diffObjects(configs[0], configs[1]);
    const summary = diffObjects(runs[0].summary || {}, runs[1].summary || {});
    const metric = (k, v) => (v === undefined ? '—' : metricValue(k, v));
    replace(body,
      h('section', { class: 'card' }, h('table', { class: 'kv', id: 'diff-runs' }, h('tbody', {},
        runs.map((r) => h('tr', {}, h('th', {}, h('a', { href: `#/runs/${r.id}` }, `run #${r.id}`)),
          h('td', {}, h('a', { href: `#/experiments/${r.experiment_id}` },
            `#${r.experiment_id} ${r.experiment_name || ''}`), ` · arm ${r.arm || '—'} · `,
          statusBadge(r.status))))))),
      h('section', { class: 'card' }, h('h2', {}, `Config: ${config.length} key${config.length === 1 ? '' : 's'} differ`),
        diffTable('diff-config', config, runs, (_, v) => configText(v), 'The two configs are identical.')),
      h('section', { class: 'card' }, h('h2', {}, `Summary metrics: ${summary.length} differ`),
        diffTable('diff-summary', summary, runs, metric, 'Identical (or none reported).')));
  }).catch((e) => {
    if (e.name === 'AbortError') return;
    replace(body);
    err.textContent = e.message;
  });
}
