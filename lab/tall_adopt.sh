#!/usr/bin/env bash
# Probe and adoption of one cuda_blocked change at the tall shapes, in one device call (lab; device
# starts are scarce, so one call does what a session's first hour of device work would):
#   bash lab/tall_adopt.sh 'six:cholqr_inverse=solve' 'sweep:cholqr_inverse=sweep' [more name:overrides ...]
# 1. the GPU tests named by TESTS (a pytest -k expression; default: the Cholesky QR leaf in every mode);
# 2. lab/blocked_probe.py at 2x4096 and 8x2048 with every variant given, each verified first on four
#    stress profiles (rankdef, mixed, nearrank, clustered), device time per kernel (--profile);
# 3. the second variant (the candidate) is adopted on the device's copy of cuda_blocked when its median
#    is at least ADOPT_BY (default 0.03) below the first's (the baseline) at both shapes;
# 4. adopted or not: qrv2-tests on the file, and GPU MODE's eval.py (leaderboard mode, seed 9137) on
#    SPECS (default .probe/gpumode/tall3.txt: 60x1024 and the two tall cases), the file as it then is.
# The adopted file is $OUT/cuda_blocked_adopted.py: copy it into the repository to make the change.
set -u
if [ $# -lt 2 ]; then
  echo "usage: bash lab/tall_adopt.sh BASELINE_NAME:OVERRIDES CANDIDATE_NAME:OVERRIDES [NAME:OVERRIDES ...]" >&2
  exit 2
fi
. lab/device_common.sh
stamp start
timeout 180 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_cuda_families.py \
  -k "${TESTS:-cholqr_leaf}" > "$OUT/pytest.txt" 2>&1
stamp "pytest -k '${TESTS:-cholqr_leaf}': exit $?"; tail -5 "$OUT/pytest.txt"
variants=()
for v in "$@"; do variants+=(--variant "$v"); done
timeout 200 python3 lab/blocked_probe.py --shape 2x4096 --shape 8x2048 --rounds 3 --calls 5 --profile \
  --check rankdef --check mixed --check nearrank --check clustered "${variants[@]}" > "$OUT/probe_tall.txt" 2>&1
stamp "probe tall: exit $?"; grep -v "verify ok" "$OUT/probe_tall.txt" | grep -v -i warn | grep -v "^      0\.[0-3]"
overrides=$(python3 - "$OUT/probe_tall.txt" "$1" "$2" "${ADOPT_BY:-0.03}" <<'PY'
import sys
sys.path.insert(0, "lab")
from blocked_probe import read_medians
path, baseline, candidate, by = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
base_name, cand_name = baseline.split(":", 1)[0], candidate.split(":", 1)[0]
medians = read_medians(path)[0]
shapes = ("2x4096", "8x2048")
if all((s, base_name) in medians and (s, cand_name) in medians
       and medians[(s, cand_name)] <= (1 - by) * medians[(s, base_name)] for s in shapes):
    print(candidate.split(":", 1)[1])
PY
)
adopt_blocked "$overrides" "the candidate did not pay at both shapes"
verify_blocked
mkdir -p "$OUT/eval"
OUT="$OUT/eval" bash tools/gpumode_eval.sh .probe/gpumode 9137 "${SPECS:-.probe/gpumode/tall3.txt}" 90
