#!/usr/bin/env bash
# Lookahead round 2: side-update programs per free SM, block widths.
set -u
. lab/device_common.sh
stamp start
CHECKS="--check rankdef --check mixed --check nearrank"
probe() {
  local shape=$1; shift
  timeout 150 python3 lab/blocked_probe.py --shape $shape $CHECKS --rounds 5 --calls 6 "$@" 2>&1 \
    | tee "$OUT/probe_$shape.txt" | grep -v "verify ok" | grep -v "^$"
  stamp "probe $shape done"
}
L=lookahead_le1024=True
probe 60x1024 --variant base --variant "p1:$L,lookahead_programs=1" --variant "p2:$L,lookahead_programs=2" \
  --variant "p3:$L,lookahead_programs=3" --variant "p1_bn32:$L,lookahead_programs=1,apply_bn=32" \
  --variant "p2_b32:$L,lookahead_programs=2,block_le1024=32" --variant "p1_w8:$L,lookahead_programs=1,apply_warps_le1024=8"
G=lookahead_gt2048=True
probe 2x4096 --variant base --variant "b64:$G,block_gt2048=64" --variant "b64_p1:$G,block_gt2048=64,lookahead_programs=1" \
  --variant "b64_p2:$G,block_gt2048=64,lookahead_programs=2" --variant "b32:$G,block_gt2048=32" \
  --variant "b64_nc128:$G,block_gt2048=64,narrow_cols_gt1024=128"
probe 8x2048 --variant base --variant "la_p2:lookahead_le2048=True,lookahead_programs=2" \
  --variant "la_p1_b64:lookahead_le2048=True,lookahead_programs=1,block_gt1024=64"
stamp end
