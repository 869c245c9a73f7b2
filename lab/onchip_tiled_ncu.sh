#!/usr/bin/env bash
# Device call (probe): the tiled kernel's variants against the defaults at 40x176 (no adoption), then
# Nsight Compute's per-instruction page of one variant summed by lab/ncu_source_summary.py, then the
# 40x352 variants.   bash lab/onchip_tiled_ncu.sh 'V176' 'V352' NCU_SHAPE NCU_OVERRIDE
set -u
source lab/device_common.sh
v176=$1 v352=$2 nshape=$3 nover=$4
F=kernels/families/files/cuda_onchip.py
timeout 400 python3 -c "
import importlib.util, torch
spec = importlib.util.spec_from_file_location('f', '$F'); f = importlib.util.module_from_spec(spec); spec.loader.exec_module(f)
f._extension(torch.device('cuda'))" > "$OUT/build.txt" 2>&1
stamp "built cuda_onchip: exit $?"
probe() {  # out shape variants...
  local out=$1 shape=$2; shift 2
  local args=()
  for v in "$@"; do args+=(--variant "$v"); done
  timeout 200 python3 lab/blocked_probe.py --file $F --shape "$shape" --rounds 3 --calls 10 \
    --check rankdef --check clustered "${args[@]}" > "$OUT/$out" 2>&1
  stamp "probe $shape: exit $?"
  grep -A8 "median over" "$OUT/$out" | grep -v Warn
}
probe probe176.txt 40x176 base $v176
timeout 150 ncu --profile-from-start off --clock-control none -k "regex:qr_tiled" -c 1 --section SourceCounters \
  --section WarpStateStats --section SpeedOfLight -o /tmp/tiled_ncu python3 lab/ncu_probe.py cuda_onchip $nshape "$nover" \
  > "$OUT/ncu_log.txt" 2>&1
stamp "ncu: exit $?"
ncu -i /tmp/tiled_ncu.ncu-rep --page source --print-source sass --csv > /tmp/tiled_src.csv 2>/dev/null
python3 lab/ncu_source_summary.py /tmp/tiled_src.csv --top 25 > "$OUT/ncu_source_summary.txt" 2>&1
ncu -i /tmp/tiled_ncu.ncu-rep --page details > "$OUT/ncu_details.txt" 2>&1
grep -E "Duration|Warp Cycles Per Issued|Issue Slots" "$OUT/ncu_details.txt" | tr -s ' '
head -60 "$OUT/ncu_source_summary.txt"
probe probe352.txt 40x352 $v352
