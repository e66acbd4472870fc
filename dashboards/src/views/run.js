// One run: status with cancel/retry, live curves of every metric, the layer x head grid,
// provenance with links to parent and child runs, attempts, summary, artifacts, config.
// Each block is a component of views/run/; this module lays them out and polls the run.
import { h, replace, poll } from '../dom.js';
import { get, sqlInt } from '../api.js';
import { loading } from './common.js';
import { runHeader, runActive } from './run/header.js';
import { runCurves } from './run/curves.js';
import { headPanel } from './run/head_panel.js';
import { provenancePanel } from './run/provenance.js';
import { attemptsTable, runAttempts } from './run/attempts.js';
import { artifactsTable } from './run/artifacts.js';
import { kvTable, configView } from './run/config.js';

export function runView(el, [idText], signal) {
  const id = sqlInt(idText);
  const err = h('p', { class: 'error' });
  let run = null;
  const active = () => runActive(run);
  const guard = (fn) => async () => {
    try {
      await fn();
      err.textContent = '';
    } catch (e) {
      if (e.name !== 'AbortError') err.textContent = e.message;
    }
  };

  const header = runHeader(id, () => refresh());
  const curves = runCurves(id, signal, active, guard);
  const heads = headPanel(id, signal, () => run);
  const prov = provenancePanel(id, signal);
  const attempts = h('div', { id: 'attempts' }, loading());
  const summary = h('div', { id: 'summary' }, loading());
  const artifacts = h('div', { id: 'artifacts' }, loading());
  const config = h('div', { id: 'config' }, loading());
  replace(el, header.title, err, header.card, curves.card,
    h('div', { class: 'two' }, heads.card, prov.card),
    h('section', { class: 'card' }, h('h2', {}, 'Attempts'), attempts),
    h('div', { class: 'two' },
      h('section', { class: 'card' }, h('h2', {}, 'Summary'), summary),
      h('section', { class: 'card' }, h('h2', {}, 'Artifacts'), artifacts)),
    h('section', { class: 'card' }, h('h2', {}, 'Config'), config));

  async function refresh() {
    run = await get(`/runs/${id}`, signal);
    const tries = runAttempts(run);
    curves.show(tries.count);
    header.show(run, tries);
    replace(attempts, attemptsTable(tries.list));
    replace(summary, kvTable(run.summary || {}, 'summary-table'));
    replace(artifacts, artifactsTable(id, run.artifacts || []));
    replace(config, configView(run));
    await prov.refresh(run);
  }

  poll(guard(async () => {
    await refresh();
    curves.follow();
    if (!heads.loaded()) await heads.refresh();
  }), () => (active() ? 2000 : 15000), signal);
}
