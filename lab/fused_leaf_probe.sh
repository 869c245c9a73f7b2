#!/usr/bin/env bash
# Session 20's cuda_blocked structures, first time on a GPU, in two device calls (each under 600 s):
#   bash lab/fused_leaf_probe.sh tall   the GPU tests of the fused leaf, narrow update and merge against
#                                       float64 and the reference panel; then at 2x4096 and 8x2048 six
#                                       launches a leaf against one, with the fused narrow updates and
#                                       merges, blocks of 32, 64 and 128, and without lookahead (whose
#                                       side programs may crowd the waiting leaf blocks)
#   bash lab/fused_leaf_probe.sh wide   fused leaves at 60x1024; skip_zero_columns at 640x512 on rankdef,
#                                       dense and mixed inputs
# Every variant is verified on stress profiles before it is timed (lab/blocked_probe.py --check).
set -u
. lab/device_common.sh
stamp "start ${1:-tall}"
CHK="--check rankdef --check mixed --check nearrank --check clustered"
if [ "${1:-tall}" = tall ]; then
  timeout 180 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_cuda_families.py \
    -k "cholqr_leaf or split_products or narrow_update or fused_merge" -x > "$OUT/pytest_fused.txt" 2>&1
  stamp "pytest fused kernels: exit $?"; tail -15 "$OUT/pytest_fused.txt"
  timeout 380 python3 lab/blocked_probe.py --shape 2x4096 --shape 8x2048 --rounds 4 --calls 5 $CHK --profile \
    --variant 'six:cholqr_fused=False' --variant 'leaf:cholqr_fused=True' \
    --variant 'all:cholqr_fused=True,narrow_fused=True,merge_fused=True' \
    --variant 'all_no_lookahead:cholqr_fused=True,narrow_fused=True,merge_fused=True,lookahead_gt2048=False' \
    --variant 'all32:cholqr_fused=True,narrow_fused=True,merge_fused=True,block_gt2048=32,block_gt1024=32' \
    --variant 'all128:cholqr_fused=True,narrow_fused=True,merge_fused=True,block_gt2048=128' > "$OUT/probe_tall.txt" 2>&1
  stamp "probe tall: exit $?"; grep -v "^ " "$OUT/probe_tall.txt" | tail -40
else
  timeout 200 python3 lab/blocked_probe.py --shape 60x1024 --rounds 4 --calls 5 --check mixed --check rankdef \
    --variant 'householder:panel_le1024=householder' \
    --variant 'leaf256:panel_le1024=cholqr2,cholqr_min_rows=256,cholqr_fused=True' \
    --variant 'leaf512:panel_le1024=cholqr2,cholqr_min_rows=512,cholqr_fused=True' > "$OUT/probe_1024.txt" 2>&1
  stamp "probe 60x1024: exit $?"; tail -20 "$OUT/probe_1024.txt"
  for profile in rankdef dense mixed; do
    timeout 110 python3 lab/blocked_probe.py --shape "640x512:$profile" --rounds 4 --calls 5 --check rankdef \
      --variant 'base:skip_zero_columns=False' --variant 'skip:skip_zero_columns=True' > "$OUT/probe_640_$profile.txt" 2>&1
    stamp "probe 640x512 $profile: exit $?"; tail -6 "$OUT/probe_640_$profile.txt"
  done
fi
