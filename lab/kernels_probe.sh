#!/usr/bin/env bash
# One device call for a kernel plan (GPU machine, repo root, $OUT set): build and compile every
# variant of PLAN (lab/bench_families.py) in 12 processes, then verify, time and profile each
# variant in one sweep.  Faster than lab/kernels_v3.sh, which also verifies every family on
# qrv2-tests and benches them through the harness.
#
#   bash lab/kernels_probe.sh PLAN [SWEEP_BUDGET_S]
set -u
PLAN=${1:?plan}
BUDGET=${2:-240}
. lab/device_common.sh
precompile_plan "$PLAN"
timeout $((BUDGET + 120)) python3 lab/bench_families.py sweep "$PLAN" --json "$OUT/sweep.json" --budget-s "$BUDGET" \
    --profile > "$OUT/sweep.txt" 2>&1
stamp "sweep done (exit $?)"
sed -n '/# sweep summary/,$p' "$OUT/sweep.txt" | cut -c1-400
