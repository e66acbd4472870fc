// Head maps (table head_maps: run, attempt, layer, head, role, score, window): the
// layer x head grid of one run, and the selected-window distribution per arm (AAH Fig. 4:
// each row a regime, each cell the fraction of final assignments in that window bucket).
import { h, replace } from '../dom.js';
import { num } from '../format.js';

const kRoleColors = {
  ordinary: '#9e9e9e', retrieval: '#1f77b4', streaming: '#ff7f0e', local: '#2ca02c',
  fixed: '#9467bd', pruned: '#222222',
};
const kExtraRoleColors = ['#d62728', '#8c564b', '#e377c2', '#17becf', '#bcbd22'];

// Viridis colour stops, interpolated linearly: perceptually ordered for scores.
const kViridis = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

// Returns the viridis colour of t in [0, 1].
export function viridis(t) {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (kViridis.length - 1);
  const i = Math.min(kViridis.length - 2, Math.floor(x));
  const f = x - i;
  const c = kViridis[i].map((v, k) => Math.round(v + f * (kViridis[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function roleColor(role, roles) {
  return kRoleColors[role] || kExtraRoleColors[Math.max(0, roles.indexOf(role)) % kExtraRoleColors.length];
}

// Renders the L x H grid into `el`. rows: [{layer, head, role, score, window}]; layers and
// heads: the model's shape (cells without a row are drawn empty). mode: role | score | window.
export function headGrid(el, rows, layers, heads, mode) {
  const at = new Map(rows.map((r) => [`${r.layer}:${r.head}`, r]));
  const roles = [...new Set(rows.map((r) => r.role))].sort();
  const values = rows.map((r) => (mode === 'window' ? r.window : r.score))
    .filter((v) => v !== null && v !== undefined && Number.isFinite(Number(v))).map(Number);
  // Windows span orders of magnitude (64 .. 4096): colour them on a log2 scale.
  const tf = mode === 'window' ? (v) => Math.log2(Math.max(1, v)) : (v) => v;
  const lo = values.length ? Math.min(...values.map(tf)) : 0;
  const hi = values.length ? Math.max(...values.map(tf)) : 1;
  const scale = (v) => (hi > lo ? (tf(v) - lo) / (hi - lo) : 0.5);
  const color = (r) => {
    if (!r) return 'transparent';
    if (mode === 'role') return roleColor(r.role, roles);
    const v = mode === 'window' ? r.window : r.score;
    return v === null || v === undefined ? '#eee' : viridis(scale(Number(v)));
  };
  // Dark text on the bright (yellow-green) end of the ramp, white elsewhere.
  const ink = (r) => {
    const v = r && (mode === 'window' ? r.window : r.score);
    return mode !== 'role' && v !== null && v !== undefined && scale(Number(v)) > 0.6 ? 'dark' : '';
  };
  const label = (r) => {
    if (!r) return '';
    if (mode === 'role') return (r.role || '?').slice(0, 1).toUpperCase();
    if (mode === 'window') return r.window === null || r.window === undefined ? '' : shortWindow(r.window);
    return r.score === null || r.score === undefined ? '' : num(r.score);
  };
  const cells = [h('div', { class: 'hg-corner' }, 'L \\ H')];
  for (let j = 0; j < heads; j++) cells.push(h('div', { class: 'hg-label' }, j));
  for (let i = 0; i < layers; i++) {
    cells.push(h('div', { class: 'hg-label' }, i));
    for (let j = 0; j < heads; j++) {
      const r = at.get(`${i}:${j}`);
      cells.push(h('div', {
        class: `hg-cell ${r ? '' : 'empty'} ${ink(r)}`,
        style: { background: color(r) },
        dataset: { layer: i, head: j, role: r ? r.role : '' },
        title: r ? `layer ${i} head ${j}\nrole ${r.role}\nscore ${num(r.score)}\nwindow ${r.window ?? '—'}`
          : `layer ${i} head ${j}: no map`,
      }, label(r)));
    }
  }
  const legend = mode === 'role'
    ? roles.map((role) => h('span', { class: 'legend-item' },
      h('span', { class: 'swatch', style: { background: roleColor(role, roles) } }), role))
    : values.length ? [h('span', { class: 'muted' }, mode === 'window' ? 'window ' : 'score '),
      num(mode === 'window' ? 2 ** lo : lo), ' ',
      h('span', { class: 'ramp', style: { background: `linear-gradient(to right, ${kViridis.map((c) => `rgb(${c})`).join(',')})` } }),
      ' ', num(mode === 'window' ? 2 ** hi : hi)]
      : h('span', { class: 'muted' }, `no ${mode} values`);
  replace(el,
    h('div', { class: 'headgrid', style: { gridTemplateColumns: `auto repeat(${heads}, minmax(22px, 44px))` },
      dataset: { layers, heads } }, cells),
    h('div', { class: 'legend' }, legend));
}

function shortWindow(w) {
  return w >= 1024 && w % 1024 === 0 ? `${w / 1024}k` : String(w);
}

// Returns the per-arm window distribution table. rows: [{arm, window, n}].
export function windowBuckets(rows) {
  const windows = [...new Set(rows.map((r) => r.window))].sort((a, b) => a - b);
  const arms = [...new Set(rows.map((r) => r.arm))].sort();
  const count = new Map(rows.map((r) => [`${r.arm}:${r.window}`, r.n]));
  return h('table', { class: 'grid-table heat' },
    h('thead', {}, h('tr', {}, h('th', {}, 'arm \\ window'), windows.map((w) => h('th', {}, w)))),
    h('tbody', {}, arms.map((arm) => {
      const total = windows.reduce((s, w) => s + (count.get(`${arm}:${w}`) || 0), 0) || 1;
      return h('tr', {}, h('th', {}, arm), windows.map((w) => {
        const f = (count.get(`${arm}:${w}`) || 0) / total;
        return h('td', { class: 'num', style: { background: viridis(f), color: f > 0.6 ? '#000' : '#fff' },
          title: `${count.get(`${arm}:${w}`) || 0} of ${total} heads` }, `${(100 * f).toFixed(1)}%`);
      }));
    })));
}
