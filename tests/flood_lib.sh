# tests/flood_lib.sh: floods against a coordinator on loopback while its health is timed
# and its memory watched (sourced after tests/lib.sh by tests/service_attack_test.sh and
# scripts/attack-bench.sh). The coordinator is $FLOOD_URL / $FLOOD_PID, by default the
# harness's ($HL_URL / $HL_COORD_PID).

# health_times N: N health reads 50 ms apart, each a fresh curl connection; prints their
# 50th, 90th and 99th percentiles in ms.
health_times() {
  local i url=${FLOOD_URL:-$HL_URL}
  for ((i = 0; i < $1; i++)); do
    curl -s -o /dev/null -w '%{time_total}\n' --max-time 10 "$url/api/v1/health" || echo 10
    sleep 0.05
  done | sort -g | awk '
    function at(q) { i = int(NR * q + 0.5); if (i < 1) i = 1; if (i > NR) i = NR; return t[i] * 1000 }
    { t[NR] = $1 } END { printf "%.0f %.0f %.0f\n", at(0.5), at(0.9), at(0.99) }'
}

# rss_watch FILE: writes the coordinator's largest RSS (MB) seen to FILE until killed.
rss_watch() {
  local max=0 kb pid=${FLOOD_PID:-$HL_COORD_PID}
  while :; do
    kb=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || break
    (( kb / 1024 > max )) && max=$(( kb / 1024 )) && echo "$max" >"$1"
    sleep 0.1
  done
}

# flood SECONDS CLIENTS COMMAND...: CLIENTS processes run COMMAND over and over for
# SECONDS while health is timed (from the second second to two before the end); prints
# "p50_ms p90_ms p99_ms rss_mb load_average". With FLOOD_NICE=N the clients run at nice N
# (as clients on other machines would not take this one's CPU).
flood() {
  local secs=$1 clients=$2 end pids=() i times
  shift 2
  end=$(( $(date +%s) + secs ))
  for ((i = 0; i < clients; i++)); do
    (
      renice -n "${FLOOD_NICE:-0}" -p "$BASHPID" >/dev/null
      while (( $(date +%s) < end )); do "$@" >/dev/null 2>&1; done
    ) &
    pids+=($!)
  done
  echo 0 >"$HL_TMP/rss"
  rss_watch "$HL_TMP/rss" &
  local watch=$!
  sleep 1
  times=$(health_times $(( (secs - 2) * 10 )))
  (( ${#pids[@]} )) && wait "${pids[@]}"
  kill "$watch" 2>/dev/null
  echo "$times $(cat "$HL_TMP/rss") $(cut -d' ' -f1 /proc/loadavg)"
}

# get URL [CURL ARGS...]: one GET whose answer is dropped (a flood's client).
get() { curl -s -o /dev/null --max-time 60 "$@"; }

# post_json URL BODY_FILE [CURL ARGS...]: one JSON POST whose answer is dropped.
post_json() {
  local url=$1 body=$2
  shift 2
  curl -s -o /dev/null --max-time 60 -X POST -H 'Content-Type: application/json' \
    --data-binary @"$body" "$@" "$url"
}

# trickle N SECONDS PORT: N connections each send a POST head announcing 100 bytes, then
# one byte a second for SECONDS (run it in the background); writes how many opened to
# $HL_TMP/trickle.opened.
trickle() {
  local n=$1 secs=$2 port=$3 fds=() i s fd
  for ((i = 0; i < n; i++)); do
    exec {fd}<>"/dev/tcp/127.0.0.1/$port" || break
    printf 'POST /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{' >&$fd
    fds+=($fd)
  done
  echo "$i" >"$HL_TMP/trickle.opened"
  for ((s = 0; s < secs; s++)); do
    for fd in "${fds[@]}"; do printf ' ' >&$fd 2>/dev/null; done
    sleep 1
  done
}

# glob_row_json FILE: writes the body of a query whose one row holds 100 GLOB calls over
# 256 KiB strings (each about a second inside one SQLite step).
glob_row_json() {
  local globs
  globs=$(for i in $(seq 10 109); do
    printf "%sprintf('%%.*c', 262000, 'a') GLOB '*%s%db'" "$([[ $i == 10 ]] || echo ', ')" \
      "$(printf '[a]%.0s' $(seq 330))" "$i"
  done)
  jq -n --arg s "SELECT $globs" '{sql: $s}' >"$1"
}
