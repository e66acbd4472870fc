#!/usr/bin/env bash
# Measures the noise of a zero-replacement control on this machine: runs a small timing
# grid (default experiments/measure/saf_update_small.jsonc) with REPS ABBA reps through a
# real coordinator and one worker, and prints each rep's t(a_ordinary) / t(z_control) from
# the legs' own summaries, then the median and the largest |ratio - 1|. The CPU grids'
# pair.tolerance is chosen from this (docs/REPRODUCTIONS.md, "CPU timing tolerance").
#
#   HEADLAB_BIN=build/headlab scripts/control_noise.sh [GRID] [REPS] [METRIC] [--set K=V ...]
source "$(dirname "$0")/../tests/lib.sh"

GRID=${1:-$HEADLAB_SOURCE_DIR/experiments/measure/saf_update_small.jsonc}
REPS=${2:-8}
METRIC=${3:-bench.update_ms}
shift $(( $# < 3 ? $# : 3 ))
start_cluster 1
EXP=$(submit "$GRID" --set "pair.rep=$(seq -s, 0 $((REPS - 1)))" "$@") || exit 1
wait_grid "$EXP" $((120 + 60 * REPS))
say "t(a_ordinary) / t(z_control) per rep ($METRIC)"
RATIOS=$(db "SELECT json_extract(ra.config_json, '\$.pair.rep') || ' ' || (sa.value / sz.value)
  FROM runs ra JOIN summaries sa ON sa.run_id = ra.id AND sa.key = '$METRIC'
  JOIN runs rz ON rz.experiment_id = ra.experiment_id AND rz.arm = 'z_control'
   AND json_extract(rz.config_json, '\$.pair.rep') = json_extract(ra.config_json, '\$.pair.rep')
   AND json_extract(rz.config_json, '\$.bench.lengths') IS json_extract(ra.config_json, '\$.bench.lengths')
  JOIN summaries sz ON sz.run_id = rz.id AND sz.key = '$METRIC'
  WHERE ra.experiment_id = $EXP AND ra.arm = 'a_ordinary' ORDER BY 1")
echo "$RATIOS"
# The median over reps is what `headlab results` compares with 1 +- pair.tolerance.
sort -k2 -g <<<"$RATIOS" | awk '{ r[NR] = $2; d = $2 - 1; if (d < 0) d = -d; if (d > m) m = d }
  END { med = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2;
        printf "reps %d, median ratio %.4f, largest |ratio - 1| %.4f\n", NR, med, m }'
