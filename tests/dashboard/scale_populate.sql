-- Benchmark data for the dashboard at scale (docs/BENCHMARKS.md, "Dashboard at scale"):
-- one finished experiment of @RUNS@ runs, 2 arms x 2 learning rates (an axis the grid
-- does not pair on) x @RUNS@/4 seeds, @POINTS@ train.loss points per run; every 100th
-- run failed. Summaries eval.loss, eval.ppl, train.tokens_per_s; a succeeded attempt and
-- provenance per run. scripts/dashboard-bench.sh substitutes @RUNS@ and @POINTS@ and runs
-- it against a database the coordinator created, with the coordinator stopped.
PRAGMA journal_mode = WAL;
BEGIN;
INSERT INTO experiments (name, description, grid_json, arms_json, pair_by_json, comparisons_json, max_attempts, created_at)
VALUES ('bench_scale', 'dashboard benchmark: @RUNS@ runs x @POINTS@ points',
        '{"name":"bench_scale","axes":{"seed":[0],"train.lr":[0.001,0.0003]},'
        || '"arms":{"ordinary":{},"wide":{"model":{"heads":8}}},"pair_by":["seed"],'
        || '"comparisons":[{"name":"wide vs ordinary","baseline":"ordinary","treatment":"wide",'
        || '"metric":"eval.ppl","stat":"delta_pct"}]}',
        '["ordinary","wide"]', '["seed"]',
        '[{"name":"wide vs ordinary","baseline":"ordinary","treatment":"wide","metric":"eval.ppl","stat":"delta_pct"}]',
        1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
CREATE TEMP TABLE bench_exp AS SELECT last_insert_rowid() AS id;
-- Run i: arm i % 2, lr (i / 2) % 2, seed i / 4: each (arm, lr) has one run per seed.
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < @RUNS@ - 1)
INSERT INTO runs (experiment_id, idx, arm, config_json, config_hash, pair_key, seed, status,
                  attempts, max_attempts, worker_id, error, created_at, updated_at)
SELECT (SELECT id FROM bench_exp), i, CASE WHEN i % 2 THEN 'wide' ELSE 'ordinary' END,
       '{"kind":"train","model":{"heads":' || CASE WHEN i % 2 THEN 8 ELSE 4 END ||
         ',"layers":2},"train":{"lr":' || CASE WHEN (i / 2) % 2 THEN '0.0003' ELSE '0.001' END ||
         '},"seed":' || (i / 4) || '}',
       printf('%064x', i), '[' || (i / 4) || ']', i / 4,
       CASE WHEN i % 100 = 99 THEN 'failed' ELSE 'succeeded' END, 1, 1, 'bench-worker',
       CASE WHEN i % 100 = 99 THEN 'exit 1' ELSE '' END,
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM n;
INSERT INTO attempts (run_id, attempt, worker_id, devices_json, status, assigned_at, accepted_at,
                      finished_at, exit_code)
SELECT id, 1, 'bench-worker', '[]', status, '2026-01-01T00:00:00Z', '2026-01-01T00:00:01Z',
       '2026-01-01T00:01:01Z', CASE WHEN status = 'failed' THEN 1 ELSE 0 END
FROM runs WHERE experiment_id = (SELECT id FROM bench_exp);
WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s WHERE k < @POINTS@ - 1)
INSERT INTO metrics (run_id, attempt, seq, step, key, value, time_s)
SELECT r.id, 1, s.k, s.k * 10, 'train.loss',
       1.5 + 4.0 * exp(-s.k / 10.0) + (r.id % 7) * 0.01 + (r.arm = 'wide') * -0.05
         + (json_extract(r.config_json, '$.train.lr') < 0.001) * 0.1, 1.7e9 + s.k
FROM runs r, s WHERE r.experiment_id = (SELECT id FROM bench_exp);
INSERT INTO summaries (run_id, key, value, attempt)
SELECT id, 'eval.loss', 1.6 + (id % 7) * 0.01 + (arm = 'wide') * -0.03, 1 FROM runs
WHERE experiment_id = (SELECT id FROM bench_exp) AND status = 'succeeded';
INSERT INTO summaries (run_id, key, value, attempt)
SELECT id, 'eval.ppl', exp(1.6 + (id % 7) * 0.01 + (arm = 'wide') * -0.03), 1 FROM runs
WHERE experiment_id = (SELECT id FROM bench_exp) AND status = 'succeeded';
INSERT INTO summaries (run_id, key, value, attempt)
SELECT id, 'train.tokens_per_s', 11000 + (id % 13) * 20, 1 FROM runs
WHERE experiment_id = (SELECT id FROM bench_exp) AND status = 'succeeded';
-- tests/dashboard/bench_finish.sql follows (bench_setup.sh appends it).
