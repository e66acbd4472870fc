-- headlab schema, migration 3 (PRAGMA user_version 2 -> 3): what researchers write on their
-- experiments and runs (coordinator/annotations.h). Neither table changes a result.
--   target  'experiment' | 'run';  target_id  experiments.id | runs.id
--   tag     [A-Za-z0-9_.:+-]{1,64}, at most 32 per target; note  text of at most 64 KiB
-- Runs tagged "good" in any experiment, or in an experiment tagged "good":
--   SELECT r.id FROM runs r WHERE EXISTS (SELECT 1 FROM tags t WHERE t.tag = 'good' AND
--     ((t.target = 'run' AND t.target_id = r.id) OR
--      (t.target = 'experiment' AND t.target_id = r.experiment_id)));
CREATE TABLE tags (
  target        TEXT NOT NULL,
  target_id     INTEGER NOT NULL,
  tag           TEXT NOT NULL,
  created_at    TEXT NOT NULL,
  PRIMARY KEY (target, target_id, tag)
) WITHOUT ROWID;
CREATE INDEX tags_by_tag ON tags(tag, target, target_id);

CREATE TABLE notes (
  target        TEXT NOT NULL,
  target_id     INTEGER NOT NULL,
  text          TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  PRIMARY KEY (target, target_id)
) WITHOUT ROWID;
