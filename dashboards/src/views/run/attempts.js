// The run page's Attempts block: one row per attempt (status, worker, devices, when it
// was assigned, how long it ran, exit code, the checkpoint it resumed from) with its
// error and stderr tail behind a <details>.
import { h } from '../../dom.js';
import { shortHash, parseJson, duration } from '../../format.js';
import { statusBadge } from '../common.js';

// "cpu" for an attempt on a CPU slot, else its device indices on the worker.
export function deviceList(indices) {
  return Array.isArray(indices) && indices.length ? `cuda ${indices.join(',')}` : 'cpu';
}

// Seconds from ISO time `a` to `b` (to now while `b` is absent); null if either is unreadable.
export function secondsBetween(a, b) {
  const t0 = Date.parse(a);
  const t1 = b ? Date.parse(b) : Date.now();
  return Number.isFinite(t0) && Number.isFinite(t1) ? (t1 - t0) / 1000 : null;
}

// The attempts of GET /runs/ID (a list, or a count from an older answer): {list, count}.
export function runAttempts(run) {
  const list = Array.isArray(run.attempts) ? run.attempts : [];
  return { list, count: list.length || Number(run.attempts) || 0 };
}

export function attemptsTable(list) {
  if (!list.length) return h('p', { class: 'muted' }, 'Not started yet.');
  return h('table', { class: 'grid-table' },
    h('thead', {}, h('tr', {}, ['attempt', 'status', 'worker', 'devices', 'assigned', 'ran for',
      'exit', 'resumed from', 'error'].map((c) => h('th', {}, c)))),
    h('tbody', {}, list.map((a) => {
      const resume = parseJson(a.resume_json, a.resume);
      return h('tr', {},
        h('td', { class: 'num' }, a.attempt), h('td', {}, statusBadge(a.status)),
        h('td', { title: a.worker_id || a.worker || '' }, a.worker_name || a.worker_id || a.worker || '—'),
        h('td', {}, deviceList(parseJson(a.devices_json, a.devices) ?? [])),
        h('td', { class: 'muted' }, (a.assigned_at || '').replace('T', ' ').replace(/\..*|Z$/, '')),
        h('td', { class: 'num' }, duration(secondsBetween(a.accepted_at || a.assigned_at, a.finished_at))),
        h('td', { class: 'num' }, a.exit_code ?? '—'),
        h('td', {}, resume ? `step ${resume.step} (${shortHash(resume.sha256)})` : '—'),
        h('td', {}, a.error || a.stderr_tail ? h('details', {}, h('summary', {}, a.error || 'stderr'),
          h('pre', {}, a.stderr_tail || '')) : ''));
    })));
}
