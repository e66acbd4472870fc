// A bounded sample of an experiment's runs, read through the (experiment_id, idx) index:
// the panels that summarise 10^5 runs (mean ± sd curves per arm, the scatter) read n runs
// instead of filtering every run of the experiment (a hashed filter over 10^5 rows, a
// window function to number them per arm: 0.3 s of a query's time here).
//
// Grid position k * P mod N for k = 0 .. n-1, N one past the largest idx and P a prime
// larger than any N: the positions are distinct (multiplication by P permutes 0..N-1),
// and every period of the grid that divides N gets the same share of them, since
// k * P mod d runs through 0..d-1 as k does for d | N: with 2 arms x 2 learning rates
// (period 4) each (arm, rate) has a quarter of the sample, where a stride through the
// grid in order would meet one arm and rate only.
export const kSamplePrime = 2654435761;

// The positions (JS mirror of sampledIdxSql, for tests): at most n of 0..N-1.
export function sampledIdx(N, n) {
  const out = [];
  for (let k = 0; k < Math.min(n, N); k++) out.push(Number((BigInt(k) * BigInt(kSamplePrime)) % BigInt(N)));
  return out;
}

// SQL common table expressions ending in `sample_idx(idx)`: the positions of at most n
// runs of experiment `experimentId` (an integer), as sampledIdx gives them. Prefix the
// query's own WITH list with it: `WITH ${sampledIdxSql(id, 600)}, picked AS (...)`.
export function sampledIdxSql(experimentId, n) {
  return `sample_n(n) AS (SELECT coalesce(max(idx), -1) + 1 FROM runs WHERE experiment_id = ${experimentId}),
sample_k(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM sample_k, sample_n WHERE k + 1 < min(${n}, sample_n.n)),
sample_idx(idx) AS (SELECT (k * ${kSamplePrime}) % sample_n.n FROM sample_k, sample_n)`;
}
