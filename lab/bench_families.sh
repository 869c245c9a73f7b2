#!/usr/bin/env bash
# One device call for the kernel families (run on the GPU machine, repo root, $OUT set).
#
#   bash lab/bench_families.sh PLAN [baseline] [verify] [bench]
#
#   baseline  time torch.geqrf on qrv2-bench alone (--no-baseline) -> $OUT/baseline.{json,txt}
#   verify    `python -m search verify` every family on qrv2-tests   -> $OUT/verify.txt
#   bench     `python -m search bench` every family + composite on qrv2-bench, reusing
#             docs/device-runs/region-probe/baseline-qrv2-bench.json -> $OUT/bench.{json,txt}
#   PLAN      a sweep plan of lab/bench_families.py ("none" for no sweep) -> $OUT/sweep.{json,txt}
#
# Kernels are compiled first by 8 parallel workers into a shared Triton cache, while
# the (untimed) verification runs; timing runs alone afterwards.
set -u
PLAN=${1:-none}
shift || true
want() { for w in "${STEPS[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }
STEPS=("$@")
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/triton-cache
FAMILIES="householder_unblocked blocked_wy lookahead_split"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/log.txt"; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0]); print('torch', torch.__version__, 'cuda', torch.version.cuda); print('triton', triton.__version__); print(torch.cuda.get_device_name(), torch.cuda.get_device_properties(0).multi_processor_count, 'SMs')"
} > "$OUT/env.txt" 2>&1
stamp "env done"

pids=()
if [ "$PLAN" != "none" ]; then
  for w in 0 1 2 3 4 5 6 7 8 9 10 11; do
    python3 lab/bench_families.py precompile "$PLAN" $w 12 >> "$OUT/precompile.log" 2>&1 &
    pids+=($!)
  done
fi
if want verify; then
  for f in $FAMILIES; do
    timeout 120 python3 -m search verify "kernels/families/files/$f.py" --suite qrv2-tests > "$OUT/verify_$f.txt" 2>&1 &
    pids+=($!)
  done
fi
for p in "${pids[@]}"; do wait "$p"; done
if want verify; then
  for f in $FAMILIES; do cat "$OUT/verify_$f.txt"; rm -f "$OUT/verify_$f.txt"; done > "$OUT/verify.txt"
  grep -h "cases passed" "$OUT/verify.txt" | tee -a "$OUT/log.txt"
fi
stamp "precompile/verify done"

if want baseline; then
  timeout 240 python3 -m search bench kernels/families/files/torch_geqrf.py --suite qrv2-bench --no-baseline \
    --json-out "$OUT/baseline.json" > "$OUT/baseline.txt" 2>&1
  stamp "baseline done"
fi

if [ "$PLAN" != "none" ]; then
  timeout 300 python3 lab/bench_families.py sweep "$PLAN" --json "$OUT/sweep.json" --budget-s "${SWEEP_BUDGET_S:-150}" \
    > "$OUT/sweep.txt" 2>&1
  stamp "sweep done"
fi

if want bench; then
  files=""
  for f in $FAMILIES; do files="$files kernels/families/files/$f.py"; done
  timeout 200 python3 -m search bench $files --suite qrv2-bench \
    --baseline-json docs/device-runs/region-probe/baseline-qrv2-bench.json --json-out "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
  stamp "bench done"
fi

[ -f "$OUT/baseline.txt" ] && tail -25 "$OUT/baseline.txt"
[ -f "$OUT/sweep.txt" ] && sed -n '/# sweep summary/,$p' "$OUT/sweep.txt"
[ -f "$OUT/bench.txt" ] && tail -30 "$OUT/bench.txt"
cat "$OUT/log.txt"
