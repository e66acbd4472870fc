#!/usr/bin/env bash
# System test (README, "Using it"): comparisons that cannot mislead and reads that need no
# daemon.
# - axes seed x params.lrate paired by seed: `results` compares within each params.lrate level,
#   never pooled; --by breaks down further, --level sets the CI (exact t quantiles);
# - a grid with several bad fields names them all; a head list outside the model fails at
#   submit; a key given twice to --set is refused;
# - --where takes spaces and suggests a mistyped key; `diff RUN RUN` names the keys;
# - `wait` shows an ETA; `results` of an experiment with no succeeded run exits 1 saying so;
#   `retry` of a succeeded run points at --rerun;
# - `up` says where the token is and how many runs its worker runs at once;
# - after `down`, `runs` and `results` read the database; a --data-dir with no coordinator
#   is not silently the default URL; a refused token says where it came from.
source "$(dirname "$0")/lib.sh"

say "up on free ports"
UP=$HL_TMP/up
hl_up_detached "$UP"
grep -qF "export HEADLAB_TOKEN=\$(cat $UP/token)" "$HL_TMP/up.out" || fail "up gave no token hint: $(cat "$HL_TMP/up.out")"
grep -q "the local worker runs 2 run(s) at once" "$HL_TMP/up.out" || fail "up did not say its slots: $(cat "$HL_TMP/up.out")"
"$HEADLAB_BIN" up --help | grep -q "default: the" || fail "up --help does not give the slots default"
ok "up names the token file and the worker's slots"
H() { "$HEADLAB_BIN" "$1" --data-dir "$UP" "${@:2}"; }

say "axes seed x params.lrate, paired by seed: one comparison per params.lrate"
# a: loss 100. b: params.lrate 1: 98 (seed 1), 96 (seed 2) -> -2 %, -4 %: mean -3, SE 1;
# params.lrate 2: 115, 73 -> +15 %, -27 %: mean -6, SE 21. Pooled it would be -4.5 over 4.
cat >"$HL_TMP/value.sh" <<'SH'
get() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$HEADLAB_CONFIG" | head -1; }
seed=$(get seed); lr=$(get lrate); b=$(get b)
v=100
if [ "$b" = 1 ]; then
  case "$lr-$seed" in 1-1) v=98 ;; 1-2) v=96 ;; 2-1) v=115 ;; *) v=73 ;; esac
fi
echo "{\"ev\":\"summary\",\"values\":{\"eval.loss\":$v}}" >&"$HEADLAB_FD"
SH
cat >"$HL_TMP/lr.json" <<JSON
{"name": "lr_strata",
 "base": {"kind": "command", "command": {"program": "$HL_TMP/value.sh", "interpreter": "sh"}},
 "axes": {"seed": [1, 2], "params.lrate": [1, 2]},
 "arms": {"a": {}, "b": {"params.b": 1}},
 "comparisons": [{"name": "dloss", "baseline": "a", "treatment": "b", "metric": "eval.loss",
                  "stat": "delta_pct"}],
 "max_attempts": 1}
JSON
H submit "$HL_TMP/lr.json" --dry-run | grep -q "note: comparisons (and arm means) are made within each level of params.lrate" ||
  fail "submit --dry-run of axes outside pair_by said nothing of it"
EXP=$(H submit "$HL_TMP/lr.json" --json | jq -r .experiment)
[[ "$EXP" =~ ^[0-9]+$ ]] || fail "submit printed no experiment id"
H wait lr_strata >"$HL_TMP/wait.out" 2>&1 || { cat "$HL_TMP/wait.out"; fail "wait lr_strata failed"; }
J=$(H results lr_strata --json) || fail "results --json failed"
expect_eq "comparisons" 2 "$(jq '.comparisons | length' <<<"$J")"
expect_eq "strata keys" '["params.lrate"]' "$(jq -c .by <<<"$J")"
expect_eq "mean at params.lrate 1" -3 "$(jq '.comparisons[] | select(.by["params.lrate"] == 1) | .mean * 1e6 | round / 1e6' <<<"$J")"
expect_eq "mean at params.lrate 2" -6 "$(jq '.comparisons[] | select(.by["params.lrate"] == 2) | .mean * 1e6 | round / 1e6' <<<"$J")"
expect_eq "pairs at params.lrate 1" 2 "$(jq '.comparisons[] | select(.by["params.lrate"] == 1) | .n' <<<"$J")"
expect_eq "arm entries (2 arms x 2 lr)" 4 "$(jq '.arms | length' <<<"$J")"
expect_eq "mean loss of b at params.lrate 2" 94 \
  "$(jq '.arms[] | select(.arm == "b" and .by["params.lrate"] == 2) | .metrics["eval.loss"].mean * 1e6 | round / 1e6' <<<"$J")"
RES=$(COLUMNS=120 H results lr_strata) || fail "results failed"
echo "$RES" | sed 's/^/    /'
grep -q "dloss \[params.lrate=1\]: b vs a" <<<"$RES" || fail "no comparison for params.lrate=1"
# t(0.975; 1) = tan(0.475 pi) = 12.7062: -3 ± 12.7062.
grep -q "mean -3 % ± 1 (SE)   95% CI \[-15.7062 %, 9.7062 %\]" <<<"$RES" || fail "wrong 95% CI at params.lrate=1"
grep -q "broken down by params.lrate" <<<"$RES" || fail "results do not say what they are broken down by"
ok "two comparisons, -3 % and -6 %, never the pooled -4.5 %"

say "--by and --level"
expect_eq "comparisons --by seed" 4 "$(H results lr_strata --by seed --json | jq '.comparisons | length')"
# t(0.995; 1) = tan(0.495 pi) = 63.6567: -3 ± 63.6567.
H results lr_strata --level 0.99 | grep -q "99% CI \[-66.6567 %, 60.6567 %\]" || fail "--level 0.99 gave no 99% CI"
OUT=$(H results lr_strata --by trian.lr 2>&1); rc=$?
expect_eq "exit of --by trian.lr" 2 "$rc"
grep -q 'did you mean "train.lr"' <<<"$OUT" || fail "--by trian.lr said: $OUT"
OUT=$(H results lr_strata --level 95 2>&1); rc=$?
expect_eq "exit of --level 95" 2 "$rc"
ok "--by seed gives 4 comparisons; --level 0.99 the 99% interval; bad ones exit 2"

say "pair lists on demand: all with per_pair=1, the first N with pair_limit=N"
API=http://127.0.0.1:$HL_UP_PORT/api/v1
LR_ID=$(curl -sf "$API/experiments" | jq -er '[.[] | select(.name == "lr_strata")][0].id') || fail "no lr_strata in $API/experiments"
ALL=$(curl -sf "$API/experiments/$LR_ID/results?per_pair=1") || fail "results?per_pair=1 failed"
expect_eq "pairs per comparison with per_pair=1" "2 2" "$(jq -r '[.comparisons[].per_pair | length] | join(" ")' <<<"$ALL")"
FEW=$(curl -sf "$API/experiments/$LR_ID/results?per_pair=1&pair_limit=1") || fail "results?pair_limit=1 failed"
expect_eq "pairs per comparison with pair_limit=1 (and n_pairs)" "1/2 1/2" \
  "$(jq -r '[.comparisons[] | "\(.per_pair | length)/\(.n_pairs)"] | join(" ")' <<<"$FEW")"
expect_eq "the first pair kept" "$(jq -c '.comparisons[0].per_pair[0]' <<<"$ALL")" "$(jq -c '.comparisons[0].per_pair[0]' <<<"$FEW")"
expect_eq "HTTP status of pair_limit=0" 400 \
  "$(curl -s -o /dev/null -w '%{http_code}' "$API/experiments/$LR_ID/results?per_pair=1&pair_limit=0")"
ok "per_pair=1 sends 2 pairs a comparison; pair_limit=1 the first and n_pairs 2"

say "runs --where with spaces; diff"
expect_eq "runs with params.lrate <= 1" 4 "$(H runs --where 'params.lrate <= 1' --json | jq '.runs | length')"
expect_eq "runs of 'params.lrate<=1; seed=1'" 2 "$(H runs --where 'params.lrate<=1; seed=1' --json | jq '.runs | length')"
OUT=$(H runs --where 'trian.lr=1' 2>&1); rc=$?
expect_eq "exit of --where trian.lr=1" 2 "$rc"
grep -q 'did you mean "train.lr"' <<<"$OUT" || fail "--where trian.lr said: $OUT"
read -r R1 R2 < <(H query "SELECT min(id), max(id) FROM runs WHERE experiment_id = $EXP" --csv | tail -1 | tr ',' ' ')
D=$(H diff "$R1" "$R2" --json) || fail "diff $R1 $R2 failed"
expect_eq "keys that differ" "params.b params.lrate seed" "$(jq -r '[.config[].key] | join(" ")' <<<"$D")"
H diff "$R1" "$R2" | grep -q "^config (3 differ)" || fail "diff prints no table"
ok "spaces in --where; diff of runs $R1 and $R2 names params.b, params.lrate, seed"

say "wait shows an ETA"
# 6 runs of 1.5 s on 2 slots: once the first have succeeded, the rest has a rate.
cat >"$HL_TMP/slow.json" <<JSON
{"name": "slow", "base": {"kind": "command", "command": {"program": "/bin/sleep", "args": "1.5"}},
 "axes": {"seed": [1, 2, 3, 4, 5, 6]}, "max_attempts": 1}
JSON
H submit "$HL_TMP/slow.json" >/dev/null || fail "submit slow failed"
H wait slow >"$HL_TMP/wait.out" 2>&1 || { cat "$HL_TMP/wait.out"; fail "wait slow failed"; }
grep -q "ETA ≈ [0-9]" "$HL_TMP/wait.out" || fail "wait showed no ETA: $(cat "$HL_TMP/wait.out")"
ok "$(grep -m1 'ETA' "$HL_TMP/wait.out")"

say "bad grids: every problem at once; head lists at submit; --set twice"
cat >"$HL_TMP/bad.json" <<'JSON'
{"name": "bad", "base": {"train": {"lr": 2, "device": "gpu"}, "model": {"heds": 2}},
 "max_attempts": 0,}
JSON
OUT=$(H submit "$HL_TMP/bad.json" --dry-run 2>&1); rc=$?
expect_eq "exit of a trailing comma" 2 "$rc"
grep -q "a trailing comma before '}'" <<<"$OUT" || fail "a trailing comma was reported as: $OUT"
sed -i 's/0,}/0}/' "$HL_TMP/bad.json"
OUT=$(H submit "$HL_TMP/bad.json" --dry-run 2>&1); rc=$?
expect_eq "exit of a grid with 4 bad fields" 2 "$rc"
for want in "4 problems" '$.base.model.heds' '$.base.train.lr' '$.max_attempts' 'did you mean "cuda"'; do
  grep -qF "$want" <<<"$OUT" || fail "the bad grid's message lacks $want: $OUT"
done
DEMO=$HEADLAB_SOURCE_DIR/experiments/demo.jsonc
OUT=$("$HEADLAB_BIN" submit "$DEMO" --dry-run --set model.head_modes=9.9=local:16 2>&1); rc=$?
expect_eq "exit of head_modes 9.9 on a 2-layer model" 2 "$rc"
grep -q "head 9.9 is outside the model's 2 x" <<<"$OUT" || fail "head_modes 9.9 said: $OUT"
OUT=$("$HEADLAB_BIN" submit "$DEMO" --dry-run --set model.head_modes=garbage 2>&1); rc=$?
expect_eq "exit of head_modes garbage" 2 "$rc"
"$HEADLAB_BIN" submit "$DEMO" --dry-run --json \
  --set 'model.head_modes=["0.0=local:16,1.*=pruned", ""]' >"$HL_TMP/hm.json" 2>&1 ||
  fail "a JSON list of head modes failed: $(cat "$HL_TMP/hm.json")"
expect_eq "runs of 2 head-mode values" 8 "$(jq .runs "$HL_TMP/hm.json")"
OUT=$("$HEADLAB_BIN" submit "$DEMO" --dry-run --set seed=1 --set seed=2 2>&1); rc=$?
expect_eq "exit of --set seed twice" 2 "$rc"
ok "all problems named; head lists checked at submit; --set values with commas; no silent last --set"

say "no succeeded run: results exits 1 and says why; retry of a succeeded run"
cat >"$HL_TMP/fail.json" <<JSON
{"name": "all_fail", "base": {"kind": "command", "command": {"program": "/bin/false"}},
 "axes": {"seed": [1, 2]}, "arms": {"a": {}, "b": {"params.b": 1}},
 "comparisons": [{"name": "x", "baseline": "a", "treatment": "b", "metric": "m", "stat": "diff"}],
 "max_attempts": 1}
JSON
H submit "$HL_TMP/fail.json" >/dev/null || fail "submit all_fail failed"
H wait all_fail --quiet >/dev/null 2>&1
OUT=$(H results all_fail 2>&1); rc=$?
expect_eq "exit of results with no succeeded run" 1 "$rc"
grep -q "has no succeeded run (4 failed)" <<<"$OUT" || fail "results of all_fail said: $OUT"
OUT=$(H retry "$R1" 2>&1); rc=$?
expect_eq "exit of retry of a succeeded run" 1 "$rc"
grep -q -- "--rerun" <<<"$OUT" || fail "retry of a succeeded run said: $OUT"
ok "results exit 1 with the statuses; retry points at --rerun"

say "a refused token says where it came from"
echo wrong-token >"$HL_TMP/bad.token"
OUT=$(H tag run "$R1" x --token-file "$HL_TMP/bad.token" 2>&1); rc=$?
grep -q "token from --token-file $HL_TMP/bad.token" <<<"$OUT" || fail "a refused token said: $OUT"
ok "401 names --token-file"

say "after down: reads from the database; a --data-dir with no coordinator"
"$HEADLAB_BIN" down --data-dir "$UP" >/dev/null || fail "down failed"
OUT=$(H runs lr_strata --json 2>"$HL_TMP/off.err") || fail "runs after down failed: $(cat "$HL_TMP/off.err")"
expect_eq "runs read after down" 8 "$(jq length <<<"$OUT")"
grep -q "reading $UP/headlab.db directly" "$HL_TMP/off.err" || fail "runs after down did not say where it read: $(cat "$HL_TMP/off.err")"
expect_eq "comparisons read after down" 2 "$(H results lr_strata --json 2>/dev/null | jq '.comparisons | length')"
OUT=$(H submit "$HL_TMP/lr.json" 2>&1); rc=$?
(( rc != 0 )) || fail "submit after down succeeded"
grep -q "this needs one" <<<"$OUT" || fail "submit after down said: $OUT"
mkdir -p "$HL_TMP/empty"
OUT=$("$HEADLAB_BIN" runs --data-dir "$HL_TMP/empty" 2>&1); rc=$?
expect_eq "exit of runs --data-dir EMPTY" 1 "$rc"
grep -q "$HL_TMP/empty/coordinator.json does not exist" <<<"$OUT" || fail "runs --data-dir EMPTY said: $OUT"
ok "reads work after down; writes say they need a coordinator; an empty --data-dir is not the default URL"
