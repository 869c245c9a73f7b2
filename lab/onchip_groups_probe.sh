#!/usr/bin/env bash
# Device call (probe): cuda_onchip's layouts (PARAMS groups_32, groups_176) against the defaults at 20x32
# and 40x176, every variant verified on four stress profiles first; the fastest layout of each class
# adopted on the device's copy when it beats the defaults by 2%, then qrv2-tests and GPU MODE's eval.py
# (leaderboard) on the two small cases with it.
#   bash lab/onchip_groups_probe.sh RUNNER_DIR SEED LAYOUT...      (repo root, $OUT set)
# LAYOUT: g32_<layout> or g176_<layout>, a value of that class's PARAMS (e.g. g32_4x1, g176_8k2x2).
set -u
source lab/device_common.sh
dir=${1:-.probe/gpumode} seed=${2:-9137}
shift 2
variants=(--variant base)
for v in "$@"; do variants+=(--variant "$v:groups_${v%%_*}=${v#*_}"); done
variants=("${variants[@]//groups_g/groups_}")
stamp "group kernel probe"
timeout 330 python3 lab/blocked_probe.py --file kernels/families/files/cuda_onchip.py --shape 20x32 --shape 40x176 \
  --rounds 5 --calls 20 --profile --check rankdef --check mixed --check clustered --check nearrank \
  "${variants[@]}" > "$OUT/groups_probe.txt" 2>&1
stamp "probe exit $?"
grep -B1 -A12 "median over" "$OUT/groups_probe.txt"; grep -i "FAILED\|error" "$OUT/groups_probe.txt" | head
overrides=$(python3 - "$OUT/groups_probe.txt" <<'PY'
import sys
sys.path.insert(0, "lab")
from blocked_probe import read_medians
medians = read_medians(sys.argv[1])[0]
picks = []
for shape, prefix, key in (("20x32", "g32_", "groups_32"), ("40x176", "g176_", "groups_176")):
    rows = {name: ms for (where, name), ms in medians.items() if where == shape}
    best = min((name for name in rows if name.startswith(prefix)), key=rows.get, default=None)
    if best and rows[best] < rows.get("base", 0) * 0.98:
        picks.append(f"{key}={best[len(prefix):]}")
print(",".join(picks))
PY
)
if [ -n "$overrides" ]; then
  python3 tools/param_variant.py cuda_onchip "$overrides" /tmp/onchip_variant.py && cp /tmp/onchip_variant.py kernels/families/files/cuda_onchip.py
  cp kernels/families/files/cuda_onchip.py "$OUT/cuda_onchip_adopted.py"
fi
stamp "adopted: ${overrides:-nothing}"
timeout 120 python3 -m search verify kernels/families/files/cuda_onchip.py --suite qrv2-tests > "$OUT/verify_onchip.txt" 2>&1
stamp "verify cuda_onchip on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_onchip.txt"))"
bash tools/gpumode_eval.sh "$dir" "$seed" "$dir/small2.txt" 150 2>&1 | tail -8
