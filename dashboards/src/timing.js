// Timing behind the ETA (format.eta): per experiment, the mean duration of succeeded
// attempts and, for each running attempt, its elapsed time and training progress.
import { query } from './api.js';
import { duration, eta } from './format.js';

const kSeconds = (from, to) =>
  `(julianday(${to}) - julianday(coalesce(${from}.accepted_at, ${from}.assigned_at))) * 86400.0`;

// Returns Map(experiment id -> {mean_s, running: [{elapsed, steps, step}]}) for one
// experiment, or for all when `experimentId` is null. Two scans of attempts of the current
// attempt numbers; the latest step is a primary-key range of the running runs' points.
export async function loadTiming(experimentId, signal) {
  const where = experimentId === null ? '' : `AND r.experiment_id = ${Number(experimentId)}`;
  const [means, running] = await Promise.all([
    query(`SELECT r.experiment_id AS exp, avg(${kSeconds('a', 'a.finished_at')}) AS mean_s
FROM attempts a JOIN runs r ON r.id = a.run_id
WHERE a.status = 'succeeded' AND a.finished_at IS NOT NULL ${where}
GROUP BY r.experiment_id`, signal),
    query(`SELECT r.experiment_id AS exp, ${kSeconds('a', "'now'")} AS elapsed,
  CASE WHEN json_extract(r.config_json, '$.kind') = 'train'
    THEN json_extract(r.config_json, '$.train.steps') END AS steps,
  (SELECT max(m.step) FROM metrics m WHERE m.run_id = r.id AND m.attempt = r.attempts) AS step
FROM runs r JOIN attempts a ON a.run_id = r.id AND a.attempt = r.attempts
WHERE r.status = 'running' ${where}`, signal),
  ]);
  const out = new Map();
  const entry = (id) => {
    if (!out.has(id)) out.set(id, { mean_s: null, running: [] });
    return out.get(id);
  };
  for (const m of means) entry(m.exp).mean_s = m.mean_s;
  for (const r of running) entry(r.exp).running.push(r);
  return out;
}

// Returns "done", "≈ 4m 10s" or "—" (nothing to estimate from yet).
export function etaText(counts, timing) {
  const s = eta(counts, timing ? timing.mean_s : null, timing ? timing.running : []);
  if (s === 0) return 'done';
  return s === null ? '—' : `≈ ${duration(s)}`;
}
