#!/usr/bin/env bash
# Device call (probe): Nsight Compute on cuda_onchip's kernels, the lane-per-row kernel against the group
# kernel: duration, issue rate, instruction counts and every stall reason per issued instruction, one
# text file each in $OUT.   bash lab/onchip_ncu.sh   (repo root, $OUT set)
set -u
source lab/device_common.sh
probe() {  # label, kernel-name regex, shape, overrides...
  local label=$1 regex=$2; shift 2
  timeout 120 ncu --profile-from-start off --clock-control none -k "regex:$regex" -c 1 \
    --section SpeedOfLight --section LaunchStats --section SchedulerStats --section WarpStateStats \
    --section InstructionStats --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    python3 lab/ncu_probe.py cuda_onchip "$@" > "$OUT/ncu_$label.txt" 2>&1
  stamp "ncu $label: exit $?"
  grep -E 'Duration|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued|Executed Instructions  ' "$OUT/ncu_$label.txt" | tr -s ' '
  grep -E 'issue_stalled' "$OUT/ncu_$label.txt" | tr -s ' ' | sort -t' ' -k4 -g -r | awk '$NF+0 > 0.3' | head -8
}
probe rows176 qr_onchip 40x176
probe groups176 qr_groups 40x176 "groups_176='8x4'"
probe groups32 qr_groups 20x32 "groups_32='4x1'"
