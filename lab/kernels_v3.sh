#!/usr/bin/env bash
# One device call for the kernel families (run on the GPU machine, repo root, $OUT set):
# build the CUDA C++ families and compile every sweep variant (12 processes), check the panel
# kernel against its reference, verify every family on qrv2-tests, sweep PLAN
# (lab/bench_families.py), `qrsearch bench` each family on the qrv2-bench cases of its domain
# (torch.geqrf from the committed baseline), and time host against device for the launch-bound
# cases (lab/launch_overhead.py).
#
#   bash lab/kernels_v3.sh [PLAN] [SWEEP_BUDGET_S]
set -u
PLAN=${1:-r5}
BUDGET=${2:-170}
. lab/device_common.sh
FAMILIES="householder_unblocked blocked_wy lookahead_split cuda_onchip cuda_blocked"

precompile_plan "$PLAN"
cat "$OUT/precompile.log" >> "$OUT/setup.txt"; rm -f "$OUT/precompile.log"

timeout 120 python3 -m pytest -q -m gpu tests/kernels/test_cuda_families.py -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1
stamp "pytest gpu: $(tail -1 "$OUT/pytest_gpu.txt")"
grep -E "Error|assert|Mismatch" "$OUT/pytest_gpu.txt" | head -12
cat "$OUT/pytest_gpu.txt" >> "$OUT/setup.txt"; rm -f "$OUT/pytest_gpu.txt"

for f in $FAMILIES; do
  timeout 200 python3 -m search verify "kernels/families/files/$f.py" --suite qrv2-tests --keep-going > "$OUT/verify_$f.txt" 2>&1 &
done
wait
for f in $FAMILIES; do
  stamp "verify $f: $(grep -h 'cases passed' "$OUT/verify_$f.txt")"
  grep -E "FAIL|failed|error" "$OUT/verify_$f.txt" | head -4
  cat "$OUT/verify_$f.txt" >> "$OUT/verify.txt"; rm -f "$OUT/verify_$f.txt"
done

timeout 300 python3 lab/bench_families.py sweep "$PLAN" --json "$OUT/sweep.json" --budget-s "$BUDGET" > "$OUT/sweep.txt" 2>&1
stamp "sweep done"
sed -n '/# sweep summary/,$p' "$OUT/sweep.txt"

# The official numbers: each family on the cases of its domain, as the search times it.
domain() { python3 -c "
from kernels.families import get_family
from kernels.suites import get_suite
lo, hi = get_family('$1').n_range
print(','.join(c.name for c in get_suite('qrv2-bench') if lo <= c.n <= hi))"; }
for f in $FAMILIES; do
  timeout 150 python3 -m search bench "kernels/families/files/$f.py" --suite qrv2-bench --cases "$(domain "$f")" \
      --baseline-json docs/device-runs/region-probe/baseline-qrv2-bench.json --json-out "$OUT/bench_$f.json" > "$OUT/bench_$f.txt" 2>&1
  stamp "bench $f: exit $?"
  grep -E "^│" "$OUT/bench_$f.txt" | cut -c1-70
  cat "$OUT/bench_$f.txt" >> "$OUT/bench.txt"; rm -f "$OUT/bench_$f.txt"
done
python3 - "$OUT" <<'EOF' > "$OUT/bench_all.json"
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print(json.dumps({p.stem[6:]: json.loads(p.read_text()) for p in sorted(out.glob("bench_*.json")) if p.stem != "bench_all"}))
EOF
for f in $FAMILIES; do rm -f "$OUT/bench_$f.json"; done

timeout 120 python3 lab/launch_overhead.py kernels/families/files/cuda_onchip.py kernels/families/files/householder_unblocked.py \
    --case dense-20x32-c1 --processes 3 > "$OUT/launch_overhead.txt" 2>&1
timeout 90 python3 lab/launch_overhead.py kernels/families/files/cuda_onchip.py kernels/families/files/blocked_wy.py \
    --case dense-40x176-c1 --processes 2 >> "$OUT/launch_overhead.txt" 2>&1
stamp "launch overhead done"
grep -vE "^\s*$" "$OUT/launch_overhead.txt" | tail -12
cat "$OUT/log.txt"
