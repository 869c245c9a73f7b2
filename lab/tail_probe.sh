#!/usr/bin/env bash
# Probe and adoption of cuda_blocked's PARAMS tail_* in one device call (lab):
#   bash lab/tail_probe.sh
# 1. lab/blocked_probe.py on the 640x512 profiles of the benchmark (dense, rankdef, clustered, mixed),
#    tail off / "negligible" per matrix on the device / cut at the batch's count (read on the host while
#    the first block runs) / both, every variant verified first on five stress profiles;
# 2. of the "negligible" variants that are at least 3% faster on rankdef and on clustered and at most
#    1% slower on dense and mixed, the one with the smallest product of the four ratios is adopted on
#    the device's copy;
# 3. qrv2-tests on the file as it then is, the GPU tests of the tail and the panel kernel, and GPU MODE's eval.py (leaderboard mode, seed 9137) on SPECS
#    (default .probe/gpumode/tail4.txt: the four cases at 640x512).
set -u
. lab/device_common.sh
stamp start
timeout 200 python3 lab/blocked_probe.py --shape 640x512 --shape 640x512:rankdef --shape 640x512:clustered \
  --shape 640x512:mixed --rounds 3 --calls 5 --profile \
  --check rankdef --check mixed --check nearrank --check clustered --check band \
  --variant 'off:tail_le512=off' --variant 'matrix:tail_le512=negligible,tail_scope=matrix' \
  --variant 'batch:tail_le512=negligible,tail_scope=batch' --variant 'both:tail_le512=negligible,tail_scope=both' \
  > "$OUT/probe_tail.txt" 2>&1
stamp "probe: exit $?"; grep -v "verify ok" "$OUT/probe_tail.txt" | grep -v -i warn | grep -E "^[0-9]|^  [a-z]|FAIL|rror|profile"
adopt=$(python3 - "$OUT/probe_tail.txt" <<'PY'
import math, sys
sys.path.insert(0, "lab")
from blocked_probe import read_medians
medians = read_medians(sys.argv[1])[0]
SHAPES = ("640x512", "640x512:rankdef", "640x512:clustered", "640x512:mixed")
best = None
for name in ("matrix", "batch", "both"):
    try:
        ratios = {s: medians[(s, name)] / medians[(s, "off")] for s in SHAPES}
    except KeyError as missing:
        print("missing", missing, file=sys.stderr)
        continue
    product = math.prod(ratios.values())
    print(name, {s: round(r, 3) for s, r in ratios.items()}, "product", round(product, 3), file=sys.stderr)
    if all(ratios[s] <= 0.97 for s in SHAPES[1:3]) and all(ratios[s] <= 1.01 for s in (SHAPES[0], SHAPES[3])):
        if best is None or product < best[0]:
            best = (product, name)
if best:
    print(f"tail_le512=negligible,tail_scope={best[1]}")
PY
)
adopt_blocked "$adopt" "no variant paid"
verify_blocked
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_cuda_families.py -k "tail or panel_kernel" \
  > "$OUT/pytest.txt" 2>&1
stamp "pytest -k 'tail or panel_kernel': exit $?"; tail -3 "$OUT/pytest.txt"
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 "${SPECS:-.probe/gpumode/tail4.txt}" "${EVAL_S:-160}"
