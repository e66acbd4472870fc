// Pieces shared by several views.
import { h, replace } from '../dom.js';
import { post } from '../api.js';
import { parseJson } from '../format.js';

export function statusBadge(status) {
  return h('span', { class: `badge st-${status}` }, status || '?');
}

// A button that POSTs `path` with the write token and reports the outcome in `msg`
// (e.g. "refused: write token required" when the coordinator answers 401). With
// `confirmText` (a string, or a function returning one) nothing is sent unless the user
// confirms that question.
export function actionButton(label, path, msg, onDone = () => {}, confirmText = null) {
  const b = h('button', { class: 'action', dataset: { action: label } }, label);
  b.addEventListener('click', async () => {
    const question = typeof confirmText === 'function' ? confirmText() : confirmText;
    if (question && !window.confirm(question)) {
      msg.className = 'msg';
      msg.textContent = `${label}: not sent`;
      return;
    }
    b.disabled = true;
    msg.className = 'msg';
    msg.textContent = `${label}…`;
    try {
      const r = await post(path);
      msg.textContent = `${label}: ok${r && typeof r === 'object' ? ` ${summarize(r)}` : ''}`;
      onDone(r);
    } catch (e) {
      msg.className = 'msg error';
      msg.textContent = e.message;
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

function summarize(obj) {
  const parts = Object.entries(obj).filter(([, v]) => typeof v !== 'object')
    .map(([k, v]) => `${k}=${v}`);
  return parts.length ? `(${parts.join(', ')})` : '';
}

// Metric keys shown first in tables, when the runs have them.
export const kKeyMetrics = ['eval.ppl', 'eval.loss', 'train.loss', 'train.tokens_per_s',
  'time.elapsed_s'];

// Returns up to `max` summary keys present in `runs`, preferred keys first.
export function keyMetrics(runs, max = 4) {
  const present = new Set();
  for (const r of runs) for (const k of Object.keys(r.summary || {})) present.add(k);
  return preferredKeys(present, max);
}

// Returns up to `max` of `keys` (an iterable), the preferred ones (kKeyMetrics) first.
export function preferredKeys(keys, max = 4) {
  const present = new Set(keys);
  const ordered = kKeyMetrics.filter((k) => present.has(k));
  for (const k of [...present].sort()) if (!ordered.includes(k)) ordered.push(k);
  return ordered.slice(0, max);
}

// Returns "cpu", "cuda:0" or "cuda:0,1" for an attempt's device indices on its worker.
export function deviceLabel(indices, worker) {
  if (!Array.isArray(indices) || !indices.length) return 'cpu';
  const devices = (worker && Array.isArray(worker.devices)) ? worker.devices : [];
  const kinds = indices.map((i) => devices.find((d) => d.index === i)?.kind);
  if (kinds.every((k) => k === 'cpu')) return 'cpu';
  return `cuda:${indices.join(',')}`;
}

// Returns "seed=1" for a pair key: the canonical JSON array of the grid's pair_by values.
export function pairText(pairKey, pairBy = []) {
  const p = parseJson(pairKey, null);
  if (Array.isArray(p)) {
    return p.map((v, i) => `${pairBy[i] ?? i}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' ');
  }
  if (p && typeof p === 'object') {
    return Object.entries(p).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' ');
  }
  return pairKey || '—';
}

// Orders result metric keys for the arms table: preferred keys first, then the rest, with
// ACR keys moved beside the measured FLOPs ratios (AAH §5.10: ACR is a routing diagnostic
// reported beside, never instead of, measured FLOPs). When ACR is there but no FLOPs key
// is, a "flops" column says "unmeasured" rather than leaving the comparison implicit.
// Returns [{key, unmeasured?}].
export function resultColumns(keys) {
  const sorted = [...new Set(keys)].sort();
  const ordered = [...kKeyMetrics.filter((k) => sorted.includes(k)),
    ...sorted.filter((k) => !kKeyMetrics.includes(k))];
  const isAcr = (k) => /(^|[._])acr([._]|$)/i.test(k);
  const acr = ordered.filter(isAcr);
  const rest = ordered.filter((k) => !isAcr(k));
  const flops = rest.filter((k) => /flops/i.test(k));
  if (!acr.length) return ordered.map((key) => ({ key }));
  if (!flops.length) {
    return [...rest.map((key) => ({ key })), { key: 'flops ratio', unmeasured: true },
      ...acr.map((key) => ({ key }))];
  }
  const at = rest.indexOf(flops[flops.length - 1]) + 1;
  return [...rest.slice(0, at), ...acr, ...rest.slice(at)].map((key) => ({ key }));
}

// A placeholder shown until a panel's first data arrive (replaced by the panel's content).
export function loading(what = '') {
  return h('p', { class: 'muted loading' }, `loading${what ? ` ${what}` : ''}…`);
}

// Tags of a run or experiment as chips with × (remove) and a box to add one; each change
// POSTs {add|remove} to `${apiPath}/tags` with the write token and calls onChange(tags).
// `msg` reports a refusal ("refused: write token required").
export function tagEditor(apiPath, tags, msg, onChange = () => {}) {
  const box = h('span', { class: 'tags', dataset: { tags: (tags || []).join(' ') } });
  const input = h('input', { type: 'text', placeholder: 'add tag', size: 10, class: 'tag-input' });
  const send = async (body) => {
    try {
      const r = await post(`${apiPath}/tags`, body);
      msg.className = 'msg';
      msg.textContent = '';
      render(r.tags || []);
      onChange(r.tags || []);
    } catch (e) {
      msg.className = 'msg error';
      msg.textContent = e.message;
    }
  };
  function render(list) {
    box.dataset.tags = list.join(' ');
    replace(box, list.map((t) => h('span', { class: 'tag', dataset: { tag: t } }, t,
      h('button', { class: 'tag-x', title: `remove tag ${t}`, onclick: () => send({ remove: [t] }) }, '×'))),
    input, h('button', { class: 'tag-add', onclick: () => {
      const t = input.value.trim();
      if (t) send({ add: [t] }).then(() => { input.value = ''; });
    } }, 'tag'));
  }
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && input.value.trim()) send({ add: [input.value.trim()] }).then(() => { input.value = ''; });
  });
  render(tags || []);
  return box;
}

// A note on a run or experiment: the text, and an edit box that POSTs {text} to
// `${apiPath}/note` ("" removes it).
export function noteEditor(apiPath, note, msg) {
  const text = h('p', { class: 'note-text' });
  const area = h('textarea', { rows: 3, cols: 60, class: 'note-input', placeholder: 'a note on this (Markdown is not rendered)' });
  const show = (t) => {
    text.textContent = t || '';
    text.classList.toggle('muted', !t);
    if (!t) text.textContent = 'no note';
    area.value = t || '';
  };
  show(note);
  const save = h('button', { class: 'note-save', onclick: async () => {
    try {
      const r = await post(`${apiPath}/note`, { text: area.value });
      msg.className = 'msg';
      msg.textContent = 'note saved';
      show(r.note);
    } catch (e) {
      msg.className = 'msg error';
      msg.textContent = e.message;
    }
  } }, 'save note');
  return h('div', { class: 'note' }, text, h('details', {}, h('summary', {}, 'edit note'), area, save));
}

// The last `n` non-empty lines of a stderr tail: why an attempt failed.
export function lastLines(text, n = 3) {
  return String(text || '').split('\n').map((l) => l.trimEnd()).filter((l) => l).slice(-n);
}
