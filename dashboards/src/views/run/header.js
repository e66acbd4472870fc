// The run page's head: the title, a status line (experiment, attempt, worker, config hash,
// the run it reuses), why it failed, its performance, cancel and retry, tags, note and the
// diff form. show(run, attempts) fills it from GET /runs/ID.
import { h, replace } from '../../dom.js';
import { num, bytes, shortHash, parseJson, unmeasured } from '../../format.js';
import { statusBadge, actionButton, tagEditor, noteEditor, lastLines } from '../common.js';
import { diffForm } from '../diff.js';

// What the run page shows as performance, when the run reports it (the lead's throughput
// metrics, common/metric_names.h): [key, label, format].
const kPerformance = [
  ['train.tokens_per_s', 'tokens/s', (v) => num(v)],
  ['train.mfu', 'MFU', (v) => `${num(100 * v)} %`],
  ['train.step_s', 'step time', (v) => `${num(1000 * v)} ms`],
  ['mem.peak_bytes', 'peak memory (process)', bytes],
  ['mem.gpu_peak_bytes', 'peak memory (GPU)', bytes],
];

// True while the run can still change (and be cancelled).
export function runActive(run) {
  return Boolean(run) && (run.status === 'running' || run.status === 'queued');
}

// Throughput, MFU, step time, peak memory and precision, where the run reports them:
// [{key, label, text}].
export function perfItems(run) {
  const sum = run.summary || {};
  const cfg = parseJson(run.config, run.config) || {};
  const items = kPerformance.filter(([k]) => sum[k] !== undefined && sum[k] !== null && !unmeasured(k, sum[k]))
    .map(([key, label, f]) => ({ key, label, text: f(sum[key]) }));
  // The precision the run computed in (provenance), else what its config asked for.
  let prov = run.provenance;
  if (Array.isArray(prov)) prov = prov[prov.length - 1];
  const modelKind = cfg.kind !== 'command' && cfg.kind !== 'noop';  // runs that build the LM
  const precision = (prov && prov.precision) || (modelKind && cfg.train && cfg.train.precision);
  if (precision) items.push({ key: 'precision', label: 'precision', text: precision });
  return items;
}

export function runHeader(id, onAction) {
  const title = h('h1', {}, `Run #${id}`);
  const sub = h('div', { class: 'row' });
  const cause = h('div', { class: 'cause', id: 'run-cause' });
  const perf = h('div', { class: 'row perf', id: 'run-perf' });
  const msg = h('span', { class: 'msg', id: 'run-msg' });
  const tagsEl = h('span', { id: 'run-tags' });
  const noteEl = h('div', { id: 'run-note' });
  const cancelButton = actionButton('cancel', `/runs/${id}/cancel`, msg, onAction);
  const retryButton = actionButton('retry', `/runs/${id}/retry`, msg, onAction);
  const card = h('section', { class: 'card' }, sub, cause, perf,
    h('div', { class: 'row' }, cancelButton, retryButton, h('span', { class: 'muted' }, 'tags'), tagsEl, msg),
    noteEl, h('div', { class: 'row' }, diffForm(String(id), '')));

  function show(run, attempts) {
    title.textContent = `Run #${id} · ${run.arm || ''}`;
    replace(sub, statusBadge(run.status),
      run.experiment_id !== undefined
        ? h('a', { href: `#/experiments/${run.experiment_id}` }, `experiment #${run.experiment_id}`) : null,
      h('span', {}, `attempt ${attempts.count}${run.max_attempts ? ` of ${run.max_attempts}` : ''}`),
      run.worker ? h('span', { title: `worker id ${run.worker}` }, `worker ${run.worker_name || run.worker}`) : null,
      h('code', { title: run.config_hash || '' }, `config ${shortHash(run.config_hash)}`),
      run.reused_from ? h('span', {}, 'reuses result of ',
        h('a', { href: `#/runs/${run.reused_from}` }, `#${run.reused_from}`)) : null);
    // Offer only what the coordinator would accept in this state (it checks again: 409).
    const active = runActive(run);
    cancelButton.title = active ? 'cancel this run' : `nothing to cancel: ${run.status}`;
    cancelButton.classList.toggle('inapplicable', !active);
    const retryable = ['failed', 'cancelled', 'lost'].includes(run.status);
    retryButton.title = retryable ? 'requeue as a new attempt' : `retry applies to failed, cancelled or lost runs`;
    retryButton.classList.toggle('inapplicable', !retryable);
    replace(cause, causeLine(run, attempts.list));
    const items = perfItems(run).map((p) => h('span', { class: 'perf-item', dataset: { key: p.key } },
      h('span', { class: 'muted' }, `${p.label} `), p.text));
    replace(perf, items.length ? items : null);
    if (!tagsEl.firstChild) {  // editors are built once (a poll must not eat what is typed)
      replace(tagsEl, tagEditor(`/runs/${id}`, run.tags || [], msg));
      replace(noteEl, noteEditor(`/runs/${id}`, run.note || '', msg));
    }
  }
  return { title, card, show };
}

// Why the run failed: the error and the last lines of the latest attempt's stderr.
function causeLine(run, attemptList) {
  if (!run.error) return null;
  const last = [...attemptList].reverse().find((a) => lastLines(a.stderr_tail).length);
  // A cancelled run's error is its reason (a user's cancel, or an early stop's rule).
  return h('div', { class: run.status === 'cancelled' ? 'muted' : 'error' },
    h('strong', {}, run.status === 'cancelled' ? 'stopped: ' : 'failed: '), run.error,
    last ? h('pre', { class: 'stderr-cause' }, lastLines(last.stderr_tail).join('\n')) : null,
    last ? h('span', { class: 'muted' }, `attempt ${last.attempt}'s stderr; the whole tail is in Attempts below`) : null);
}
