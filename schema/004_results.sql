-- headlab schema, migration 4 (PRAGMA user_version 3 -> 4): experiments' results as
-- GET /api/v1/experiments/ID/results answers them, stored, and what says a stored one is
-- still current (coordinator/results_store.h).
--   results_inputs.changes  counts the changes to what an experiment's results are computed
--       from: its runs (arm, pair key, config, status), their summaries, attempts'
--       devices, provenance and logprobs artifacts, and the grid's arms and comparisons.
--       The triggers below count every such write, whoever makes it. Metrics, head maps,
--       events, tags and notes change no result and are not counted.
--   results  the answer computed when `changes` was `inputs`, by the code of answer format
--       `format` (coordinator/results.h kResultsFormat): current iff both still match.
-- Its own table: a counter in the experiments row would rewrite grid_json (hundreds of
-- KB for a large grid) at every run's change.
CREATE TABLE results_inputs (
  experiment_id INTEGER PRIMARY KEY,
  changes       INTEGER NOT NULL DEFAULT 0
);
INSERT INTO results_inputs(experiment_id, changes) SELECT id, 1 FROM experiments;

CREATE TABLE results (
  experiment_id INTEGER PRIMARY KEY,
  inputs        INTEGER NOT NULL,              -- results_inputs.changes it was computed at
  format        INTEGER NOT NULL,              -- answer format of the code that computed it
  results_json  TEXT NOT NULL,                 -- {experiment, arms, comparisons}
  computed_at   TEXT NOT NULL
);

-- An experiment's id may be used again once it is deleted (an interrupted submission):
-- nothing stored for the old one may pass for the new one's.
CREATE TRIGGER results_inputs_new_experiment AFTER INSERT ON experiments BEGIN
  DELETE FROM results WHERE experiment_id = NEW.id;
  INSERT OR REPLACE INTO results_inputs(experiment_id, changes) VALUES (NEW.id, 0);
END;
CREATE TRIGGER results_experiment_delete AFTER DELETE ON experiments BEGIN
  DELETE FROM results WHERE experiment_id = OLD.id;
  DELETE FROM results_inputs WHERE experiment_id = OLD.id;
END;
CREATE TRIGGER results_inputs_grid AFTER UPDATE OF arms_json, comparisons_json ON experiments
WHEN OLD.arms_json IS NOT NEW.arms_json OR OLD.comparisons_json IS NOT NEW.comparisons_json BEGIN
  UPDATE results_inputs SET changes = changes + 1 WHERE experiment_id = NEW.id;
END;

CREATE TRIGGER results_inputs_run_insert AFTER INSERT ON runs BEGIN
  UPDATE results_inputs SET changes = changes + 1 WHERE experiment_id = NEW.experiment_id;
END;
CREATE TRIGGER results_inputs_run_update
AFTER UPDATE OF experiment_id, idx, arm, config_json, pair_key, status ON runs
WHEN OLD.experiment_id IS NOT NEW.experiment_id OR OLD.idx IS NOT NEW.idx OR
     OLD.arm IS NOT NEW.arm OR OLD.config_json IS NOT NEW.config_json OR
     OLD.pair_key IS NOT NEW.pair_key OR OLD.status IS NOT NEW.status BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id IN (OLD.experiment_id, NEW.experiment_id);
END;
CREATE TRIGGER results_inputs_run_delete AFTER DELETE ON runs BEGIN
  UPDATE results_inputs SET changes = changes + 1 WHERE experiment_id = OLD.experiment_id;
END;

CREATE TRIGGER results_inputs_summary_insert AFTER INSERT ON summaries BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = NEW.run_id);
END;
CREATE TRIGGER results_inputs_summary_update AFTER UPDATE ON summaries BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id IN (SELECT experiment_id FROM runs WHERE id IN (OLD.run_id, NEW.run_id));
END;
CREATE TRIGGER results_inputs_summary_delete AFTER DELETE ON summaries BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = OLD.run_id);
END;

CREATE TRIGGER results_inputs_attempt_insert AFTER INSERT ON attempts BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = NEW.run_id);
END;
CREATE TRIGGER results_inputs_attempt_update AFTER UPDATE OF run_id, attempt, devices_json ON attempts
WHEN OLD.run_id IS NOT NEW.run_id OR OLD.attempt IS NOT NEW.attempt OR
     OLD.devices_json IS NOT NEW.devices_json BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id IN (SELECT experiment_id FROM runs WHERE id IN (OLD.run_id, NEW.run_id));
END;
CREATE TRIGGER results_inputs_attempt_delete AFTER DELETE ON attempts BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = OLD.run_id);
END;

CREATE TRIGGER results_inputs_provenance_insert AFTER INSERT ON provenance BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = NEW.run_id);
END;
CREATE TRIGGER results_inputs_provenance_update AFTER UPDATE ON provenance BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id IN (SELECT experiment_id FROM runs WHERE id IN (OLD.run_id, NEW.run_id));
END;
CREATE TRIGGER results_inputs_provenance_delete AFTER DELETE ON provenance BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = OLD.run_id);
END;

CREATE TRIGGER results_inputs_logprobs_insert AFTER INSERT ON artifacts
WHEN NEW.kind = 'logprobs' BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = NEW.run_id);
END;
CREATE TRIGGER results_inputs_logprobs_update AFTER UPDATE ON artifacts
WHEN OLD.kind = 'logprobs' OR NEW.kind = 'logprobs' BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id IN (SELECT experiment_id FROM runs WHERE id IN (OLD.run_id, NEW.run_id));
END;
CREATE TRIGGER results_inputs_logprobs_delete AFTER DELETE ON artifacts
WHEN OLD.kind = 'logprobs' BEGIN
  UPDATE results_inputs SET changes = changes + 1
  WHERE experiment_id = (SELECT experiment_id FROM runs WHERE id = OLD.run_id);
END;
