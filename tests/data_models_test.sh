#!/usr/bin/env bash
# System test (README, "Data and pretrained models"): real data and imported models through the service on CPU.
#  1. `headlab data prepare` turns stdin and a folder into shards (`data inspect` agrees);
#     a tiny run trains on them and its provenance records the tokenizer and corpus hashes.
#  2. A truncated shard stops a run before any step, naming the file.
#  3. A tiny Llama-shaped checkpoint (tests/make_tiny_checkpoint.py: random weights,
#     GPT-2's tokenizer) gets the AoH arm set with no training
#     (experiments/aoh/pretrained_cpu.jsonc: full, AoH, AoH-RoPE, Random, Reverse) on the
#     default corpus: every arm succeeds with perplexity, passkey accuracy and KV bytes, and
#     provenance names the checkpoint's hash.
#  4. The same checkpoint on byte-level data is a tokenizer mismatch before any step.
source "$(dirname "$0")/lib.sh"

BUILD=$(dirname "$HEADLAB_BIN")
GPT2=$BUILD/data/gpt2
[[ -f $BUILD/data/english-gpt2/meta.json && -f $GPT2/encoder.json ]] ||
  fail "the default corpus is not prepared in $BUILD/data (run make, or scripts/fetch-data.sh $BUILD)"

say "prepare shards from stdin and from a folder"
mkdir -p "$HL_TMP/text"
for i in $(seq 1 30); do
  printf 'Document %d. The quick brown fox jumps over the lazy dog %d times.\n' "$i" "$i" > "$HL_TMP/text/doc$i.txt"
done
cat "$HEADLAB_SOURCE_DIR"/README.md | "$HEADLAB_BIN" data prepare - --out "$HL_TMP/stdin-shards" --quiet \
  > "$HL_TMP/prep.out" || fail "data prepare from stdin exited $?"
expect_eq "stdin shards: documents, split" "1|tokens" \
  "$("$HEADLAB_BIN" data inspect "$HL_TMP/stdin-shards" --json | jq -r '"\(.corpus.documents)|\(.split.by)"')"
"$HEADLAB_BIN" data prepare "$HL_TMP/text" --tokenizer "$GPT2" --out "$HL_TMP/shards" --val-fraction 0.3 \
  --json > "$HL_TMP/meta.json" 2> "$HL_TMP/prep.err" || fail "data prepare exited $?: $(cat "$HL_TMP/prep.err")"
grep -q "100%" "$HL_TMP/prep.err" || fail "no progress bar on stderr: $(cat "$HL_TMP/prep.err")"
expect_eq "folder shards: documents, tokenizer, eot" "30|gpt2-bpe|50256" \
  "$(jq -r '"\(.corpus.documents)|\(.tokenizer.kind)|\(.tokenizer.eot)"' "$HL_TMP/meta.json")"
"$HEADLAB_BIN" data prepare "$HL_TMP/text" --out "$HL_TMP/shards" --quiet 2> "$HL_TMP/again.err"
expect_eq "prepare into existing shards without --force (exit)" 2 "$?"

start_cluster 1
TINY=(--set model.layers=1 --set model.width=32 --set model.heads=2 --set model.context=16
      --set model.vocab=50304 --set train.steps=3 --set train.batch_size=2 --set train.eval_batches=1
      --set train.warmup_steps=1 --set train.checkpoint_every=0)
say "train on the prepared shards"
EXP=$(submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" "${TINY[@]}" --set seed=1 \
      --set data.source=shards --set "data.path=$HL_TMP/shards") || exit 1
wait_grid "$EXP" 120
RUNS=$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")
check_one_success_per_run "$EXP" "$RUNS"
expect_eq "provenance: tokenizer and corpus hashes" \
  "$(jq -r '"\(.tokenizer.sha256)|\(.corpus.sha256)"' "$HL_TMP/meta.json")" "$(db "
  SELECT json_extract(p.fields_json, '$.dataset_tokenizer_sha256') || '|' ||
         json_extract(p.fields_json, '$.corpus_sha256')
  FROM provenance p JOIN runs r ON r.id = p.run_id WHERE r.experiment_id = $EXP LIMIT 1")"

say "a truncated shard fails the run before any step, naming the file"
cp -r "$HL_TMP/shards" "$HL_TMP/cut"
truncate -s -2 "$HL_TMP/cut/val.bin"
EXP=$(submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" "${TINY[@]}" --set seed=2 \
      --set data.source=shards --set "data.path=$HL_TMP/cut") || exit 1
wait_grid "$EXP" 120
expect_eq "runs failed" "$RUNS" "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP AND status = 'failed'")"
ERR=$(db "SELECT a.error || ' ' || a.stderr_tail FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.experiment_id = $EXP LIMIT 1")
[[ "$ERR" == *"$HL_TMP/cut/val.bin:"*"meta.json promises"*"truncated"* ]] || fail "attempt error: $ERR"
ok "the error names the truncated file: ${ERR:0:160}"
expect_eq "training metrics of the failed runs" 0 "$(db "
  SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id WHERE r.experiment_id = $EXP")"

say "AoH arm set on an imported checkpoint, no training"
/usr/bin/python3 "$HEADLAB_SOURCE_DIR/tests/make_tiny_checkpoint.py" "$HL_TMP/tiny" "$GPT2" ||
  fail "make_tiny_checkpoint.py exited $?"
# max_attempts 2 (the grid file has 1): an attempt lost to a stall of the loaded machine (the
# worker silent for the 3 s liveness window; seen once on a fresh clone's `make test`) is
# run again; a real failure fails both.
sed 's/"max_attempts": 1/"max_attempts": 2/' "$HEADLAB_SOURCE_DIR/experiments/aoh/pretrained_cpu.jsonc" \
  > "$HL_TMP/pretrained_cpu.jsonc"
grep -q '"max_attempts": 2' "$HL_TMP/pretrained_cpu.jsonc" || fail "pretrained_cpu.jsonc: no max_attempts to raise"
EXP=$(submit "$HL_TMP/pretrained_cpu.jsonc" --set "model.init_from=$HL_TMP/tiny") || exit 1
wait_grid "$EXP" 300
check_one_success_per_run "$EXP" 5
expect_eq "arm runs that made a training update" 0 "$(db "
  SELECT count(*) FROM metrics m JOIN runs r ON r.id = m.run_id
  WHERE r.experiment_id = $EXP AND m.key = 'train.loss'")"
expect_eq "runs whose provenance names the checkpoint and its hash" 5 "$(db "
  SELECT count(DISTINCT p.run_id) FROM provenance p JOIN runs r ON r.id = p.run_id
  WHERE r.experiment_id = $EXP AND json_extract(p.fields_json, '$.init_from') = '$HL_TMP/tiny'
    AND length(json_extract(p.fields_json, '$.init_from_sha256')) = 64
    AND json_extract(p.fields_json, '$.init_from_family') = 'llama'")"
RES=$(hl results "$EXP" --json) || fail "headlab results $EXP --json exited $?"
MISSING=$(jq -r '[.arms[] as $a | ("eval.ppl", "aoh.ppl", "aoh.passkey_acc", "aoh.kv_bytes") as $m
  | select(($a.metrics[$m].mean | type) != "number") | "\($a.arm):\($m)"] | join(" ")' <<<"$RES")
[[ -z "$MISSING" ]] || fail "arm metrics missing: $MISSING"
ok "every arm reports eval.ppl, aoh.ppl, aoh.passkey_acc, aoh.kv_bytes"
# Random weights over GPT-2's 50257 tokens: perplexity near the vocabulary size.
awk -v p="$(jq -r '.arms[] | select(.arm == "full") | .metrics["eval.ppl"].mean' <<<"$RES")" \
  'BEGIN { exit !(p > 5000 && p < 500000) }' || fail "full-attention perplexity implausible: $RES"
ok "full-attention perplexity of the random checkpoint is of the vocabulary's order"
expect_eq "head map rows of aoh_50 (2 layers x 4 heads, half retrieval)" "8|4" "$(db "
  SELECT count(*), sum(h.role = 'retrieval') FROM head_maps h JOIN runs r ON r.id = h.run_id
  WHERE r.experiment_id = $EXP AND r.arm = 'aoh_50'")"

say "the checkpoint on byte-level data is a tokenizer mismatch"
EXP=$(submit "$HEADLAB_SOURCE_DIR/experiments/aoh/pretrained_cpu.jsonc" --set "model.init_from=$HL_TMP/tiny" \
      --set data.source=builtin) || exit 1
wait_grid "$EXP" 120
ERR=$(db "SELECT a.error || ' ' || a.stderr_tail FROM attempts a JOIN runs r ON r.id = a.run_id WHERE r.experiment_id = $EXP LIMIT 1")
[[ "$ERR" == *"tokenizer mismatch"*"byte-level"*"$HL_TMP/tiny"* ]] || fail "attempt error: $ERR"
ok "the error names both tokenizers: ${ERR:0:200}"
say "passed"
