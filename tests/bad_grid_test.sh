#!/usr/bin/env bash
# System test (schema/grid.md): every bad-grid case makes `headlab submit` exit 2 with a
# message naming the file and the JSON path, and leaves headlab.db byte-for-byte unchanged
# (the coordinator is running and receives each submission).
source "$(dirname "$0")/lib.sh"

BAD=$HEADLAB_SOURCE_DIR/tests/data/bad
start_coordinator
# Let the coordinator finish its start-up writes before the fingerprint is taken.
sleep 1
BEFORE=$(db_fingerprint)
say "database fingerprint before: $(echo $BEFORE)"

# check_bad FILE NEEDLE...: submit FILE (plus the args in EXTRA); expect exit 2 and each
# NEEDLE in the message.
EXTRA=()
check_bad() {
  local file=$1 rc out needle
  shift
  out=$(hl submit "$file" "${EXTRA[@]}" 2>&1)
  rc=$?
  say "submit $(basename "$file") -> exit $rc: $out"
  (( rc == 2 )) || fail "headlab submit $file: expected exit 2, got $rc"
  for needle in "$@"; do
    grep -qF -- "$needle" <<<"$out" || fail "message for $(basename "$file") does not contain '$needle'"
  done
  ok "$(basename "$file"): exit 2, message names: $*"
}

check_bad "$BAD/unknown_key.jsonc"  unknown_key.jsonc  '$.base.model.heds'
check_bad "$BAD/wrong_type.jsonc"   wrong_type.jsonc   '$.base.model.layers'
check_bad "$BAD/out_of_range.jsonc" out_of_range.jsonc '$.base.model.layers'
check_bad "$BAD/empty_axis.jsonc"   empty_axis.jsonc   '$.axes.train.lr'
check_bad "$BAD/unknown_arm.jsonc"  unknown_arm.jsonc  '$.comparisons[0].treatment' saf
# Unreadable files: one that does not exist, one that is a directory.
check_bad "$HL_TMP/no_such_grid.jsonc" no_such_grid.jsonc
mkdir -p "$HL_TMP/a_directory.jsonc"
check_bad "$HL_TMP/a_directory.jsonc" a_directory.jsonc
# Not JSON at all.
printf '{"name": "broken", "base": {\n' >"$HL_TMP/truncated.jsonc"
check_bad "$HL_TMP/truncated.jsonc" truncated.jsonc
# The same errors through --set: a bad value for a known key, and an unknown key.
EXTRA=(--set model.layers=0)
check_bad "$HEADLAB_SOURCE_DIR/tests/data/six_runs.jsonc" model.layers
EXTRA=(--set model.heds=2)
check_bad "$HEADLAB_SOURCE_DIR/tests/data/six_runs.jsonc" model.heds
EXTRA=()

# Hostile files: bytes that are not UTF-8 (in a string, in a comment, binary
# garbage), a number beyond the double range, and nesting 100,000 deep. Each is bad input
# naming the file, submitted and with --dry-run (which expands locally: before the fix the
# CLI aborted or segfaulted on these).
printf '{"name": "caf\xe9", "base": {}}' >"$HL_TMP/latin1.jsonc"
printf '{"name": "x", // \xff\xfe\n "base": {}}' >"$HL_TMP/comment_bytes.jsonc"
printf '%b' "$(printf '\\x%02x' {0..255})" >"$HL_TMP/garbage.jsonc"
printf '{"name": "huge", "base": {"train": {"lr": 1e400}}}' >"$HL_TMP/huge_number.jsonc"
{ printf '{"name": "deep", "base": {"model": '; head -c 100000 /dev/zero | tr '\0' '['
  head -c 100000 /dev/zero | tr '\0' ']'; printf '}}'; } >"$HL_TMP/deep.jsonc"
for mode in "" --dry-run; do
  EXTRA=(${mode})
  check_bad "$HL_TMP/latin1.jsonc" latin1.jsonc 'byte 13 (line 1): not valid UTF-8'
  check_bad "$HL_TMP/comment_bytes.jsonc" comment_bytes.jsonc 'byte 17 (line 1): not valid UTF-8'
  check_bad "$HL_TMP/garbage.jsonc" garbage.jsonc 'byte 128 (line 2): not valid UTF-8'
  check_bad "$HL_TMP/huge_number.jsonc" huge_number.jsonc 'number overflow' 1e400
  check_bad "$HL_TMP/deep.jsonc" deep.jsonc 'nested deeper than 64 levels'
done
EXTRA=()

# The same grids straight at the HTTP API: 400 with the path in the error, nothing stored.
TOKEN=$(cat "$HL_DATA/token") || fail "no token file $HL_DATA/token"
BODY=$(jq -n --rawfile t "$BAD/wrong_type.jsonc" '{file: "wrong_type.jsonc", text: $t, sets: []}')
CODE=$(curl -s -o "$HL_TMP/post.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' --data-binary "$BODY" "$HL_URL/api/v1/experiments")
expect_eq "POST /api/v1/experiments with a bad grid: HTTP status" 400 "$CODE"
jq -e '.error | contains("$.base.model.layers")' "$HL_TMP/post.out" >/dev/null ||
  fail "the 400 body does not name \$.base.model.layers: $(cat "$HL_TMP/post.out")"
ok "400 body names the field"

AFTER=$(db_fingerprint)
say "database fingerprint after:  $(echo $AFTER)"
expect_eq "database files byte-for-byte" "$BEFORE" "$AFTER"
expect_eq "experiments listed by the API" 0 "$(curl -sf "$HL_URL/api/v1/experiments" | jq length)"
expect_eq "runs in the database" 0 "$(db "SELECT count(*) FROM runs")"
