// The run page's Provenance block: what the latest attempt ran (commit, binary, host,
// devices, library versions, dataset) with links to the parent run or checkpoint, and to
// the runs that continue from this one or reuse its result.
import { h, replace } from '../../dom.js';
import { query, sqlString } from '../../api.js';
import { shortHash, parseJson } from '../../format.js';
import { loading } from '../common.js';

// Provenance columns in display order (schema/001_init.sql, table provenance).
const kProvenance = [
  ['git_commit', 'commit'], ['git_dirty', 'dirty'], ['git_diff_sha256', 'diff sha256'],
  ['binary_sha256', 'binary sha256'], ['host', 'host'], ['devices', 'devices'],
  ['driver_version', 'driver'], ['cuda_version', 'CUDA'], ['libtorch_version', 'LibTorch'],
  ['dataset_path', 'dataset'], ['dataset_sha256', 'dataset sha256'],
  ['parent_run', 'parent run'], ['parent_checkpoint_sha256', 'parent checkpoint'],
];

// The provenance of the latest attempt: GET /runs/ID gives one object or one per attempt.
export function latestProvenance(p) {
  return Array.isArray(p) ? p.reduce((a, b) => ((b.attempt || 0) >= (a?.attempt || 0) ? b : a), null) : p;
}

// The attempt's provenance fields that have no column of their own (command_sha256, ...):
// [[key, text]].
export function extraFields(p) {
  const extra = (p.fields_json ? parseJson(p.fields_json, {}) : p.fields || p) || {};
  const named = new Set(kProvenance.map(([k]) => k));
  return Object.entries(extra).filter(([k]) => !named.has(k))
    .map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]);
}

export function provenancePanel(id, signal) {
  const body = h('div', { id: 'provenance' }, loading('provenance'));
  const card = h('section', { class: 'card' }, h('h2', {}, 'Provenance'), body);

  async function refresh(run) {
    const p = latestProvenance(run.provenance);
    // Children: runs naming this one as parent, or resumed/initialised from one of its
    // checkpoints (matched by SHA-256). The parent checkpoint resolves to its run the same way.
    const parentSha = p && p.parent_checkpoint_sha256;
    const [children, reusers, parentCkpt] = await Promise.all([
      query(`SELECT DISTINCT run_id AS id FROM provenance WHERE parent_run = ${id} AND run_id != ${id}
UNION SELECT DISTINCT p.run_id FROM provenance p JOIN artifacts a ON a.sha256 = p.parent_checkpoint_sha256
WHERE a.run_id = ${id} AND p.run_id != ${id} ORDER BY 1`, signal),
      query(`SELECT id FROM runs WHERE reused_from = ${id} ORDER BY id`, signal),
      parentSha ? query(`SELECT run_id, attempt, step FROM artifacts WHERE sha256 = ${sqlString(parentSha)}
ORDER BY run_id LIMIT 1`, signal) : Promise.resolve([]),
    ]);
    const rows = p ? [...kProvenance.map(([k, label]) => [label, cell(k, p[k], parentCkpt)]), ...extraFields(p)] : [];
    if (children.length) {
      rows.push(['child runs', h('span', {}, children.map((c) =>
        h('a', { href: `#/runs/${c.id}`, class: 'child-link' }, `#${c.id} `)))]);
    }
    if (reusers.length) {
      rows.push(['reused by', h('span', {}, reusers.map((c) =>
        h('a', { href: `#/runs/${c.id}` }, `#${c.id} `)))]);
    }
    replace(body, rows.length ? h('table', { class: 'kv' }, h('tbody', {},
      rows.map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v)))))
      : h('p', { class: 'muted' }, 'No provenance recorded yet (it arrives when an attempt starts).'));
  }
  return { card, refresh };
}

// The value of provenance column `k`: links for the parent run and checkpoint, hashes
// shortened (whole in the title), "—" when absent.
function cell(k, v, parentCkpt) {
  if (k === 'parent_run' && v !== null && v !== undefined) {
    return h('a', { href: `#/runs/${v}`, class: 'parent-link' }, `#${v}`);
  }
  if (k === 'parent_checkpoint_sha256' && v && parentCkpt.length) {
    const c = parentCkpt[0];
    return h('span', {}, h('code', { title: v }, shortHash(v)), ' = checkpoint of ',
      h('a', { href: `#/runs/${c.run_id}`, class: 'parent-link' }, `#${c.run_id}`),
      ` (attempt ${c.attempt}, step ${c.step})`);
  }
  if (k === 'git_dirty') {
    return v === null || v === undefined ? '—'
      : h('span', { class: Number(v) ? 'warn' : '' }, Number(v) ? 'yes (uncommitted changes)' : 'no');
  }
  if (k.endsWith('sha256') || k === 'git_commit') {
    return v ? h('code', { title: v, class: k === 'git_commit' ? 'commit' : '' },
      k === 'git_commit' ? v : shortHash(v)) : '—';
  }
  if (v === null || v === undefined || v === '') return '—';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}
