-- Benchmark data for the dashboard (docs/BENCHMARKS.md, "Service"): one experiment of
-- 10,000 finished runs in 2 arms with 100 train.loss points each (1,000,000 metric points),
-- a succeeded attempt, summaries and provenance per run. Run against a database the
-- coordinator created (schema 001), with the coordinator stopped.
PRAGMA journal_mode = WAL;
BEGIN;
INSERT INTO experiments (name, description, grid_json, max_attempts, created_at)
VALUES ('bench_10k', 'dashboard benchmark: 10,000 runs, 1,000,000 points',
        '{"name":"bench_10k","arms":{"ordinary":{},"wide":{}}}', 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
CREATE TEMP TABLE bench_exp AS SELECT last_insert_rowid() AS id;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
INSERT INTO runs (experiment_id, idx, arm, config_json, config_hash, pair_key, seed, status,
                  attempts, max_attempts, worker_id, created_at, updated_at)
SELECT (SELECT id FROM bench_exp), i, CASE WHEN i % 2 THEN 'wide' ELSE 'ordinary' END,
       '{"kind":"train","model":{"heads":4,"layers":2},"seed":' || (i / 2) || '}',
       printf('%064x', i), '{"seed":' || (i / 2) || '}', i / 2, 'succeeded', 1, 1, 'bench-worker',
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM n;
INSERT INTO attempts (run_id, attempt, worker_id, devices_json, status, assigned_at, accepted_at,
                      finished_at, exit_code)
SELECT id, 1, 'bench-worker', '[0]', 'succeeded', '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z',
       '2026-01-01T00:01:01Z', 0
FROM runs WHERE experiment_id = (SELECT id FROM bench_exp);
WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s WHERE k < 99)
INSERT INTO metrics (run_id, attempt, seq, step, key, value, time_s)
SELECT r.id, 1, s.k, s.k * 10, 'train.loss',
       1.5 + 4.0 * exp(-s.k / 20.0) + (r.id % 7) * 0.01 + (r.arm = 'wide') * -0.05, 1.7e9 + s.k
FROM runs r, s WHERE r.experiment_id = (SELECT id FROM bench_exp);
INSERT INTO summaries (run_id, key, value, attempt)
SELECT id, 'eval.loss', 1.6 + (id % 7) * 0.01, 1 FROM runs WHERE experiment_id = (SELECT id FROM bench_exp);
INSERT INTO summaries (run_id, key, value, attempt)
SELECT id, 'eval.ppl', exp(1.6 + (id % 7) * 0.01), 1 FROM runs WHERE experiment_id = (SELECT id FROM bench_exp);
-- tests/dashboard/bench_finish.sql follows (bench_setup.sh appends it).
