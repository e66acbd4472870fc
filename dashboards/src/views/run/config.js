// The run page's Summary and Config blocks: key/value tables of the run's summary metrics
// and of the config keys that matter (kind, seed, the run's own sections, non-defaults),
// with every key in a <details>.
import { h } from '../../dom.js';
import { metricValue, parseJson } from '../../format.js';
import { flatten } from '../../configdiff.js';

export function kvTable(obj, id) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return h('p', { class: 'muted' }, 'None yet.');
  return h('table', { class: 'kv', id }, h('tbody', {}, entries.sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', { class: 'num' }, metricValue(k, v))))));
}

// The run's config (parsed), its keys flattened, the notable ones (the coordinator's
// config_notable, else every key) and their sorted names.
export function notableConfig(run) {
  const cfg = parseJson(run.config, run.config) ?? {};
  const flat = flatten(cfg);
  const notable = run.config_notable || flat;
  return { cfg, flat, notable, keys: Object.keys(notable).sort() };
}

export function configView(run) {
  const { cfg, flat, notable, keys } = notableConfig(run);
  const row = ([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, typeof v === 'object' ? JSON.stringify(v) : String(v)));
  return h('div', {},
    h('p', { class: 'muted', id: 'config-note' }, `${keys.length} of ${Object.keys(flat).length} keys: the run's kind, seed, its own sections and values changed from the defaults`),
    h('table', { class: 'kv', id: 'config-table' }, h('tbody', {}, keys.map((k) => row([k, notable[k]])))),
    h('details', {}, h('summary', {}, `all ${Object.keys(flat).length} keys`),
      h('pre', { class: 'config' }, JSON.stringify(cfg, null, 2))));
}
