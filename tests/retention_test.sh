#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Checkpoint retention"): a tiny CPU parent checkpointing at
# every update (6 updates, train.keep_checkpoints 2, train.keep_steps "2") and a
# continuation from its step 4, stored before the parent is dispatched, run on a real
# coordinator and worker. The parent's folder then holds exactly the newest two checkpoints
# (5, 6), the listed one (2) and the pinned one (4); the artifacts table marks the two
# deleted ones (1, 3), `headlab artifacts` shows them deleted and will not download them;
# the continuation starts from step 4; a later continuation from deleted step 3 fails at
# dispatch naming retention; a run whose checkpoints no disk holds is refused by the worker
# with the need and the free space as its error.
source "$(dirname "$0")/lib.sh"

PARENT=$HL_TMP/parent.jsonc
cat >"$PARENT" <<'EOF2'
{
  "name": "retention-parent",
  "base": {
    "kind": "train",
    "model": {"layers": 1, "heads": 2, "width": 32, "context": 32},
    "train": {"steps": 6, "batch_size": 4, "warmup_steps": 1, "eval_every": 0,
              "eval_batches": 1, "log_every": 1, "checkpoint_every": 1,
              "keep_checkpoints": 2, "keep_steps": "2", "device": "cpu", "threads": 1}
  },
  "axes": {"seed": [1]}
}
EOF2
# The continuation: the same run from the parent's step 4, saving only its final checkpoint.
CHILD=$HL_TMP/child.jsonc
jq '.name = "retention-child" | .base.parent = {step: 4} | .base.train.checkpoint_every = 0
    | del(.base.train.keep_steps)' "$PARENT" >"$CHILD" || fail "cannot write $CHILD"

say "no worker yet: the parent and its continuation are both stored before any dispatch"
start_coordinator
PEXP=$(submit "$PARENT") || exit 1
CEXP=$(submit "$CHILD" --set "parent.experiment=$PEXP") || exit 1
P=$(db "SELECT id FROM runs WHERE experiment_id = $PEXP")
start_worker w1
wait_workers 1
wait_grid "$PEXP" 120
wait_grid "$CEXP" 120
check_one_success_per_run "$PEXP" 1
check_one_success_per_run "$CEXP" 1

say "the parent's folder keeps the newest two, the listed step and the pinned step"
DIR=$(db "SELECT path FROM artifacts WHERE run_id = $P AND kind = 'checkpoint' AND step = 6")
DIR=$(dirname "$DIR")
expect_eq "checkpoint files on disk" "ckpt-00000002.pt ckpt-00000004.pt ckpt-00000005.pt ckpt-00000006.pt" \
  "$(cd "$DIR" && ls ckpt-*.pt | tr '\n' ' ' | sed 's/ $//')"
expect_eq "checkpoint artifacts (all six stay listed)" 6 \
  "$(db "SELECT count(*) FROM artifacts WHERE run_id = $P AND kind = 'checkpoint'")"
expect_eq "steps marked deleted" "1,3" "$(db "SELECT group_concat(step, ',') FROM (SELECT step FROM artifacts
  WHERE run_id = $P AND kind = 'checkpoint' AND deleted_at IS NOT NULL ORDER BY step)")"
while IFS='|' read -r path sha; do
  [[ -f "$path" ]] || fail "$path is listed as present but is gone"
  expect_eq "sha256 of $(basename "$path")" "$sha" "$(sha256sum "$path" | cut -d' ' -f1)"
done < <(db "SELECT path, sha256 FROM artifacts WHERE run_id = $P AND kind = 'checkpoint' AND deleted_at IS NULL")

say "headlab artifacts shows the deleted ones and does not offer them"
OUT=$(hl artifacts "$P") || fail "headlab artifacts $P exited $?"
echo "$OUT"
expect_eq "rows shown as deleted" 2 "$(grep -c 'deleted (retention)' <<<"$OUT")"
SEQ=$(db "SELECT attempt || '/' || seq FROM artifacts WHERE run_id = $P AND step = 1 AND kind = 'checkpoint'")
if ERR=$(hl artifacts "$P" --get "$SEQ" -o "$HL_TMP/x.pt" 2>&1); then fail "downloaded deleted artifact $SEQ: $ERR"; fi
grep -q "deleted" <<<"$ERR" || fail "the refusal does not say the file was deleted: $ERR"
ok "--get $SEQ refused: $ERR"
CODE=$(curl -s -o /dev/null -w '%{http_code}' "$HL_URL/api/v1/runs/$P/artifacts/$SEQ")
expect_eq "HTTP status of the deleted file" 404 "$CODE"

say "the continuation started from the pinned step 4"
C=$(db "SELECT id FROM runs WHERE experiment_id = $CEXP")
expect_eq "its parent checkpoint" "$(db "SELECT sha256 FROM artifacts WHERE run_id = $P AND step = 4 AND kind = 'checkpoint'")" \
  "$(db "SELECT parent_checkpoint_sha256 FROM provenance WHERE run_id = $C")"

say "a continuation submitted later from deleted step 3 fails at dispatch, naming retention"
LATE=$(submit "$CHILD" --set "parent.experiment=$PEXP" --set "parent.step=3") || exit 1
wait_grid "$LATE" 60
expect_eq "late child failed with the retention error" 1 "$(db "
  SELECT count(*) FROM runs WHERE experiment_id = $LATE AND status = 'failed'
  AND error LIKE '%checkpoint of step 3 was deleted by checkpoint retention%keep_steps%'")"

say "a run whose checkpoints no disk holds is refused by the worker"
HUGE=$(submit "$CHILD" --set 'model.layers=128' --set 'model.heads=128' --set 'model.width=65536' \
  --set 'parent.step=0' --set 'parent.experiment=0' --set 'train.steps=300' \
  --set 'train.checkpoint_every=100' --set 'seed=9') || exit 1
wait_grid "$HUGE" 60
ERR=$(db "SELECT error FROM runs WHERE experiment_id = $HUGE")
echo "$ERR"
grep -q "rejected by [^:]*: not enough disk for the run's checkpoints in .*: needs .* GiB (3 checkpoint(s) at once of .* GiB, train.keep_checkpoints 2, + 10% + 64 MiB), .* GiB free" <<<"$ERR" ||
  fail "the refused run's error does not name the need and the free space: $ERR"
ok "refused with the need and the free space"
if grep -n "dropping bad message" "$HL_LOGS/worker-w1.log"; then fail "the worker dropped a coordinator message"; fi
ok "every ACK (ARTIFACT_DELETED among them) was understood"
check_daemons
ok "retention test passed"
