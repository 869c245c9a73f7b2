#!/usr/bin/env bash
# Probe (lab): the fused leaf with element-parallel small factors, one device call: the GPU tests of
# the Cholesky QR kernels, then six launches a leaf against one at 2x4096 and 8x2048 (verified on four
# stress profiles first), then skip_zero_columns at 640x512.
set -u
. lab/device_common.sh
stamp start
CHK="--check rankdef --check mixed --check nearrank --check clustered"
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_cuda_families.py \
  -k "cholqr or split_products or narrow_update or fused_merge" > "$OUT/pytest_fused.txt" 2>&1
stamp "pytest cholqr kernels: exit $?"; tail -5 "$OUT/pytest_fused.txt"
timeout 300 python3 lab/blocked_probe.py --shape 2x4096 --shape 8x2048 --rounds 4 --calls 5 $CHK --profile \
  --variant 'six:cholqr_fused=False' --variant 'leaf:cholqr_fused=True' \
  --variant 'all:cholqr_fused=True,narrow_fused=True,merge_fused=True' \
  --variant 'all_no_lookahead:cholqr_fused=True,narrow_fused=True,merge_fused=True,lookahead_gt2048=False' \
  --variant 'all128:cholqr_fused=True,narrow_fused=True,merge_fused=True,block_gt2048=128' \
  --variant 'leaf_tf32:cholqr_fused=True,update_gt1024=tf32' > "$OUT/probe_tall.txt" 2>&1
stamp "probe tall: exit $?"; grep -v "verify ok" "$OUT/probe_tall.txt" | grep -v -i warn | grep -v "^      0\.[0-2]"
for profile in rankdef dense; do
  timeout 80 python3 lab/blocked_probe.py --shape "640x512:$profile" --rounds 4 --calls 5 --check rankdef \
    --variant 'base:skip_zero_columns=False' --variant 'skip:skip_zero_columns=True' > "$OUT/probe_640_$profile.txt" 2>&1
  stamp "probe 640x512 $profile: exit $?"; grep -v "verify ok" "$OUT/probe_640_$profile.txt" | grep -v -i warn | tail -4
done
