-- The end of every dashboard benchmark's data (tests/dashboard/bench_setup.sh appends it to
-- bench_populate.sql or scale_populate.sql, inside their transaction): provenance per run of
-- the experiment in temp table bench_exp, its submit event, COMMIT, and its id.
INSERT INTO provenance (run_id, attempt, git_commit, git_dirty, host, fields_json, updated_at)
SELECT id, 1, '0000000000000000000000000000000000000000', 0, 'bench', '{}', strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM runs WHERE experiment_id = (SELECT id FROM bench_exp);
-- The submit event marks the experiment as wholly stored (else the coordinator deletes it
-- at start as one a crash interrupted).
INSERT INTO events (at, kind, experiment_id, detail_json)
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'submit', id, '{}' FROM bench_exp;
COMMIT;
SELECT id FROM bench_exp;
