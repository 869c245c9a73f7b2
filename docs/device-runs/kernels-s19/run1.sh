#!/usr/bin/env bash
# Lookahead inside the captured graph: probes at the four large shapes, every variant verified first.
set -u
. lab/device_common.sh
stamp start
python3 -c "import kernels.families.files.cuda_blocked as m, torch; m._extension(torch.device('cuda'))" > "$OUT/build.txt" 2>&1
stamp "extension built: exit $?"
CHECKS="--check rankdef --check mixed --check nearrank"
probe() {
  local shape=$1; shift
  timeout 150 python3 lab/blocked_probe.py --shape $shape $CHECKS --rounds 5 --calls 6 "$@" 2>&1 \
    | tee "$OUT/probe_$shape.txt" | grep -v "verify ok" | grep -v "^$"
  stamp "probe $shape done"
}
probe 60x1024 --variant base --variant "la:lookahead_le1024=True" \
  --variant "la_free:lookahead_le1024=True,lookahead_grid=free" \
  --variant "la_b128:lookahead_le1024=True,block_le1024=128" \
  --variant "la_b128_free:lookahead_le1024=True,block_le1024=128,lookahead_grid=free"
probe 2x4096 --variant base --variant "la:lookahead_gt1024=True" \
  --variant "la_b64:lookahead_gt1024=True,block_gt1024=64" --variant "la_b256:lookahead_gt1024=True,block_gt1024=256"
probe 8x2048 --variant base --variant "la:lookahead_gt1024=True" \
  --variant "la_free:lookahead_gt1024=True,lookahead_grid=free" --variant "la_b64:lookahead_gt1024=True,block_gt1024=64"
probe 640x512 --variant base --variant "graph:graph=True" --variant "graph_la:graph=True,lookahead_le512=True" \
  --variant "graph_la_b128:graph=True,lookahead_le512=True,block_le512=128"
stamp end
