// The run page's Heads block: the layer x head grid of the latest attempt's head map,
// coloured by role, score or window (heads.js draws it).
import { h, replace } from '../../dom.js';
import { query } from '../../api.js';
import { parseJson } from '../../format.js';
import { loading } from '../common.js';
import { headGrid } from '../heads.js';

// The rows of the latest attempt among head-map rows of every attempt.
export function latestAttemptRows(rows) {
  const last = rows.reduce((m, r) => Math.max(m, r.attempt), 0);
  return rows.filter((r) => r.attempt === last);
}

// The grid's size: the model's layers and heads from the config, grown to fit the rows.
export function gridShape(cfg, rows) {
  return {
    layers: Math.max(cfg.model?.layers || 0, ...rows.map((r) => r.layer + 1)),
    heads: Math.max(cfg.model?.heads || 0, ...rows.map((r) => r.head + 1)),
  };
}

// currentRun() -> the run as last read (its config sizes the grid).
export function headPanel(id, signal, currentRun) {
  const modeSelect = h('select', { id: 'head-mode' },
    ['role', 'score', 'window'].map((m) => h('option', { value: m }, m)));
  const grid = h('div', { id: 'head-grid' }, loading('head map'));
  const card = h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', {}, 'Heads'),
    h('label', {}, 'colour by ', modeSelect)), grid);
  let heads = [];

  function draw() {
    const run = currentRun();
    const cfg = run ? parseJson(run.config, run.config) || {} : {};
    const shape = gridShape(cfg, heads);
    if (!heads.length) {
      replace(grid, h('p', { class: 'muted' },
        'No head map recorded for this run (calibrate, AoH and AAH runs record one).'));
      return;
    }
    headGrid(grid, heads, shape.layers, shape.heads, modeSelect.value);
  }
  modeSelect.addEventListener('change', draw);

  async function refresh() {
    const rows = await query(`SELECT attempt, layer, head, role, score, window FROM head_maps
WHERE run_id = ${id} ORDER BY attempt, layer, head`, signal);
    heads = latestAttemptRows(rows);
    draw();
  }
  return { card, refresh, loaded: () => heads.length > 0 };
}
