// Formatting shared by the views.

export const kStatuses = ['queued', 'running', 'succeeded', 'failed', 'lost', 'cancelled'];

// Returns a short human number that keeps every digit of its magnitude: 4 significant
// digits below 1000 ("3.142", "0.5"), whole numbers from 1000 up to 10^7 ("9110", "12001"),
// an exponent beyond (1.23e+7) and below 10^-3 (2.50e-5). Trailing zeros go only after a
// decimal point: 9110.08 is "9110", never "911".
export function num(v) {
  if (v === null || v === undefined || v === '') return '—';
  const x = Number(v);
  if (!Number.isFinite(x)) return String(v);
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1e7 || a < 1e-3) return x.toExponential(2);
  if (Number.isInteger(x) || a >= 1000) return String(Math.round(x));
  return trimFraction(x.toPrecision(4));
}

// Drops the zeros that end a decimal fraction ("0.5000" -> "0.5", "250.0" -> "250").
function trimFraction(text) {
  if (!text.includes('.') || text.includes('e')) return text;
  return text.replace(/0+$/, '').replace(/\.$/, '');
}

const kByteUnits = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

// Returns a byte count with a binary unit: "512 B", "229.5 MiB", "1.00 GiB" (3 or 4
// significant digits); "—" when absent.
export function bytes(v) {
  if (v === null || v === undefined || v === '') return '—';
  let x = Number(v);
  if (!Number.isFinite(x)) return String(v);
  let u = 0;
  while (Math.abs(x) >= 1024 && u < kByteUnits.length - 1) {
    x /= 1024;
    u++;
  }
  if (u === 0) return `${Math.round(x)} B`;
  return `${Math.abs(x) >= 100 ? x.toFixed(1) : x.toFixed(2)} ${kByteUnits[u]}`;
}

// Returns true iff a metric or config key holds a byte count ("mem.peak_bytes", "kv_bytes").
export function isBytesKey(key) {
  return /(^|[._])(bytes|[a-z]+_bytes)($|[._])/.test(String(key));
}

// Throughput keys whose 0 means "not measured" (a run that never trained, MFU where the
// device's peak is unknown), never a measured zero.
const kUnmeasuredAtZero = new Set(['train.tokens_per_s', 'train.mfu', 'train.step_s']);

// Returns true iff `v` of `key` is a placeholder for a figure that was not measured.
export function unmeasured(key, v) {
  return kUnmeasuredAtZero.has(key) && Number(v) === 0;
}

// Formats a metric value by its key: bytes with a unit, everything else with num().
export function metricValue(key, v) {
  if (unmeasured(key, v)) return '—';
  return isBytesKey(key) ? bytes(v) : num(v);
}

// Returns "mean ± se" with both to the same decimal place, set by the SE's two leading
// digits (11148 ± 171, 0.09540 ± 0.00026); the mean alone when there is no SE (n < 2);
// bytes in one binary unit ("189.0 MiB", "1.50 GiB ± 12.3 MiB" never: both in GiB).
export function meanSe(key, mean, se, n) {
  if (mean === null || mean === undefined || unmeasured(key, mean)) return '—';
  const noSe = se === null || se === undefined || !Number.isFinite(Number(se)) || !(n >= 2);
  if (isBytesKey(key)) {
    const text = bytes(mean);
    if (noSe) return text;
    const unit = text.split(' ')[1];
    const scale = 1024 ** Math.max(0, kByteUnits.indexOf(unit));
    return `${fixedPair(Number(mean) / scale, Number(se) / scale).join(' ± ')} ${unit}`;
  }
  if (noSe) return num(mean);
  return fixedPair(Number(mean), Number(se)).join(' ± ');
}

// [mean, se] as text at the decimal place of the SE's second significant digit.
function fixedPair(mean, se) {
  const a = Math.abs(se);
  if (a === 0) return [num(mean), '0'];
  if (Math.abs(mean) >= 1e7 || a < 1e-9) return [mean.toExponential(2), se.toExponential(1)];
  const d = Math.min(12, Math.max(0, 1 - Math.floor(Math.log10(a))));
  return [mean.toFixed(d), se.toFixed(d)];
}

// Returns axis tick labels for `values` with the fewest digits that keep every label
// distinct and true to its value (ticks 0.001, 0.002, 0.003 never read "0 0 0", 2.5 never
// "3"): fixed notation from 10^-3 to 10^6, exponents beyond. Non-finite values get "".
export function tickLabels(values) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length) return values.map(() => '');
  const maxAbs = Math.max(...finite.map(Math.abs));
  const minAbs = Math.min(...finite.filter((v) => v !== 0).map(Math.abs), Infinity);
  const exponent = maxAbs >= 1e6 || (minAbs < 1e-3 && maxAbs < 1e-2);
  // A label may be off by at most a thousandth of the gap between ticks.
  const sorted = [...new Set(finite)].sort((a, b) => a - b);
  let gap = Infinity;
  for (let i = 1; i < sorted.length; i++) gap = Math.min(gap, sorted[i] - sorted[i - 1]);
  const tolerance = Number.isFinite(gap) ? gap * 1e-3 : Math.max(maxAbs, 1e-300) * 1e-6;
  const fmt = (v, d) => (v === 0 ? '0' : exponent ? v.toExponential(d) : v.toFixed(d));
  for (let d = 0; d <= 15; d++) {
    const labels = values.map((v) => (Number.isFinite(v) ? fmt(v, d) : ''));
    const exact = finite.every((v) => Math.abs(Number(fmt(v, d)) - v) <= tolerance);
    if (exact && new Set(labels.filter((l) => l !== '')).size === new Set(finite).size) return labels;
  }
  return values.map((v) => (Number.isFinite(v) ? String(v) : ''));
}

// Axis tick labels of byte counts in one binary unit chosen by the largest tick
// ("0 B", "512 KiB", "1.5 MiB" never mixed: "0.0 MiB 0.5 MiB 1.0 MiB 1.5 MiB").
export function byteTickLabels(values) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length) return values.map(() => '');
  const maxAbs = Math.max(...finite.map(Math.abs));
  let u = 0;
  while (maxAbs >= 1024 ** (u + 1) && u < kByteUnits.length - 1) u++;
  const labels = tickLabels(values.map((v) => (Number.isFinite(v) ? v / 1024 ** u : v)));
  return labels.map((l) => (l === '' ? '' : `${l} ${kByteUnits[u]}`));
}

// The x axis of a metric's curve: the step it was logged at, except where a method logs
// a point per context length or per layer (common/metric_names.h).
export function xAxisLabel(key) {
  const k = String(key);
  if (k.startsWith('aoh.bench.')) return 'context length (tokens)';
  if (k === 'aoh.rope_spearman') return 'layer';
  if (k.startsWith('sys.')) return 'seconds since the attempt started';
  if (k.startsWith('bench.')) return 'measurement row';
  return 'step';
}

// The y axis of a metric: its key with the unit its name implies.
export function yAxisLabel(key) {
  const k = String(key);
  if (isBytesKey(k)) return `${k} (bytes)`;
  if (/\.loss$/.test(k)) return `${k} (nats/token)`;
  if (/_ms($|_)/.test(k)) return `${k} (ms)`;
  if (/_s$/.test(k) && !/per_s$/.test(k)) return `${k} (s)`;
  if (/_pct$/.test(k)) return `${k} (%)`;
  return k;
}

// Returns "2h 03m", "4m 10s", "12s" for a duration in seconds.
export function duration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '—';
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(s / 3600);
  return `${h}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

// A config value in a table cell: numbers by num(), "—" when absent.
export function paramText(v) {
  if (v === undefined || v === null) return '—';
  return typeof v === 'number' ? num(v) : String(v);
}

// Returns the first 12 characters of a hash (the full value goes in a title).
export function shortHash(s) {
  return s ? String(s).slice(0, 12) : '—';
}

// Parses a JSON text column, returning `fallback` when it is absent or malformed.
export function parseJson(text, fallback) {
  if (typeof text !== 'string') return text ?? fallback;
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

// Estimated seconds until an experiment finishes. meanS: mean duration of its succeeded
// attempts (null if none yet); running: [{elapsed, steps, step}] per running attempt, with
// the configured and the latest logged step where known. A running attempt with progress
// is projected linearly (elapsed * steps / step); without, it takes meanS. Runs still
// queued take meanS, or the mean projection when nothing has finished; the sum is spread
// over the attempts running now. Returns 0 when nothing is left, null when there is no
// rate to go on.
export function eta(counts, meanS, running = []) {
  const queued = counts.queued || 0;
  const nRunning = counts.running || 0;
  if (queued + nRunning === 0) return 0;
  const projected = running.filter((r) => r.step > 0 && r.steps > 0)
    .map((r) => ({ total: (r.elapsed * r.steps) / Math.min(r.step, r.steps), elapsed: r.elapsed }));
  const per = meanS || (projected.length
    ? projected.reduce((a, p) => a + p.total, 0) / projected.length : null);
  if (!per) return null;
  let left = queued * per;
  for (const r of running) {
    const p = r.step > 0 && r.steps > 0 ? (r.elapsed * r.steps) / Math.min(r.step, r.steps) : per;
    left += Math.max(0, p - r.elapsed);
  }
  // Running attempts the query did not see (e.g. between two polls) take a full duration.
  left += Math.max(0, nRunning - running.length) * per;
  return left / Math.max(1, nRunning);
}
