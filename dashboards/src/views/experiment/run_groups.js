// The groups runs are drawn in: an arm broken down by the axes chosen in "arms by" (by
// default every axis the grid does not pair on), one colour per group in a stable order,
// and the select that chooses those axes.
import { h, replace } from '../../dom.js';
import { colorFor } from '../../charts.js';
import { unpairedAxes, groupLabel } from '../../groups.js';

// The axes arms are broken down by for the choice `by`: "auto" = every unpaired axis,
// "arm" = none, else that one key.
export function byKeys(s) {
  if (s.by === 'arm') return [];
  if (s.by === 'auto') return unpairedAxes(s.varying, s.pairBy, s.gridArms);
  return [s.by];
}

export class RunGroups {
  constructor(s) {
    this.s = s;
    this.colors = new Map();  // group label -> colour, in the order the groups came
  }

  keys() {
    return byKeys(this.s);
  }

  // The label of a run's group ({arm, params: {key: value}}).
  of(run) {
    const keys = this.keys();
    return groupLabel(run.arm, keys, keys.map((k) => (run.params ? run.params[k] : null)));
  }

  // Colours: one per arm (in arm order) when arms are not broken down, else one per group
  // as the groups come.
  color(label, arm) {
    if (!this.keys().length) return colorFor(Math.max(0, this.s.arms.indexOf(arm)));
    if (!this.colors.has(label)) this.colors.set(label, colorFor(this.colors.size));
    return this.colors.get(label);
  }

  // Forgets the colours (the groups changed).
  reset() {
    this.colors.clear();
  }
}

// The choices of "arms by": [value, label], every unpaired axis first, then arm alone,
// then each key the grid varies (but the one unpaired axis, which "auto" already is).
export function byOptions(varying, pairBy, gridArms) {
  const auto = unpairedAxes(varying, pairBy, gridArms);
  return [['auto', auto.length ? `arm × ${auto.join(' × ')}` : 'arm (no unpaired axis)'],
    ['arm', 'arm only'], ...varying.filter((k) => !auto.includes(k) || auto.length > 1).map((k) => [k, `arm × ${k}`])];
}

// The "arms by" select: fill() offers the state's choices (rebuilt only when they
// change); a choice sets s.by and calls onChange().
export function bySelect(s, onChange) {
  const el = h('select', { id: 'arm-by', title: 'runs that differ in these axes are never pooled' });
  el.addEventListener('change', () => {
    s.by = el.value;
    onChange();
  });
  function fill() {
    const opts = byOptions(s.varying, s.pairBy, s.gridArms);
    const sig = JSON.stringify(opts);
    if (el.dataset.sig === sig) return;
    el.dataset.sig = sig;
    replace(el, opts.map(([v, label]) => h('option', { value: v, selected: v === s.by }, label)));
  }
  return { el, fill };
}
