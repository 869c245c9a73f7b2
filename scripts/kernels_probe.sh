#!/usr/bin/env bash
# One device call for a kernel plan (GPU machine, repo root, $OUT set): build and compile every
# variant of PLAN (scripts/bench_families.py) in 12 processes, then verify, time and profile each
# variant in one sweep.  Faster than scripts/kernels_v3.sh, which also verifies every family on
# qrv2-tests and benches them through the harness.
#
#   bash scripts/kernels_probe.sh PLAN [SWEEP_BUDGET_S]
set -u
PLAN=${1:?plan}
BUDGET=${2:-240}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bash .devbundle/setup.sh > /dev/null && export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/log.txt"; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
} > "$OUT/setup.txt" 2>&1
for w in $(seq 0 11); do
  python3 scripts/bench_families.py precompile "$PLAN" "$w" 12 >> "$OUT/precompile.log" 2>&1 &
done
wait
stamp "precompiled: $(grep -c '^precompiled' "$OUT/precompile.log") ok, $(grep -c 'failed' "$OUT/precompile.log") failed"
grep failed "$OUT/precompile.log" | cut -c1-600
timeout $((BUDGET + 120)) python3 scripts/bench_families.py sweep "$PLAN" --json "$OUT/sweep.json" --budget-s "$BUDGET" \
    --profile > "$OUT/sweep.txt" 2>&1
stamp "sweep done (exit $?)"
sed -n '/# sweep summary/,$p' "$OUT/sweep.txt" | cut -c1-400
