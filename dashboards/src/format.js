// Formatting shared by the views.

export const kStatuses = ['queued', 'running', 'succeeded', 'failed', 'lost', 'cancelled'];

// Returns a short human number: 3 significant digits, exponent for very large/small.
export function num(v) {
  if (v === null || v === undefined || v === '') return '—';
  const x = Number(v);
  if (!Number.isFinite(x)) return String(v);
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (Number.isInteger(x) && a < 1e7) return String(x);
  if (a >= 1e5 || a < 1e-3) return x.toExponential(2);
  return x.toPrecision(4).replace(/\.?0+$/, '');
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

// Estimated seconds until an experiment finishes: the queued runs and the remainder of
// the running ones, at the mean duration of its succeeded attempts, spread over the runs
// executing in parallel now. Null when nothing has finished yet (no rate to go on).
export function eta(counts, meanS, runningElapsedS) {
  const queued = counts.queued || 0;
  const running = counts.running || 0;
  if (queued + running === 0) return 0;
  if (!meanS) return null;
  const left = queued * meanS + Math.max(0, running * meanS - (runningElapsedS || 0));
  return left / Math.max(1, running);
}
