#!/usr/bin/env bash
# After a search on this machine: cuda_blocked's tall-panel variants (plan "tall"), using the
# CUDA build the search made (runs/gpu1/torch-extensions), output in $OUT/tall.txt.
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=$PWD/runs/gpu1/torch-extensions TRITON_CACHE_DIR=/tmp/triton-cache-tall
timeout "${1:-120}" python3 lab/bench_families.py sweep tall --json /tmp/tall.json --budget-s 60 > "$OUT/tall.txt" 2>&1
sed -n '/# sweep summary/,$p' "$OUT/tall.txt"
