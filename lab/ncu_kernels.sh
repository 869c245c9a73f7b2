#!/usr/bin/env bash
# Nsight Compute on one launch of each kernel that holds the time (GPU machine, repo root, $OUT set):
# duration, occupancy, issue rate, stall reasons and instruction counts, one text file per kernel.
# After lab/kernels_probe.sh in the same call it reuses that call's builds and Triton cache.
#   bash lab/ncu_kernels.sh
set -u
OUT=${OUT:-/tmp/out}
bash .devbundle/setup.sh > /dev/null
export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache} TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/torch-ext}
uname -r > "$OUT/ncu_env.txt"; which ncu >> "$OUT/ncu_env.txt" 2>&1
probe() {  # label, kernel-name regex, launches to skip, family, shape, overrides...
  local label=$1 regex=$2 skip=$3; shift 3
  timeout 150 ncu --profile-from-start off --clock-control none -k "regex:$regex" -s "$skip" -c 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis --section SourceCounters \
    python3 lab/ncu_probe.py "$@" > "$OUT/ncu_$label.txt" 2>&1
  echo "ncu $label: exit $? $(grep -E 'Duration|Registers Per|Achieved Occupancy|Issue Slots Busy' "$OUT/ncu_$label.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-300)"
}
probe panel512 panel_kernel 0 cuda_blocked 640x512
probe onchip176 qr_onchip 0 cuda_onchip 40x176
probe apply512 _apply_kernel 0 cuda_blocked 640x512 "update_le1024='tf32x3'"
probe lookahead512 _lookahead_kernel 4 lookahead_split 640x512
