-- headlab schema, migration 1 (PRAGMA user_version 0 -> 1).
-- The coordinator embeds this file's bytes (CMakeLists.txt generates the literal that
-- coordinator/migrations.cc includes). Times: *_at columns are ISO-8601 UTC text; time_s
-- columns are unix seconds (REAL). JSON columns hold canonical (key-sorted, compact) JSON.
-- "Which commit, config and data produced this number?":
--   SELECT r.config_json, p.git_commit, p.git_dirty, p.dataset_sha256, s.value
--   FROM summaries s JOIN runs r ON r.id = s.run_id
--   JOIN provenance p ON p.run_id = s.run_id AND p.attempt = s.attempt
--   WHERE s.key = 'eval.ppl';

CREATE TABLE experiments (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL,
  description   TEXT NOT NULL DEFAULT '',
  file          TEXT NOT NULL DEFAULT '',      -- grid file name as submitted
  grid_json     TEXT NOT NULL,                 -- the grid after --set overrides
  sets_json     TEXT NOT NULL DEFAULT '[]',    -- the --set arguments
  arms_json     TEXT NOT NULL DEFAULT '[]',
  pair_by_json  TEXT NOT NULL DEFAULT '[]',
  comparisons_json TEXT NOT NULL DEFAULT '[]',
  max_attempts  INTEGER NOT NULL,
  rerun         INTEGER NOT NULL DEFAULT 0,
  created_at    TEXT NOT NULL
);

-- status: queued | running | succeeded | failed | lost | cancelled
CREATE TABLE runs (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  idx           INTEGER NOT NULL,              -- position in the grid's expansion order
  arm           TEXT NOT NULL,
  config_json   TEXT NOT NULL,                 -- complete run config (defaults applied)
  config_hash   TEXT NOT NULL,                 -- SHA-256 of config_json
  pair_key      TEXT NOT NULL,                 -- canonical JSON of the pair_by values
  seed          INTEGER NOT NULL DEFAULT 0,
  status        TEXT NOT NULL,
  attempts      INTEGER NOT NULL DEFAULT 0,    -- attempts started so far
  max_attempts  INTEGER NOT NULL,
  reused_from   INTEGER REFERENCES runs(id),   -- succeeded run whose result this one reuses
  worker_id     TEXT,                          -- worker of the current/last attempt
  error         TEXT NOT NULL DEFAULT '',
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  UNIQUE (experiment_id, idx)
);
CREATE INDEX runs_by_status ON runs(status, id);
CREATE INDEX runs_by_hash ON runs(config_hash, status);
CREATE INDEX runs_by_experiment_status ON runs(experiment_id, status);

-- status: running | succeeded | failed | cancelled | lost | rejected
CREATE TABLE attempts (
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  attempt       INTEGER NOT NULL,              -- 1, 2, ...
  worker_id     TEXT NOT NULL,
  devices_json  TEXT NOT NULL DEFAULT '[]',    -- device indices on that worker
  status        TEXT NOT NULL,
  assigned_at   TEXT NOT NULL,
  accepted_at   TEXT,
  finished_at   TEXT,
  exit_code     INTEGER,
  error         TEXT NOT NULL DEFAULT '',
  stderr_tail   TEXT NOT NULL DEFAULT '',
  resume_json   TEXT NOT NULL DEFAULT 'null',  -- {path, sha256, step} it resumed from
  PRIMARY KEY (run_id, attempt)
);
CREATE INDEX attempts_by_status ON attempts(status);

-- state: alive | dead | gone (disconnected)
CREATE TABLE workers (
  id            TEXT PRIMARY KEY,              -- the DEALER routing identity
  name          TEXT NOT NULL,
  host          TEXT NOT NULL,
  pid           INTEGER NOT NULL,
  version       TEXT NOT NULL,
  slots         INTEGER NOT NULL,
  devices_json  TEXT NOT NULL,
  state         TEXT NOT NULL,
  first_seen_at TEXT NOT NULL,
  last_seen_at  TEXT NOT NULL
);

CREATE TABLE metrics (
  run_id        INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  seq           INTEGER NOT NULL,              -- per-(run, attempt) counter from 0
  step          INTEGER NOT NULL,
  key           TEXT NOT NULL,                 -- common/metric_names.h
  value         REAL,
  time_s        REAL NOT NULL,
  PRIMARY KEY (run_id, attempt, seq)
) WITHOUT ROWID;

-- Final metrics of the run's successful attempt (or copied from reused_from).
CREATE TABLE summaries (
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  key           TEXT NOT NULL,
  value         REAL,
  attempt       INTEGER NOT NULL,
  PRIMARY KEY (run_id, key)
);

CREATE TABLE artifacts (
  run_id        INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  seq           INTEGER NOT NULL,
  kind          TEXT NOT NULL,                 -- checkpoint | logprobs | ...
  path          TEXT NOT NULL,
  sha256        TEXT NOT NULL,
  bytes         INTEGER NOT NULL,
  step          INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  PRIMARY KEY (run_id, attempt, seq)
);
CREATE INDEX artifacts_by_kind ON artifacts(run_id, kind, step);

-- One row per attempt; the named columns are copied out of fields_json (all fields).
CREATE TABLE provenance (
  run_id        INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  git_commit    TEXT,
  git_dirty     INTEGER,
  git_diff_sha256 TEXT,
  binary_sha256 TEXT,
  host          TEXT,
  devices       TEXT,
  driver_version TEXT,
  cuda_version  TEXT,
  libtorch_version TEXT,
  dataset_path  TEXT,
  dataset_sha256 TEXT,
  parent_run    INTEGER,
  parent_checkpoint_sha256 TEXT,
  fields_json   TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  PRIMARY KEY (run_id, attempt)
);

-- role: e.g. retrieval | streaming | local | fixed | ordinary | pruned
CREATE TABLE head_maps (
  run_id        INTEGER NOT NULL,
  attempt       INTEGER NOT NULL,
  layer         INTEGER NOT NULL,
  head          INTEGER NOT NULL,
  role          TEXT NOT NULL,
  score         REAL,
  window        INTEGER,
  PRIMARY KEY (run_id, attempt, layer, head)
);

-- Comparisons of an experiment's grid, recomputed when the experiment finishes.
CREATE TABLE paired_stats (
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  name          TEXT NOT NULL,                 -- comparison name from the grid
  baseline      TEXT NOT NULL,                 -- arm
  treatment     TEXT NOT NULL,                 -- arm
  metric        TEXT NOT NULL,
  stat          TEXT NOT NULL,                 -- delta_pct | diff | ratio
  estimator     TEXT NOT NULL,                 -- e.g. "mean_se_paired"
  n             INTEGER NOT NULL,              -- complete pairs
  mean          REAL,
  se            REAL,
  per_pair_json TEXT NOT NULL,                 -- [{pair_key, baseline_run, treatment_run, value}]
  computed_at   TEXT NOT NULL,
  PRIMARY KEY (experiment_id, name)
);

-- Audit log: every state change the coordinator makes, in order.
CREATE TABLE events (
  id            INTEGER PRIMARY KEY,
  at            TEXT NOT NULL,
  kind          TEXT NOT NULL,                 -- submit | assign | lost | done | cancel | ...
  experiment_id INTEGER,
  run_id        INTEGER,
  attempt       INTEGER,
  worker_id     TEXT,
  detail_json   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_by_run ON events(run_id);
