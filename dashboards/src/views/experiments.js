// Experiments list: progress counts per status, a progress bar and an ETA.
import { h, replace, poll } from '../dom.js';
import { get } from '../api.js';
import { kStatuses } from '../format.js';
import { loadTiming, etaText } from '../timing.js';
import { loading } from './common.js';

// Returns a stacked bar of status counts.
export function progressBar(counts, total) {
  const t = Math.max(1, total || 0);
  return h('div', { class: 'progress', title: kStatuses.map((s) => `${s} ${counts[s] || 0}`).join(', ') },
    kStatuses.filter((s) => counts[s]).map((s) =>
      h('div', { class: `seg st-${s}`, style: { width: `${(100 * counts[s]) / t}%` } })));
}

// Returns "3 queued · 1 running · ..." with each status coloured.
export function countsLine(counts) {
  return h('span', { class: 'counts' }, kStatuses.map((s) =>
    h('span', { class: `count st-text-${s}`, dataset: { status: s } }, `${counts[s] || 0} ${s}`)));
}

export function experimentsView(el, _params, signal) {
  const table = h('tbody', {});
  const err = h('p', { class: 'error' });
  table.append(h('tr', {}, h('td', { colspan: 8 }, loading('experiments'))));
  replace(el, h('h1', {}, 'Experiments'), err,
    h('div', { class: 'scroll-x' }, h('table', { class: 'grid-table', id: 'experiments' },
      h('thead', {}, h('tr', {}, ['id', 'name', 'created', 'progress', 'counts', 'total', 'ETA', 'tags']
        .map((c) => h('th', {}, c)))),
      table)));
  let timing = new Map();
  let lastTiming = 0;
  let anyActive = true;
  poll(async () => {
    let list;
    try {
      list = await get('/experiments', signal);
      err.textContent = '';
    } catch (e) {
      err.textContent = e.message;
      return;
    }
    anyActive = list.some((x) => (x.counts?.queued || 0) + (x.counts?.running || 0) > 0);
    // ETAs only move while something runs (a finished experiment's is "done").
    if (anyActive && Date.now() - lastTiming > 5000) {
      lastTiming = Date.now();
      try {
        timing = await loadTiming(null, signal);
      } catch (e) {
        console.warn('eta query:', e.message);
      }
    }
    list.sort((a, b) => b.id - a.id);
    replace(table, list.length === 0
      ? h('tr', {}, h('td', { colspan: 8, class: 'muted' }, 'No experiments yet: headlab submit GRID'))
      : list.map((x) => {
        const counts = x.counts || {};
        const t = timing.get(x.id);
        return h('tr', { dataset: { experiment: x.id } },
          h('td', {}, h('a', { href: `#/experiments/${x.id}` }, `#${x.id}`)),
          h('td', { class: 'name', title: x.name }, h('a', { href: `#/experiments/${x.id}` }, x.name)),
          h('td', { class: 'muted' }, (x.created_at || '').replace('T', ' ').replace(/\..*|Z$/, '')),
          h('td', { class: 'wide' }, progressBar(counts, x.total)),
          h('td', {}, countsLine(counts)),
          h('td', { class: 'num' }, x.total),
          h('td', { class: 'num' }, etaText(counts, t)),
          h('td', { class: 'exp-tags' }, (x.tags || []).map((tag) =>
            h('a', { class: 'tag', href: `#/search?tag=${encodeURIComponent(tag)}` }, tag))));
      }));
  }, () => (anyActive ? 2000 : 10000), signal);
}
