// The experiment page's state, shared by its components (views/experiment/*.js), and the
// rule for when a panel is read again.
import { parseJson } from '../../format.js';

export function experimentState() {
  return {
    exp: null, arms: [], workers: new Map(), timing: null,
    varying: [],  // the config keys the grid varies (experiment.varying): the table's columns
    pairBy: ['seed'],  // the grid's pair_by: names of the values in each pair_key
    gridArms: {},
    info: new Map(),  // run id -> {id, arm, status, attempts, reused_from, params}
    selected: new Set(), userSelected: false, key: null, streams: new Map(),
    fresh: new Set(),  // overlaid runs whose status was read by firstSelection just now
    summaryKeys: null, by: 'auto', countsSig: '', active: true, done: {},
  };
}

// Takes GET /experiments/ID into the state: the grid's pairing keys and arms, the keys it
// varies, whether anything is left to run and the signature of its counts. Returns the
// grid (parsed).
export function takeExperiment(s, exp) {
  s.exp = exp;
  const grid = parseJson(exp.grid, {}) || {};
  if (Array.isArray(grid.pair_by)) s.pairBy = grid.pair_by;
  s.gridArms = grid.arms || {};
  s.arms = [...new Set([...s.arms, ...Object.keys(s.gridArms),
    ...(Array.isArray(exp.arms) ? exp.arms : [])])].sort();
  if (Array.isArray(exp.varying)) s.varying = exp.varying;
  const c = exp.counts || {};
  s.active = (c.queued || 0) + (c.running || 0) > 0;
  s.countsSig = JSON.stringify([c, exp.total]);
  return grid;
}

// A panel is read again only while the experiment is active or when its counts changed
// since that panel's last read (a finished experiment's idle tab asks for nothing else).
// Returns whether to read it, and if so records the read.
export function stale(s, panel, extra = '') {
  const sig = s.countsSig + extra;
  if (!s.active && s.done[panel] === sig) return false;
  s.done[panel] = sig;
  return true;
}
