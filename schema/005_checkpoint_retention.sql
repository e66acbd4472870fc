-- headlab schema, migration 5 (PRAGMA user_version 4 -> 5): checkpoint retention
-- (docs/DESIGN.md, "Checkpoint retention").
--   artifacts.deleted_at  when the worker reported the file deleted (ARTIFACT_DELETED:
--       retention removed an older checkpoint, or the path was rewritten in place); NULL
--       while it is on disk as far as the coordinator knows. Deleted artifacts stay listed
--       (their SHA-256 is still the provenance of what continued from them) but are never
--       offered for download, resume or as a parent checkpoint.
--   runs_by_parent_run, runs_by_parent_experiment  find the continuations that name a run
--       (parent.run, or parent.experiment + arm + seed) when it is dispatched: the steps
--       they start from are pinned in its ASSIGN.keep_steps.
ALTER TABLE artifacts ADD COLUMN deleted_at TEXT;
CREATE INDEX runs_by_parent_run ON runs(json_extract(config_json, '$.parent.run'));
CREATE INDEX runs_by_parent_experiment
  ON runs(json_extract(config_json, '$.parent.experiment'), seed);
