#!/usr/bin/env bash
# Probe PARAMS variants of cuda_blocked in groups, adopt each group's winner, check and time the result,
# all in one device call (lab; device starts are scarce):
#   bash lab/probe_adopt.sh SPECS 'SHAPES|CHECKS|base:|name:KEY=V[,KEY=V]|...' ['SHAPES|...' ...]
# e.g. bash lab/probe_adopt.sh .probe/gpumode/w1024.txt '60x1024|rankdef mixed|base:|ns64:narrow_cols_le1024=64'
# 1. each group: lab/blocked_probe.py at its shapes (space-separated), every variant verified first on
#    its check profiles, 3 rounds x 5 calls, device time per kernel (--profile), into $OUT/probe_N.txt;
# 2. lab/pick_winners.py: per group, the candidate ADOPT_BY (default 0.015) faster than base at every
#    shape of the group; the winners are adopted together on the device's copy ($OUT/cuda_blocked_adopted.py);
# 3. qrv2-tests of the file as it then is, and GPU MODE's eval.py (leaderboard, seed 9137) on SPECS
#    ('-': none).
# Each group's probe has PROBE_S seconds (default 170).
set -u
if [ $# -lt 2 ]; then
  echo "usage: bash lab/probe_adopt.sh SPECS 'SHAPES|CHECKS|base:|name:KEY=V,...' [...]" >&2
  exit 2
fi
specs=$1
shift
. lab/device_common.sh
stamp start
build_extensions kernels/families/files/cuda_blocked.py
i=0
probes=()
for group in "$@"; do
  IFS='|' read -r -a parts <<< "$group"
  args=()
  for s in ${parts[0]}; do args+=(--shape "$s"); done
  for c in ${parts[1]}; do args+=(--check "$c"); done
  for v in "${parts[@]:2}"; do args+=(--variant "$v"); done
  i=$((i + 1))
  timeout "${PROBE_S:-170}" python3 lab/blocked_probe.py --rounds 3 --calls 5 --profile "${args[@]}" \
    > "$OUT/probe_$i.txt" 2>&1
  stamp "probe $i (${parts[0]}): exit $?"
  grep -A12 "median over" "$OUT/probe_$i.txt" | grep -v "^--"; grep -i "fail" "$OUT/probe_$i.txt" | head -5
  probes+=("$OUT/probe_$i.txt")
done
overrides=$(python3 lab/pick_winners.py "${ADOPT_BY:-0.015}" "${probes[@]}" 2>> "$OUT/log.txt")
tail -n "${#probes[@]}" "$OUT/log.txt"
adopt_blocked "$overrides" "no candidate paid"
verify_blocked
[ "$specs" = - ] && exit 0
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 "$specs" $(( 590 - ($(date +%s) - t0) ))
