#!/usr/bin/env bash
# Two copies of cuda_blocked.py A/B in one device call (lab): an earlier copy (BEFORE) against the
# working tree's, each file's defaults timed in processes of their own, in the order before, after,
# before, after (drift between processes shows as the spread of each pair), then qrv2-tests of the
# working tree's copy and GPU MODE's eval.py (leaderboard, seed 9137) on SPECS.
#   bash lab/file_ab.sh BEFORE.py SPECS SHAPE [SHAPE ...]    (e.g. .probe/cb_before.py .probe/gpumode/tall2.txt 2x4096 8x2048)
# Both extensions are built first, in parallel processes, so nothing timed shares the machine with nvcc.
# The after file's probe verifies it on rankdef and mixed inputs first and profiles device time per kernel.
set -u
. lab/device_common.sh
before=$1 specs=$2
shift 2
shapes=()
for s in "$@"; do shapes+=(--shape "$s"); done
build_extensions kernels/families/files/cuda_blocked.py "$before"
for round in 1 2; do
  timeout 100 python3 lab/blocked_probe.py --file "$before" "${shapes[@]}" --rounds 3 --calls 5 --variant 'before:' \
    > "$OUT/probe_before_$round.txt" 2>&1
  stamp "probe before $round: exit $?"; grep "  before " "$OUT/probe_before_$round.txt"
  extra=()
  [ "$round" = 1 ] && extra=(--profile --check rankdef --check mixed)
  timeout 150 python3 lab/blocked_probe.py "${shapes[@]}" --rounds 3 --calls 5 "${extra[@]}" --variant 'after:' \
    > "$OUT/probe_after_$round.txt" 2>&1
  stamp "probe after $round: exit $?"; grep "  after \|FAIL\|fail" "$OUT/probe_after_$round.txt" | head -8
done
verify_blocked
tail -2 "$OUT/verify_cb.txt"
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 "$specs" $(( 590 - ($(date +%s) - t0) ))
