#!/usr/bin/env bash
# System test: AoH through the service on CPU. A tiny parent
# (experiments/aoh/parent_cpu.jsonc, shrunk with --set) trains; the AoH arm grid
# (experiments/aoh/sparsity_cpu.jsonc, the same shrink) continues it with zero further
# updates, so every arm labels the SAME weights: full attention, AoH at 0.25 / 0.5 / 0.75,
# AoH-RoPE, Random_avg and Reverse. `headlab results --json` must show per-arm passkey
# accuracy, perplexity (eval.ppl and the decoder's aoh.ppl) and KV bytes, with KV bytes
# falling as sparsity rises; the latency rows ran and name their device; the head maps
# reached the head_maps table.
source "$(dirname "$0")/lib.sh"

DIR=$HEADLAB_SOURCE_DIR/experiments/aoh
# Tiny shape: 2 layers x 4 heads, width 32, context 64; streaming heads keep 4 + 16.
SHRINK=(--set model.width=32 --set model.context=64 --set train.steps=20
        --set train.batch_size=4 --set train.warmup_steps=2 --set train.eval_batches=2)
# (--set splits on commas: a JSON string literal sets one list value.)
ARM_SHRINK=("${SHRINK[@]}" --set aoh.recent=16 --set aoh.prefill_chunk=32
            --set 'aoh.passkey_lengths="128"' --set 'aoh.passkey_depths="0.5"'
            --set aoh.passkey_samples=2 --set 'aoh.bench_contexts="64"'
            --set aoh.bench_decode_tokens=4 --set aoh.bench_repeats=1
            --set aoh.rope_max_distance=64)

start_cluster 2

say "submit the parent"
PEXP=$(submit "$DIR/parent_cpu.jsonc" "${SHRINK[@]}" --set seed=1) || exit 1
PARENT=$(db "SELECT id FROM runs WHERE experiment_id = $PEXP")
say "submit the AoH arms continuing parent $PARENT with zero further updates"
EXP=$(submit "$DIR/sparsity_cpu.jsonc" "${ARM_SHRINK[@]}" --set "parent.run=$PARENT") || exit 1
expect_eq "arm runs" 9 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"
wait_grid "$PEXP" 90
wait_grid "$EXP" 150
check_one_success_per_run "$EXP" 9
expect_eq "arm runs that made a training update" 0 "$(db "
  SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id
  WHERE r.experiment_id = $EXP AND m.key = 'train.loss'")"

say "headlab results $EXP"
hl results "$EXP" || fail "headlab results $EXP exited $?"
RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
val() {  # val ARM METRIC: the arm's mean of METRIC, or null
  jq -r --arg a "$1" --arg m "$2" '.arms[] | select(.arm == $a) | .metrics[$m].mean // null' <<<"$RES"
}
ARMS='["full","aoh_25","aoh_50","aoh_75","aoh_rope_50","random_50","random_75","reverse_50","reverse_75"]'
METRICS='["aoh.passkey_acc","eval.ppl","aoh.ppl","aoh.kv_bytes","aoh.bench.prefill_s","aoh.bench.decode_ms_per_token"]'
MISSING=$(jq -r --argjson arms "$ARMS" --argjson ms "$METRICS" '
  [$arms[] as $a | $ms[] as $m
   | select(([.arms[] | select(.arm == $a) | .metrics[$m].mean | numbers] | length) != 1)
   | "\($a):\($m)"] | join(" ")' <<<"$RES")
[[ -z "$MISSING" ]] || fail "arm metrics missing from the results: $MISSING"
ok "all 9 arms show passkey accuracy, eval.ppl, aoh.ppl, KV bytes and bench latency"
awk -v f="$(val full aoh.kv_bytes)" -v a="$(val aoh_25 aoh.kv_bytes)" \
    -v b="$(val aoh_50 aoh.kv_bytes)" -v c="$(val aoh_75 aoh.kv_bytes)" \
    'BEGIN { exit !(f > a && a > b && b > c) }' || fail "KV bytes do not fall as sparsity rises: $RES"
ok "KV bytes fall: full $(val full aoh.kv_bytes) > 0.25 > 0.5 > 0.75 $(val aoh_75 aoh.kv_bytes)"
expect_eq "KV bytes of Reverse 0.75 (same counts as AoH 0.75)" "$(val aoh_75 aoh.kv_bytes)" "$(val reverse_75 aoh.kv_bytes)"
expect_eq "retrieval heads at 0.75 (1 of 4 per layer)" 2 "$(val aoh_75 aoh.retrieval_heads)"
[[ "$(val aoh_rope_50 aoh.rope_spearman)" != null ]] || fail "AoH-RoPE has no aoh.rope_spearman"
ok "AoH-RoPE reports the Table 6 Spearman"
# Arms differ only in AoH: the full-attention arm's decoder perplexity is the parent's.
awk -v a="$(val full aoh.ppl)" -v b="$(val full eval.ppl)" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3 * b) }' \
  || fail "full arm: decoder ppl $(val full aoh.ppl) != loop ppl $(val full eval.ppl)"
ok "full attention through the streaming decoder = the training loop's eval"
jq -e '.comparisons[] | select(.name == "AoH 0.5 vs full (KV bytes)") | .mean < 1' <<<"$RES" >/dev/null \
  || fail "no KV-bytes ratio comparison below 1: $RES"
ok "paired comparisons present"

say "head maps, bench device labels"
expect_eq "runs with head maps (all but full)" 8 "$(db "
  SELECT count(DISTINCT h.run_id) FROM head_maps h JOIN runs r ON r.id = h.run_id
  WHERE r.experiment_id = $EXP")"
expect_eq "head map rows of aoh_75 (2 layers x 4 heads)" "8|2|6" "$(db "
  SELECT count(*), sum(h.role = 'retrieval'), sum(h.role = 'streaming' AND h.window = 16)
  FROM head_maps h JOIN runs r ON r.id = h.run_id WHERE r.experiment_id = $EXP AND r.arm = 'aoh_75'")"
expect_eq "head map rows with an effective-rank score" 0 "$(db "
  SELECT count(*) FROM head_maps h JOIN runs r ON r.id = h.run_id
  WHERE r.experiment_id = $EXP AND (h.score IS NULL OR h.score <= 0)")"
expect_eq "attempts whose provenance labels the bench device" 9 "$(db "
  SELECT count(DISTINCT p.run_id) FROM provenance p JOIN runs r ON r.id = p.run_id
  WHERE r.experiment_id = $EXP AND json_extract(p.fields_json, '$.aoh_bench_device') LIKE 'cpu (%'")"
n=0
while IFS= read -r path; do
  jq -e 'length == 1 and all(.[]; .device | startswith("cpu"))' "$path" >/dev/null \
    || fail "bench artifact $path has no device-labelled rows: $(cat "$path")"
  n=$((n + 1))
done < <(db "SELECT k.path FROM artifacts k JOIN runs r ON r.id = k.run_id
             WHERE r.experiment_id = $EXP AND k.kind = 'aoh_bench'")
expect_eq "aoh_bench artifacts with device-labelled rows" 9 "$n"
