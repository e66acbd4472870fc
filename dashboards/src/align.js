// Aligning curves for uPlot, which draws series that share one x array.

const kMaxPoints = 1500;

// Aligns lines [{xs, ys}] on one sorted x axis. When the axis would exceed `maxPoints`
// steps, steps are bucketed to a common width and each line keeps its bucket mean, so the
// lines stay aligned. Returns uPlot's AlignedData [xs, ys0, ys1, ...] (null = no point).
export function alignLines(lines, maxPoints = kMaxPoints) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const l of lines) {
    for (const x of l.xs) {
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
  }
  if (lo > hi) return [[], ...lines.map(() => [])];
  const distinct = new Set();
  for (const l of lines) for (const x of l.xs) distinct.add(x);
  const width = distinct.size > maxPoints ? Math.ceil((hi - lo + 1) / maxPoints) : 1;
  const bucket = (x) => (width === 1 ? x : lo + Math.floor((x - lo) / width) * width);
  const sums = lines.map((l) => {
    const m = new Map();
    for (let i = 0; i < l.xs.length; i++) {
      const y = l.ys[i];
      if (y === null || y === undefined || !Number.isFinite(y)) continue;
      const b = bucket(l.xs[i]);
      const s = m.get(b);
      if (s) { s[0] += y; s[1] += 1; } else m.set(b, [y, 1]);
    }
    return m;
  });
  const axis = new Set();
  for (const m of sums) for (const b of m.keys()) axis.add(b);
  const xs = [...axis].sort((a, b) => a - b);
  return [xs, ...sums.map((m) => xs.map((x) => {
    const s = m.get(x);
    return s ? s[0] / s[1] : null;
  }))];
}
