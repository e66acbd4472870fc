#!/usr/bin/env bash
# System test: the README and the docs say what the code does.
# - every `build/headlab CMD` the README shows is a command that answers --help;
# - its `submit experiments/demo.jsonc --set ...` example expands (a dry run);
# - every grid under experiments/ expands;
# - shell blocks hold shell, not another tool's call syntax (`run(command=...)`);
# - advice to listen on 0.0.0.0 comes with the read-token rule;
# - every file the README names exists; the design is in docs/DESIGN.md and every
#   reference to it says so.
source "$(dirname "$0")/lib.sh"

README=$HEADLAB_SOURCE_DIR/README.md
cd "$HEADLAB_SOURCE_DIR" || fail "no source dir"

say "the README's commands exist"
mapfile -t CMDS < <(grep -oE '(^|[^=])build/headlab [a-z-]+' "$README" | awk '{print $NF}' | sort -u)
(( ${#CMDS[@]} >= 10 )) || fail "found only ${#CMDS[@]} headlab commands in the README"
for c in "${CMDS[@]}"; do
  "$HEADLAB_BIN" "$c" --help >/dev/null 2>&1 || fail "README shows 'headlab $c', which does not answer --help"
done
ok "${#CMDS[@]} commands: ${CMDS[*]}"

say "the README's --set example expands"
SETS=$(grep -oE 'submit experiments/demo\.jsonc (--set [^ ]+)' "$README" | head -1 | awk '{print $3, $4}')
[[ -n "$SETS" ]] || fail "the README shows no submit ... --set example"
# shellcheck disable=SC2086
OUT=$("$HEADLAB_BIN" submit experiments/demo.jsonc $SETS --dry-run --json 2>&1) ||
  fail "README example 'submit experiments/demo.jsonc $SETS' fails: $OUT"
ok "submit experiments/demo.jsonc $SETS expands to $(jq -r .runs <<<"$OUT") runs"

say "every grid in experiments/ expands"
n=0
while IFS= read -r g; do
  [[ "$g" == experiments/tests/bad_* ]] && continue
  # A continuation grid gets the parent its header asks for (as common/grid_test.cc does).
  sets=()
  if grep -q 'parent.experiment' "$g"; then sets+=(--set parent.experiment=1)
  elif grep -q '"parent.run"' "$g"; then sets+=(--set parent.run=1,2); fi
  grep -q -- '--set time_match.experiment' "$g" && sets+=(--set time_match.experiment=2)
  "$HEADLAB_BIN" submit "$g" "${sets[@]}" --dry-run --json >/dev/null 2>"$HL_TMP/err" ||
    fail "$g: $(cat "$HL_TMP/err")"
  n=$((n + 1))
done < <(find experiments -name '*.jsonc' | sort)
ok "$n grids expand"

say "shell blocks hold shell; 0.0.0.0 comes with the read-token rule"
if grep -nE 'run\(command=|carry=\[' "$README"; then fail "the README shows a call syntax no shell runs"; fi
while IFS= read -r line; do
  n=${line%%:*}
  # The paragraph around the advice must say that reads need a token beyond loopback.
  sed -n "$((n > 6 ? n - 6 : 1)),$((n + 8))p" "$README" | grep -q -- '--reads' ||
    fail "README line $n suggests listening on 0.0.0.0 without the read-token rule (--reads)"
done < <(grep -n '0\.0\.0\.0' "$README")
for flag in --reads --read-token-file; do
  "$HEADLAB_BIN" coordinator --help 2>&1 | grep -q -- "$flag" ||
    fail "the README tells of 'coordinator $flag', which 'headlab coordinator --help' does not list"
done
ok "no foreign call syntax; every 0.0.0.0 comes with --reads, which the coordinator has"

say "files the README names exist"
missing=()
while IFS= read -r f; do
  [[ -e "$f" ]] || compgen -G "$f" >/dev/null || missing+=("$f")
done < <(grep -oE '(experiments|schema|docs|scripts|tests|worker|python|dashboards|common|coordinator|cli)/[A-Za-z0-9_./*-]+\.(jsonc|md|sh|py|h|sql)' "$README" | sort -u)
(( ${#missing[@]} == 0 )) || fail "the README names files that do not exist: ${missing[*]}"
ok "every named file exists"

say "the design is in docs/DESIGN.md and every reference points there"
[[ -s docs/DESIGN.md ]] || fail "docs/DESIGN.md is missing"
SRC_FILES=(grep -rIn --exclude-dir=.git --exclude-dir=.headlab --exclude-dir='build*' --exclude-dir=node_modules
           --exclude-dir=dist --exclude-dir=logs --exclude=DESIGN.md --exclude=docs_test.sh)
BAD=$("${SRC_FILES[@]}" -E '(^|[^/A-Za-z_])DESIGN\.md' . || true)
[[ -z "$BAD" ]] || fail "references to DESIGN.md outside docs/: $BAD"
REFS=$("${SRC_FILES[@]}" 'docs/DESIGN.md' . | wc -l)
ok "docs/DESIGN.md exists; $REFS references point at it"
