#!/usr/bin/env bash
# Where cuda_blocked's Triton block update spends its time at 640x512 and 60x1024, and the file
# against an earlier copy of itself, in one device call (lab):
#   bash lab/update_probe.sh BEFORE.py|- [VARIANT ...]      (NCU=0: no Nsight; BEFORE "-": this file only)
# 1. Nsight Compute on one trailing update (the first block's, the largest) at each shape: duration,
#    throughput against the device's peaks, pipe utilisation, issue rate and stall reasons;
# 2. lab/blocked_probe.py on BEFORE.py and on the file as it is, each in its own process, at both
#    shapes, every variant (blocked_probe's 'name:KEY=VALUE,...'; base alone by default) verified on
#    mixed, rankdef and nearrank inputs first, device time per kernel (--profile).
set -u
. lab/device_common.sh
before=$1; shift
variants=(--variant base)
for v in "$@"; do variants+=(--variant "$v"); done
stamp start
for shape in $([ "${NCU:-1}" = 1 ] && echo 640x512 60x1024); do
  # launch 0 is the first block's inner update (its right half); launch 1 the rest of the matrix
  timeout 200 ncu --profile-from-start off --clock-control none -k "regex:_apply_kernel" -s 1 -c 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section SchedulerStats --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis \
    python3 lab/ncu_probe.py cuda_blocked "$shape" > "$OUT/ncu_apply_$shape.txt" 2>&1
  stamp "ncu apply $shape: exit $?"
  grep -E "^\s+(Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit Rate|L1/TEX Hit Rate|Executed Ipc Active|Theoretical Occupancy)" \
    "$OUT/ncu_apply_$shape.txt" | tr -s ' ' | head -16
  grep -iE "pipe|bottleneck|stall" "$OUT/ncu_apply_$shape.txt" | grep -v "^ *-" | tr -s ' ' | cut -c1-220 | head -12
done
checks=(--check mixed --check rankdef --check nearrank)
for file in $([ "$before" != - ] && echo "$before") kernels/families/files/cuda_blocked.py; do
  label=$(basename "$file" .py)
  timeout 200 python3 lab/blocked_probe.py --file "$file" --shape 640x512 --shape 60x1024 --rounds 3 --calls 5 \
    --profile "${checks[@]}" "${variants[@]}" > "$OUT/probe_$label.txt" 2>&1
  stamp "probe $label: exit $?"
  grep -v "verify ok" "$OUT/probe_$label.txt" | grep -v -i warn | grep -v "^      0\.[0-3]" | head -40
done
