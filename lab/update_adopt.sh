#!/usr/bin/env bash
# cuda_blocked's held update (PARAMS apply_held_*: the tile read once and held in registers) against
# the two-pass update at 640x512 and 60x1024, and the winner adopted, in one device call (lab):
#   bash lab/update_adopt.sh            (LIMIT: the call's seconds, 590 by default)
# 1. lab/blocked_probe.py at both shapes: the defaults against held tiles of 32 and 64 columns on 8
#    warps, every variant verified on mixed, rankdef and nearrank inputs first, device time per
#    kernel (--profile);
# 2. per size class (n <= 512 at 640x512, 512 < n <= 1024 at 60x1024) the fastest held variant is
#    adopted on the device's copy where it is 2% faster than the defaults there
#    ($OUT/cuda_blocked_adopted.py); then qrv2-tests and GPU MODE's eval.py (leaderboard, seed 9137) on
#    the seven 640x512 and 60x1024 cases, the file as it then is.
set -u
. lab/device_common.sh
stamp start
timeout 240 python3 lab/blocked_probe.py --shape 640x512 --shape 60x1024 --rounds 3 --calls 5 --profile \
  --check mixed --check rankdef --check nearrank --variant base \
  --variant 'h32w8:apply_held_le512=True,apply_held_le1024=True,apply_held_bn=32,apply_held_warps=8' \
  --variant 'h64w8:apply_held_le512=True,apply_held_le1024=True,apply_held_bn=64,apply_held_warps=8' \
  > "$OUT/probe_held.txt" 2>&1
stamp "probe held: exit $?"
grep -v "verify ok" "$OUT/probe_held.txt" | grep -v -i warn | grep -E "^\S|^  \S|_apply_kernel" | head -60
overrides=$(python3 - "$OUT/probe_held.txt" <<'PY'
import sys
sys.path.insert(0, "lab")
from blocked_probe import read_medians
medians, params = read_medians(sys.argv[1])
chosen = {}
for shape, key in (("640x512", "apply_held_le512"), ("60x1024", "apply_held_le1024")):
    if (shape, "base") not in medians:
        continue
    held = [v for v in params if v != "base" and (shape, v) in medians]
    if not held:
        continue
    best = min(held, key=lambda v: medians[(shape, v)])
    if medians[(shape, best)] <= 0.98 * medians[(shape, "base")]:
        if "apply_held_bn" in chosen and (chosen["apply_held_bn"], chosen["apply_held_warps"]) != (
                params[best]["apply_held_bn"], params[best]["apply_held_warps"]):
            continue  # one tile shape for both classes: the first (640x512, four cases) keeps its own
        chosen[key] = True
        chosen["apply_held_bn"] = params[best]["apply_held_bn"]
        chosen["apply_held_warps"] = params[best]["apply_held_warps"]
print(",".join(f"{k}={v}" for k, v in chosen.items()))
PY
)
adopt_blocked "$overrides" "no held update was 2% faster"
verify_blocked
tail -3 "$OUT/verify_cb.txt"
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 .probe/gpumode/wide7.txt $(( ${LIMIT:-590} - ($(date +%s) - t0) ))
