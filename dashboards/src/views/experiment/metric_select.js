// The metric the Curves block draws: offered from the keys the overlaid runs logged, the
// loss (else the perplexity) picked first.
import { h, replace } from '../../dom.js';
import { isBytesKey, xAxisLabel, yAxisLabel } from '../../format.js';

// The curve drawn first among `keys` (sorted).
export function preferredCurve(keys) {
  return ['train.loss', 'eval.loss', 'eval.ppl'].find((k) => keys.includes(k)) || keys[0];
}

// The axes of a chart of `key`.
export function curveAxes(key) {
  return { xLabel: xAxisLabel(key), yLabel: yAxisLabel(key), bytes: isBytesKey(key) };
}

// onKey(key): s.key is now `key` (the charts take its axes); onChange(): the user chose it.
export function metricSelect(s, onKey, onChange) {
  const el = h('select', { id: 'metric-key' });
  const set = (key) => {
    s.key = key;
    onKey(key);
  };
  el.addEventListener('change', () => {
    set(el.value);
    onChange();
  });
  // Offers `keys` (sorted) and picks the first curve to draw; false when there are none.
  function offer(keys) {
    if (!keys.length) return false;
    const preferred = preferredCurve(keys);
    replace(el, keys.map((k) => h('option', { value: k, selected: k === preferred }, k)));
    set(preferred);
    return true;
  }
  return { el, offer };
}
