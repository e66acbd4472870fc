#!/usr/bin/env bash
# System test: the web dashboard, in headless Chromium, against a real
# coordinator and worker. A finished grid (tests/dashboard/finished_grid.jsonc), a command
# grid whose script reports known values (report_values.py) and a running grid
# (live_grid.jsonc) are in the database; tests/dashboard/check.mjs then checks that the
# runs table lists every run with the values its grid varies, charts draw points (one-point
# metrics too), numbers keep their digits, no page is wider than the window, panels say
# they are loading, a live curve grows while its run trains, the head grid has L x H
# cells, provenance shows the commit, a failed run shows its cause, artifacts download
# with their hash, tags and notes are edited, and cancel without a token is refused; and
# the rules that keep it usable at 10^5 runs (scripts/dashboard-bench.sh measures those):
# paged runs, comparisons without per-pair lists until opened, an idle finished tab that
# asks only for counts; reused runs' curves, the run page's first curves without a 5 s
# wait, axis labels and log scale, mean ± SE at one precision, the scatter and breakdown,
# overlay selection and clearing, 400 px layouts and a 64-character name, cancel asking
# first and absent on a finished experiment, the worker's RSS series beside the loss, an
# overlay of runs of two experiments, the config diff of two runs (keys as `headlab diff`
# gives them), arms, comparisons and run colours per level of an axis the grid does not
# pair on (with a 28-character arm name whole in the runs table at 1400 px), a
# finished comparison whose treatment failed saying so, and a cancelled run's reason. Screenshots land in $PWD/dashboard-screens/ (the ctest
# working directory) for a person to look at.
#
# Needs Debian's chromium (make deps installs it) and node >= 20 with npm; installs only
# through `npm ci` in dashboards/ (via dashboards/build.sh) and tests/dashboard/.
source "$(dirname "$0")/lib.sh"

DASH=$HEADLAB_SOURCE_DIR/dashboards
DRIVER=$HEADLAB_SOURCE_DIR/tests/dashboard
SCREENS=$PWD/dashboard-screens
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

[[ -x "$CHROMIUM" ]] || fail "no Chromium at $CHROMIUM (apt-get install chromium; make deps does)"
command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (Node >= 20)"

say "build the dashboard (dashboards/build.sh) and the browser driver (npm ci)"
"$DASH/build.sh" >"$HL_LOGS/dashboard-build.log" 2>&1 || { cat "$HL_LOGS/dashboard-build.log"; fail "dashboards/build.sh failed"; }
[[ -f "$DASH/dist/index.html" ]] || fail "dashboards/build.sh left no dist/index.html"
if [[ ! -f "$DRIVER/node_modules/.package-lock.json" || \
      "$DRIVER/package-lock.json" -nt "$DRIVER/node_modules/.package-lock.json" ]]; then
  (cd "$DRIVER" && npm ci --no-audit --no-fund --loglevel=error) >"$HL_LOGS/npm-ci.log" 2>&1 ||
    { cat "$HL_LOGS/npm-ci.log"; fail "npm ci in tests/dashboard failed"; }
fi

say "dashboard unit tests (node --test dashboards/src/)"
(cd "$DASH" && node --test src/) >"$HL_LOGS/dashboard-unit.log" 2>&1 ||
  { cat "$HL_LOGS/dashboard-unit.log"; fail "dashboard unit tests failed"; }
ok "$(grep -E '^# (pass|fail) ' "$HL_LOGS/dashboard-unit.log" | tr '\n' ' ')"

start_cluster 1

say "the coordinator serves the dashboard at /"
INDEX=$(curl -sf --max-time 5 "$HL_URL/") || fail "GET / failed: the coordinator does not serve dashboards/dist"
grep -q '<script type="module"' <<<"$INDEX" || fail "GET / is not the dashboard's index.html: ${INDEX:0:200}"
ASSET=$(grep -o 'assets/index-[^"]*\.js' <<<"$INDEX" | head -1)
curl -sf --max-time 5 "$HL_URL/$ASSET" -o /dev/null || fail "GET /$ASSET failed"
ok "index.html and $ASSET served"

say "a finished grid"
FIN=$(submit "$DRIVER/finished_grid.jsonc") || exit 1
wait_grid "$FIN" 300
expect_eq "finished grid's runs that succeeded" 4 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $FIN AND status = 'succeeded'")"
FIN_RUNS=$(db "SELECT group_concat(id) FROM (SELECT id FROM runs WHERE experiment_id = $FIN ORDER BY id)")
HEAD_RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $FIN AND arm = 'aah'")
PROV_RUN=$(db "SELECT max(id) FROM runs WHERE experiment_id = $FIN")
COMMIT=$(db "SELECT git_commit FROM provenance WHERE run_id = $PROV_RUN ORDER BY attempt DESC LIMIT 1")
[[ -n "$COMMIT" ]] || fail "run $PROV_RUN has no provenance commit in the database"

# The AAH-v3 arm's runs record a head map (aah_head_maps artifact -> head_maps table).
expect_eq "head-map rows of run $HEAD_RUN (AAH-v3, 2 layers x 4 heads)" 8 \
  "$(db "SELECT count(*) FROM head_maps WHERE run_id = $HEAD_RUN AND window IS NOT NULL")"
LAYERS=$(db "SELECT json_extract(config_json, '$.model.layers') FROM runs WHERE id = $HEAD_RUN")
HEADS=$(db "SELECT json_extract(config_json, '$.model.heads') FROM runs WHERE id = $HEAD_RUN")

say "the CLI's reading of the finished grid's comparison"
hl results "$FIN" >"$HL_TMP/results.txt" || fail "headlab results $FIN failed"
grep -q "log-prob diff .* nats/token over .* held-out rows" "$HL_TMP/results.txt" ||
  fail "results show no per-token log-prob difference: $(cat "$HL_TMP/results.txt")"
grep -q "treatment - baseline per token, so > 0 means the treatment gives the tokens" "$HL_TMP/results.txt" ||
  fail "results do not say which way the log-prob difference points"
grep -q "95% CI \[.*\] (Student t, 1 df)" "$HL_TMP/results.txt" || fail "results give no 95% CI"
ok "results explain the log-prob difference's sign and give the 95% CI"

say "the finished grid again: every run reuses a finished one (curves are the source's)"
REUSED=$(submit "$DRIVER/finished_grid.jsonc") || exit 1
wait_grid "$REUSED" 60
expect_eq "runs of experiment $REUSED reused from experiment $FIN" 4 \
  "$(db "SELECT count(*) FROM runs r JOIN runs src ON src.id = r.reused_from
         WHERE r.experiment_id = $REUSED AND src.experiment_id = $FIN")"
REUSED_RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $REUSED")

say "a command grid: one run that reports known values, one that fails with a cause on stderr"
CMD_GRID=$HL_TMP/command_grid.json
cat >"$CMD_GRID" <<JSON
{"name": "dashboard_command_named_with_sixty_four_characters_for_list_rows",
 "base": {"kind": "command",
          "command": {"program": "$DRIVER/report_values.py", "interpreter": "python3"}},
 "arms": {"ok": {}, "fail": {"params.fail": 1}},
 "comparisons": [{"name": "fail vs ok", "baseline": "ok", "treatment": "fail",
                  "metric": "test.value", "stat": "diff"}],
 "max_attempts": 1}
JSON
CMD=$(submit "$CMD_GRID") || exit 1
wait_grid "$CMD" 120
CMD_OK=$(db "SELECT id FROM runs WHERE experiment_id = $CMD AND arm = 'ok'")
CMD_FAIL=$(db "SELECT id FROM runs WHERE experiment_id = $CMD AND arm = 'fail'")
expect_eq "status of the reporting command run $CMD_OK" succeeded "$(db "SELECT status FROM runs WHERE id = $CMD_OK")"
expect_eq "status of the failing command run $CMD_FAIL" failed "$(db "SELECT status FROM runs WHERE id = $CMD_FAIL")"
say "a command grid with an axis it does not pair on (params.lrate): never pooled"
STRATA_GRID=$HL_TMP/strata_grid.json
cat >"$STRATA_GRID" <<JSON
{"name": "dashboard_strata",
 "base": {"kind": "command",
          "command": {"program": "$DRIVER/report_values.py", "interpreter": "python3"}},
 "axes": {"params.rep": [1, 2], "params.lrate": [1, 2]},
 "arms": {"a": {}, "prune_gate_taylor_r25_tokens": {"params.b": 1}},
 "pair_by": ["params.rep"],
 "comparisons": [{"name": "b vs a", "baseline": "a", "treatment": "prune_gate_taylor_r25_tokens",
                  "metric": "test.value", "stat": "diff"}],
 "max_attempts": 1}
JSON
STRATA=$(submit "$STRATA_GRID") || exit 1
wait_grid "$STRATA" 120
expect_eq "strata grid's runs that succeeded" 8 \
  "$(db "SELECT count(*) FROM runs WHERE experiment_id = $STRATA AND status = 'succeeded'")"

say "a run cancelled by its user (its page must say why it stopped)"
HOLD_GRID=$HL_TMP/hold_grid.json
jq -n --arg program "$DRIVER/report_values.py" '{name: "dashboard_hold",
  base: {kind: "command", command: {program: $program, interpreter: "python3"}, params: {hold: 1}},
  max_attempts: 1}' >"$HOLD_GRID"
HOLD=$(submit "$HOLD_GRID") || exit 1
HOLD_RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $HOLD")
curl -sf --max-time 10 -X POST -H "Authorization: Bearer $(cat "$HL_DATA/token")" \
  -H 'Content-Type: application/json' -d '{}' "$HL_URL/api/v1/runs/$HOLD_RUN/cancel" >/dev/null ||
  fail "POST /runs/$HOLD_RUN/cancel with the token failed"
hold_cancelled() { [[ "$(db "SELECT status FROM runs WHERE id = $HOLD_RUN")" == cancelled ]]; }
wait_until 30 "run $HOLD_RUN to be cancelled" hold_cancelled
HOLD_REASON=$(db "SELECT error FROM runs WHERE id = $HOLD_RUN")
[[ -n "$HOLD_REASON" ]] || fail "cancelled run $HOLD_RUN has no reason in the database"
ok "run $HOLD_RUN cancelled: $HOLD_REASON"

say "the CLI's config diff of two finished runs (the dashboard's diff page must agree)"
DIFF_A=$(db "SELECT min(id) FROM runs WHERE experiment_id = $FIN AND arm = 'ordinary'")
DIFF_B=$(db "SELECT max(id) FROM runs WHERE experiment_id = $FIN AND arm = 'aah'")
DIFF_KEYS=$(hl diff "$DIFF_A" "$DIFF_B" --json | jq -c '[.config[].key]') || fail "headlab diff $DIFF_A $DIFF_B failed"
[[ "$DIFF_KEYS" == *seed* && "$DIFF_KEYS" == *aah.* ]] || fail "diff of runs $DIFF_A and $DIFF_B: $DIFF_KEYS"
ok "runs $DIFF_A and $DIFF_B differ in $DIFF_KEYS"

read -r ART_ATTEMPT ART_SEQ ART_SHA <<<"$(db "SELECT attempt, seq, sha256 FROM artifacts
  WHERE run_id = $PROV_RUN AND kind = 'checkpoint' ORDER BY attempt DESC, seq DESC LIMIT 1" | tr '|' ' ')"
[[ -n "$ART_SHA" ]] || fail "run $PROV_RUN has no checkpoint artifact"
WORKER_NAME=$(db "SELECT w.name FROM runs r JOIN workers w ON w.id = r.worker_id WHERE r.id = $PROV_RUN")
SEEDS=$(db "SELECT group_concat(s) FROM (SELECT json_extract(config_json, '$.seed') AS s FROM runs WHERE experiment_id = $FIN ORDER BY id)")

say "a running grid"
LIVE=$(submit "$DRIVER/live_grid.jsonc") || exit 1
LIVE_RUN=$(db "SELECT min(id) FROM runs WHERE experiment_id = $LIVE")
live_has_points() {
  [[ "$(db "SELECT count(*) FROM metrics WHERE run_id = $LIVE_RUN")" -gt 0 ]]
}
wait_until 120 "run $LIVE_RUN to stream metrics" live_has_points
ok "run $LIVE_RUN is training"

mkdir -p "$SCREENS"
rm -f "$SCREENS"/*.png
jq -n --arg url "$HL_URL" --arg screens "$SCREENS" --argjson fin "$FIN" --arg fin_runs "$FIN_RUNS" \
  --argjson live "$LIVE" --argjson live_run "$LIVE_RUN" --argjson head_run "$HEAD_RUN" \
  --argjson layers "$LAYERS" --argjson heads "$HEADS" --argjson prov_run "$PROV_RUN" --arg commit "$COMMIT" \
  --argjson cmd "$CMD" --argjson cmd_ok "$CMD_OK" --argjson cmd_fail "$CMD_FAIL" \
  --argjson art_attempt "$ART_ATTEMPT" --argjson art_seq "$ART_SEQ" --arg art_sha "$ART_SHA" \
  --arg worker_name "$WORKER_NAME" --arg seeds "$SEEDS" --arg token "$(cat "$HL_DATA/token")" \
  --argjson reused "$REUSED" --argjson reused_run "$REUSED_RUN" --argjson strata "$STRATA" \
  --argjson diff_a "$DIFF_A" --argjson diff_b "$DIFF_B" --argjson diff_keys "$DIFF_KEYS" \
  --argjson hold_run "$HOLD_RUN" --arg hold_reason "$HOLD_REASON" '
  {url: $url, screens: $screens, token: $token, worker_name: $worker_name,
   finished: {experiment: $fin, runs: ($fin_runs | split(",") | map(tonumber)),
              seeds: ($seeds | split(",") | map(tonumber))},
   command: {experiment: $cmd, ok_run: $cmd_ok, fail_run: $cmd_fail},
   artifact: {run: $prov_run, attempt: $art_attempt, seq: $art_seq, sha256: $art_sha},
   live: {experiment: $live, run: $live_run},
   heads: {run: $head_run, layers: $layers, heads: $heads},
   provenance: {run: $prov_run, commit: $commit},
   reused: {experiment: $reused, run: $reused_run},
   strata: {experiment: $strata},
   diff: {a: $diff_a, b: $diff_b, keys: $diff_keys},
   cancelled: {run: $hold_run, reason: $hold_reason},
   cancel_run: $live_run}' >"$HL_TMP/spec.json"

say "headless Chromium: tests/dashboard/check.mjs"
CHROMIUM=$CHROMIUM timeout 600 node "$DRIVER/check.mjs" "$HL_TMP/spec.json" || fail "dashboard checks failed (screens in $SCREENS)"

expect_eq "tags of run $PROV_RUN set through the dashboard" "good" \
  "$(db "SELECT group_concat(tag, ' ') FROM tags WHERE target = 'run' AND target_id = $PROV_RUN")"
expect_eq "note of experiment $FIN set through the dashboard" "seed 2 looks off" \
  "$(db "SELECT text FROM notes WHERE target = 'experiment' AND target_id = $FIN")"
expect_eq "run $LIVE_RUN still running after the refused cancel" running \
  "$(db "SELECT status FROM runs WHERE id = $LIVE_RUN")"
expect_eq "cancel events for run $LIVE_RUN" 0 \
  "$(db "SELECT count(*) FROM events WHERE kind = 'cancel' AND run_id = $LIVE_RUN")"

say "cancel the running grid with the token (what the dashboard's button does once one is pasted)"
curl -sf --max-time 10 -X POST -H "Authorization: Bearer $(cat "$HL_DATA/token")" \
  -H 'Content-Type: application/json' -d '{}' "$HL_URL/api/v1/experiments/$LIVE/cancel" >/dev/null ||
  fail "POST /experiments/$LIVE/cancel with the token failed"
live_cancelled() { [[ "$(db "SELECT status FROM runs WHERE id = $LIVE_RUN")" == cancelled ]]; }
wait_until 30 "run $LIVE_RUN to be cancelled" live_cancelled
ok "run $LIVE_RUN cancelled"
ok "screenshots: $(ls "$SCREENS" | tr '\n' ' ')"
