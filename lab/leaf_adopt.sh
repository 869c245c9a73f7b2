#!/usr/bin/env bash
# Probe and adoption in one device call (lab, session 21; device starts were scarce): six launches a leaf against one at 2x4096 and 8x2048 (every variant verified on
# four stress profiles first); where the fused leaf is at least 3% faster at both shapes, the device's
# copy of cuda_blocked takes cholqr_fused=True (and the fused narrow update and merge too where they
# add 2% more); then, adopted or not, qrv2-tests on the file and GPU MODE's eval.py (leaderboard mode,
# seed 9137) on the composite with it (the specs of SPECS, by default 60x1024 and the two tall cases:
# the whole call must fit one device call's 600 s).
set -u
. lab/device_common.sh
stamp start
CHK="--check rankdef --check mixed --check nearrank --check clustered"
timeout 120 python3 lab/blocked_probe.py --shape 2x4096 --shape 8x2048 --rounds 3 --calls 5 $CHK --profile \
  --variant 'six:cholqr_fused=False' --variant 'leaf:cholqr_fused=True' \
  --variant 'all:cholqr_fused=True,narrow_fused=True,merge_fused=True' > "$OUT/probe_tall.txt" 2>&1
stamp "probe tall: exit $?"; grep -v "verify ok" "$OUT/probe_tall.txt" | grep -v -i warn | grep -v "^      0\.[0-3]"
overrides=$(python3 - "$OUT/probe_tall.txt" <<'PY'
import re, sys
med = {}
shape = None
for line in open(sys.argv[1]):
    m = re.match(r"^(\d+x\d+): median", line)
    if m:
        shape = m[1]
    m = re.match(r"^  (\w+)\s+([\d.]+) \(", line)
    if m and shape:
        med[(shape, m[1])] = float(m[2])
shapes = ("2x4096", "8x2048")
def faster(a, b, by):
    return all((s, a) in med and (s, b) in med and med[(s, a)] <= (1 - by) * med[(s, b)] for s in shapes)
if faster("leaf", "six", 0.03):
    print("cholqr_fused=True,narrow_fused=True,merge_fused=True" if faster("all", "leaf", 0.02) else "cholqr_fused=True")
PY
)
if [ -n "$overrides" ]; then
  python3 tools/param_variant.py cuda_blocked "$overrides" /tmp/cb_variant.py && cp /tmp/cb_variant.py kernels/families/files/cuda_blocked.py
  cp kernels/families/files/cuda_blocked.py "$OUT/cuda_blocked_adopted.py"
  stamp "adopted on the device's copy: $overrides"
else
  stamp "the fused leaf did not pay: nothing adopted (the defaults are verified and timed as they are)"
fi
timeout 80 python3 -m search verify kernels/families/files/cuda_blocked.py --suite qrv2-tests > "$OUT/verify_cb.txt" 2>&1
stamp "verify cuda_blocked on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_cb.txt"))"
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 "${SPECS:-.probe/gpumode/tall3.txt}" 90
