#!/usr/bin/env bash
# Device call: cuda_onchip as committed against an OLD copy: qrv2-tests, the small cases' host and device
# time apart (lab/launch_overhead.py, two fresh processes each), and GPU MODE's eval.py (leaderboard) on
# 20x32 and 40x176.   bash lab/onchip_final.sh OLD_FILE RUNNER_DIR SEED   (repo root, $OUT set)
set -u
source lab/device_common.sh
old=$1 dir=$2 seed=$3
timeout 150 python3 -m search verify kernels/families/files/cuda_onchip.py --suite qrv2-tests > "$OUT/verify_onchip.txt" 2>&1
stamp "verify cuda_onchip on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_onchip.txt"))"
cp "$old" /tmp/onchip_old.py
for c in dense-20x32-c1 dense-40x176-c1; do
  timeout 150 python3 lab/launch_overhead.py /tmp/onchip_old.py kernels/families/files/cuda_onchip.py --case $c \
    --processes 2 --calls 50 >> "$OUT/onchip_overhead.txt" 2>&1
done
stamp "overhead done"; cat "$OUT/onchip_overhead.txt"
bash tools/gpumode_eval.sh "$dir" "$seed" "$dir/small2.txt" 150 2>&1 | tail -6
