#!/usr/bin/env bash
# System test (docs/DESIGN.md, "Data directory"): one coordinator per data directory, no
# start on a damaged database, and an online backup that restores.
# - A second coordinator on the same data directory exits 1 naming the first, and leaves
#   its coordinator.json and its runs alone.
# - `headlab backup` copies the database while the coordinator serves and writes.
# - Garbage over the database's last 8 KiB: the coordinator refuses to start (exit 1,
#   saying what to do) and dispatches nothing; `backup --restore` refuses while a
#   coordinator runs, puts the backup back when stopped, and the coordinator then starts
#   with every experiment of the backup.
source "$(dirname "$0")/lib.sh"

start_coordinator
EXP=$(submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" --set seed=1,2,3)
expect_eq "runs stored" 6 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"

say "a second coordinator on the same data directory"
BEFORE=$(cat "$HL_DATA/coordinator.json")
timeout 20 "$HEADLAB_BIN" coordinator --data-dir "$HL_DATA" --http "127.0.0.1:$(hl_free_port)" \
  --workers "tcp://127.0.0.1:$(hl_free_port)" >"$HL_TMP/second.out" 2>&1
expect_eq "its exit code" 1 "$?"
grep -q "another coordinator (pid $HL_COORD_PID" "$HL_TMP/second.out" ||
  fail "the second coordinator's message: $(cat "$HL_TMP/second.out")"
expect_eq "coordinator.json after it" "$BEFORE" "$(cat "$HL_DATA/coordinator.json")"
hl_health >/dev/null || fail "the first coordinator stopped answering"

say "an online backup while the coordinator writes"
pids=()
for i in 4 5 6 7 8; do
  submit "$HEADLAB_SOURCE_DIR/experiments/demo.jsonc" --set "seed=$i" >/dev/null &
  pids+=($!)
done
OUT=$("$HEADLAB_BIN" backup --data-dir "$HL_DATA" -o "$HL_TMP/backup.db") || fail "headlab backup: $OUT"
expect_eq "what it printed" "$HL_TMP/backup.db" "$OUT"
wait "${pids[@]}"
expect_eq "the backup's integrity" ok "$(sqlite3 "$HL_TMP/backup.db" 'PRAGMA integrity_check')"
B_RUNS=$(sqlite3 "$HL_TMP/backup.db" "SELECT count(*) FROM runs")
(( B_RUNS >= 6 && B_RUNS % 2 == 0 )) || fail "the backup holds $B_RUNS runs (a torn copy?)"
ok "the backup holds $B_RUNS runs"
DEFAULT=$("$HEADLAB_BIN" backup --data-dir "$HL_DATA") || fail "headlab backup without -o"
[[ "$DEFAULT" == "$HL_DATA"/backups/headlab-*.db && -s "$DEFAULT" ]] || fail "default backup path '$DEFAULT'"
ok "default path $DEFAULT"
"$HEADLAB_BIN" backup --restore "$HL_TMP/backup.db" --data-dir "$HL_DATA" >"$HL_TMP/restore.out" 2>&1
expect_eq "restore while the coordinator runs" 1 "$?"
grep -q "another coordinator" "$HL_TMP/restore.out" || fail "restore: $(cat "$HL_TMP/restore.out")"
hl_stop_pid "$HL_COORD_PID"
HL_COORD_PID=""

say "a damaged database is refused"
SIZE=$(stat -c %s "$HL_DB")
head -c 8192 /dev/urandom | dd of="$HL_DB" bs=1 seek=$(( SIZE - 8192 )) conv=notrunc status=none
rm -f "$HL_DB-wal" "$HL_DB-shm"
timeout 60 "$HEADLAB_BIN" coordinator --data-dir "$HL_DATA" --http "127.0.0.1:$(hl_free_port)" \
  --workers "tcp://127.0.0.1:$(hl_free_port)" >"$HL_TMP/damaged.out" 2>&1
expect_eq "exit code on the damaged file" 1 "$?"
grep -q "headlab backup --restore" "$HL_TMP/damaged.out" || fail "no advice: $(cat "$HL_TMP/damaged.out")"
grep -Eq "integrity check|damaged|malformed" "$HL_TMP/damaged.out" || fail "no finding: $(cat "$HL_TMP/damaged.out")"
ok "refused: $(grep -o 'cannot start: .\{0,120\}' "$HL_TMP/damaged.out" | head -n 1)"

say "restore, then start"
OUT=$("$HEADLAB_BIN" backup --restore "$HL_TMP/backup.db" --data-dir "$HL_DATA" 2>&1) || fail "restore: $OUT"
[[ -e "$HL_DB.replaced" ]] || fail "the damaged file was not kept aside"
start_coordinator
expect_eq "runs after the restore" "$B_RUNS" "$(db "SELECT count(*) FROM runs")"
expect_eq "experiment $EXP's runs" 6 "$(db "SELECT count(*) FROM runs WHERE experiment_id = $EXP")"
expect_eq "integrity after the restore" ok "$(db 'PRAGMA integrity_check')"
OUT=$(hl runs "$EXP" --json) || fail "headlab runs after the restore"
expect_eq "runs listed over HTTP" 6 "$(jq length <<<"$OUT")"
"$HEADLAB_BIN" backup --help | grep -q -- "--restore" || fail "backup --help"
