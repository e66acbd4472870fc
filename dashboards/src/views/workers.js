// The worker fleet: devices, heartbeat age, state and the attempts each one runs.
import { h, replace, poll } from '../dom.js';
import { get } from '../api.js';
import { num } from '../format.js';

// Returns "cpu" or "0: NVIDIA H200 (139 GiB, cc 9.0)" for one device entry.
export function deviceText(d) {
  if (typeof d !== 'object' || d === null) return String(d);
  const mem = d.memory_bytes;
  const parts = [d.name || d.kind || 'device'];
  if (mem) parts.push(`${num(Number(mem) / 2 ** 30)} GiB`);
  if (d.cc_major) parts.push(`cc ${d.cc_major}.${d.cc_minor || 0}`);
  const idx = d.index ?? d.id;
  return `${idx !== undefined ? `${idx}: ` : ''}${parts[0]}${parts.length > 1 ? ` (${parts.slice(1).join(', ')})` : ''}`;
}

// Returns a link for one running reference: {run, attempt} or a run id.
function runRef(ref) {
  const run = typeof ref === 'object' && ref !== null ? ref.run ?? ref.run_id : ref;
  const attempt = typeof ref === 'object' && ref !== null ? ref.attempt : undefined;
  return h('a', { href: `#/runs/${run}`, class: 'run-ref' },
    `#${run}${attempt !== undefined ? `/${attempt}` : ''} `);
}

export function workersView(el, _params, signal) {
  const body = h('tbody', {});
  const err = h('p', { class: 'error' });
  replace(el, h('h1', {}, 'Workers'), err, h('table', { class: 'grid-table', id: 'workers' },
    h('thead', {}, h('tr', {}, ['worker', 'host', 'state', 'devices', 'heartbeat age', 'running']
      .map((c) => h('th', {}, c)))), body));
  poll(async () => {
    let list;
    try {
      list = await get('/workers', signal);
      err.textContent = '';
    } catch (e) {
      err.textContent = e.message;
      return;
    }
    replace(body, !list.length
      ? h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No workers: start one with headlab worker'))
      : list.map((w) => {
        const age = w.last_heartbeat_age_s === null || w.last_heartbeat_age_s === undefined
          ? NaN : Number(w.last_heartbeat_age_s);
        const devices = Array.isArray(w.devices) ? w.devices : [];
        return h('tr', { dataset: { worker: w.id } },
          h('td', { title: w.id }, w.name || w.id),
          h('td', {}, w.host || '—'),
          h('td', {}, h('span', { class: `badge wk-${w.state}` }, w.state)),
          h('td', {}, devices.length ? devices.map((d) => h('div', {}, deviceText(d))) : 'cpu'),
          h('td', { class: `num ${age > 15 ? 'warn' : ''}` }, Number.isFinite(age) ? `${age.toFixed(1)} s` : '—'),
          h('td', {}, (w.running || []).length ? (w.running || []).map(runRef) : h('span', { class: 'muted' }, 'idle')));
      }));
  }, 2000, signal);
}
