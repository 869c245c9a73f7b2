#!/usr/bin/env bash
# Probe and adoption of cuda_blocked's PARAMS tail_* in one device call (lab):
#   bash lab/tail_probe.sh
# 1. lab/blocked_probe.py on the 640x512 profiles of the benchmark (dense, rankdef, clustered, mixed),
#    tail off / "negligible" per matrix on the device (tail_per_matrix) / "negligible" cut at the batch's
#    count (one host sync), every variant verified first on five stress profiles;
# 2. the first of the two "negligible" variants that is at least 3% faster on rankdef and on clustered
#    and at most 1% slower on dense and mixed is adopted on the device's copy;
# 3. qrv2-tests on the file as it then is, the GPU tests of the tail and the panel kernel, and GPU MODE's eval.py (leaderboard mode, seed 9137) on SPECS
#    (default .probe/gpumode/tail4.txt: the four cases at 640x512).
set -u
. lab/device_common.sh
stamp start
timeout 200 python3 lab/blocked_probe.py --shape 640x512 --shape 640x512:rankdef --shape 640x512:clustered \
  --shape 640x512:mixed --rounds 3 --calls 5 --profile \
  --check rankdef --check mixed --check nearrank --check clustered --check band \
  --variant 'off:tail_le512=off' --variant 'matrix:tail_le512=negligible,tail_per_matrix=True' \
  --variant 'batch:tail_le512=negligible,tail_per_matrix=False' \
  > "$OUT/probe_tail.txt" 2>&1
stamp "probe: exit $?"; grep -v "verify ok" "$OUT/probe_tail.txt" | grep -v -i warn | grep -E "^[0-9]|^  [a-z]|FAIL|rror|profile"
adopt=$(python3 - "$OUT/probe_tail.txt" <<'PY'
import re, sys
medians, shape = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"^(\S+): median", line)
    if m:
        shape = m[1]
    m = re.match(r"^  (\w+)\s+([\d.]+) \(", line)
    if m and shape:
        medians[(shape, m[1])] = float(m[2])
OVERRIDES = {"matrix": "tail_le512=negligible,tail_per_matrix=True",
             "batch": "tail_le512=negligible,tail_per_matrix=False"}
for name, overrides in OVERRIDES.items():
    def ratio(shape):
        return medians[(shape, name)] / medians[(shape, "off")]
    try:
        if all(ratio(s) <= 0.97 for s in ("640x512:rankdef", "640x512:clustered")) and \
                all(ratio(s) <= 1.01 for s in ("640x512", "640x512:mixed")):
            print(overrides)
            break
    except KeyError as missing:
        print("missing", missing, file=sys.stderr)
PY
)
if [ -n "$adopt" ]; then
  python3 tools/param_variant.py cuda_blocked "$adopt" /tmp/cb_variant.py \
    && cp /tmp/cb_variant.py kernels/families/files/cuda_blocked.py
  cp kernels/families/files/cuda_blocked.py "$OUT/cuda_blocked_adopted.py"
  stamp "adopted on the device's copy: $adopt"
else
  stamp "not adopted: the defaults are verified and timed as they are"
fi
timeout 80 python3 -m search verify kernels/families/files/cuda_blocked.py --suite qrv2-tests > "$OUT/verify_cb.txt" 2>&1
stamp "verify cuda_blocked on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_cb.txt"))"
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_cuda_families.py -k "tail or panel_kernel" \
  > "$OUT/pytest.txt" 2>&1
stamp "pytest -k 'tail or panel_kernel': exit $?"; tail -3 "$OUT/pytest.txt"
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 "${SPECS:-.probe/gpumode/tail4.txt}" "${EVAL_S:-160}"
