#!/usr/bin/env bash
# System test (README, "Using it"): what the CLI says to a researcher.
# - `up` prints an `export HEADLAB_URL=` line; `status --data-dir D` finds the coordinator
#   through D/coordinator.json (not the default port);
# - experiments are named by their grid's name; a bare `cancel 7` is refused as ambiguous;
#   mistyped commands and keys get the closest known name, not a list of 150;
# - `show` and `logs` say why a run failed (its stderr), not only "exit 1";
# - `results` gives each comparison its unit, SE, 95% CI (Student t) and reading, one
#   FLOPs footnote for all comparisons, and arm tables that are never split.
source "$(dirname "$0")/lib.sh"

say "up on free ports: an export line; status --data-dir finds it"
UP=$HL_TMP/up
hl_up_detached "$UP"
P1=$HL_UP_PORT
grep -qx "  for other shells: export HEADLAB_URL=http://127.0.0.1:$P1" "$HL_TMP/up.out" ||
  fail "up printed no export line: $(cat "$HL_TMP/up.out")"
ok "up printed: export HEADLAB_URL=http://127.0.0.1:$P1"
H() { "$HEADLAB_BIN" "$1" --data-dir "$UP" "${@:2}"; }  # no --url: the address comes from UP
STATUS=$(H status) || fail "status --data-dir $UP failed"
grep -q "coordinator http://127.0.0.1:$P1: up (address from $UP/coordinator.json)" <<<"$STATUS" ||
  fail "status did not use $UP/coordinator.json: $STATUS"
ok "status --data-dir $UP dialled 127.0.0.1:$P1"

say "a grid of known values: names, results, failures"
# value.sh reports eval.loss and eval.ppl: arm a 10 * seed; arm b 9.8 (seed 1) and 19
# (seed 2), i.e. delta_pct -2 % and -5 %: mean -3.5, SE 1.5; 12 more summary metrics; the
# broken arm prints a cause on stderr and exits 1.
cat >"$HL_TMP/value.sh" <<'SH'
seed=$(sed -n 's/.*"seed": *\([0-9]*\).*/\1/p' "$HEADLAB_CONFIG" | head -1)
if grep -q '"fail": *1' "$HEADLAB_CONFIG"; then
  echo "loading data"
  echo "train.bin: cannot open (No such file or directory)" >&2
  exit 1
fi
if grep -q '"b": *1' "$HEADLAB_CONFIG"; then
  case $seed in 1) v=9.8 ;; *) v=19 ;; esac
else
  v=$((10 * seed))
fi
extra=""
for i in $(seq 1 12); do extra="$extra,\"extra.m$(printf %02d "$i")\":$i"; done
echo "{\"ev\":\"summary\",\"values\":{\"eval.loss\":$v,\"eval.ppl\":$v$extra}}" >&"$HEADLAB_FD"
SH
cat >"$HL_TMP/grid.json" <<JSON
{"name": "known_values",
 "base": {"kind": "command", "command": {"program": "$HL_TMP/value.sh", "interpreter": "sh"}},
 "axes": {"seed": [1, 2]},
 "arms": {"a": {}, "b": {"params.b": 1}, "broken": {"params.fail": 1}},
 "pair_by": ["seed"],
 "comparisons": [
   {"name": "b vs a", "baseline": "a", "treatment": "b", "metric": "eval.loss", "stat": "delta_pct"},
   {"name": "b vs a (ppl)", "baseline": "a", "treatment": "b", "metric": "eval.ppl", "stat": "diff"}],
 "max_attempts": 1}
JSON
EXP=$(H submit "$HL_TMP/grid.json" --json | jq -r .experiment)
[[ "$EXP" =~ ^[0-9]+$ ]] || fail "submit printed no experiment id"
H wait known_values --quiet >/dev/null 2>&1  # exit 1: the broken arm fails, as it should
expect_eq "succeeded runs of known_values" 4 \
  "$(H query "SELECT count(*) FROM runs WHERE experiment_id = $EXP AND status = 'succeeded'" --csv | tail -1)"
ok "experiment $EXP is reachable as \"known_values\""

say "results: unit, SE, 95% CI, reading; one FLOPs footnote; no split tables"
RES=$(COLUMNS=100 H results known_values) || fail "results known_values failed"
echo "$RES" | sed 's/^/    /'
# t(0.975; 1) = tan(0.475 pi) = 12.7062: -3.5 ± 19.0593.
grep -q "mean -3.5 % ± 1.5 (SE)   95% CI \[-22.5593 %, 15.5593 %\] (Student t, 1 df)" <<<"$RES" ||
  fail "results do not give b vs a as mean -3.5 % ± 1.5 with the t interval [-22.5593, 15.5593]"
grep -q "lower is better: no clear difference (95% CI includes 0)" <<<"$RES" || fail "no reading of b vs a"
expect_eq "FLOPs footnotes" 1 "$(grep -c 'FLOPs' <<<"$RES")"
expect_eq "split ('continued') tables" 0 "$(grep -c 'continued' <<<"$RES")"
grep -q "extra.m12" <<<"$RES" || fail "results lost the 12th extra metric"
ok "b vs a: -3.5 % ± 1.5, 95% CI [-22.5593, 15.5593] %, read as no clear difference"

say "why a run failed"
BROKEN=$(H query "SELECT min(id) FROM runs WHERE experiment_id = $EXP AND arm = 'broken'" --csv | tail -1)
SHOW=$(H show "$BROKEN") || fail "show $BROKEN failed"
grep -A3 "^cause:" <<<"$SHOW" | grep -q "train.bin: cannot open (No such file or directory)" ||
  fail "show $BROKEN does not say why it failed: $(head -8 <<<"$SHOW")"
LOGS=$(H logs "$BROKEN") || fail "logs $BROKEN failed"
grep -q "train.bin: cannot open" <<<"$LOGS" || fail "logs $BROKEN lack the stderr: $LOGS"
grep -q "assign" <<<"$LOGS" || fail "logs $BROKEN lack the events: $LOGS"
ok "show and logs of run $BROKEN give the cause from its stderr"

say "ambiguity and typos"
OUT=$(H cancel 1 2>&1); rc=$?
expect_eq "exit of a bare 'cancel 1'" 2 "$rc"
grep -q 'say `headlab cancel run 1 ...` or `headlab cancel experiment 1 ...`' <<<"$OUT" || fail "cancel 1 said: $OUT"
OUT=$(H reslts known_values 2>&1); rc=$?
expect_eq "exit of 'reslts'" 2 "$rc"
grep -q "did you mean 'results'" <<<"$OUT" || fail "reslts said: $OUT"
OUT=$("$HEADLAB_BIN" submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" --dry-run --set train.lrr=1 2>&1); rc=$?
expect_eq "exit of --set train.lrr=1" 2 "$rc"
grep -q 'did you mean "train.lr"' <<<"$OUT" || fail "--set train.lrr said: $OUT"
(( ${#OUT} < 300 )) || fail "an unknown key's message is ${#OUT} bytes long: $OUT"
OUT=$(H results known_valeus 2>&1); rc=$?
expect_eq "exit of results for a mistyped name" 2 "$rc"
grep -q 'did you mean "known_values"' <<<"$OUT" || fail "results known_valeus said: $OUT"
ok "ambiguous ids refused, typos answered with the closest name"
say "tags, notes and a search across experiments"
A1=$(H query "SELECT min(id) FROM runs WHERE experiment_id = $EXP AND arm = 'a'" --csv | tail -1)
H tag run "$A1" good baseline >/dev/null || fail "tag run $A1 failed"
H tag known_values paper >/dev/null || fail "tag known_values (an experiment by name) failed"
H tag run "$A1" --remove baseline >/dev/null || fail "tag --remove failed"
expect_eq "tags of run $A1" "good" "$(H tag run "$A1" --json | jq -r '.tags | join(" ")')"
H note experiment known_values "b is 3.5 % lower, within noise" >/dev/null || fail "note failed"
expect_eq "the experiment's note" "b is 3.5 % lower, within noise" "$(H note known_values --json | jq -r .note)"
expect_eq "runs tagged good" "$A1" "$(H runs --tag good --json | jq -r '[.runs[].id] | join(",")')"
expect_eq "runs in an experiment tagged paper that failed" 2 \
  "$(H runs --tag paper --status failed --json | jq '.runs | length')"
expect_eq "runs with params.b = 1" 2 "$(H runs --where params.b=1 --json | jq '.runs | length')"
expect_eq "runs with seed >= 2 that succeeded" 2 \
  "$(H runs --where 'seed>=2' --status succeeded --json | jq '.runs | length')"
RUNS=$(H runs known_values) || fail "runs known_values failed"
grep -q "seed" <<<"$RUNS" && grep -q "params.b" <<<"$RUNS" || fail "runs does not show the varying keys: $RUNS"
grep -q "good" <<<"$RUNS" || fail "runs does not show the tags: $RUNS"
ok "tags and notes set by id and by name; search by tag, status and config value"
H cancel experiment known_values >/dev/null || fail "cancel experiment known_values failed"
ok "cancel experiment known_values accepted"
