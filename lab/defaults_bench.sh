#!/usr/bin/env bash
# The composite of the families' defaults on the GPU machine (repo root, $OUT set): each family file
# benched on the qrv2-bench cases it may win (GPU MODE's timed regions, every timed output verified;
# no torch.geqrf: the committed baseline was timed one call per region, which `bench` will not mix
# with these), then qrv2-tests for each file, then the composite table (best family per case,
# geomean over the 12 first and all 14 cases; tools/composite_table.py).
#
#   bash lab/defaults_bench.sh
set -u
. lab/device_common.sh
bench() {  # family cases
  timeout 200 python3 -m search bench "kernels/families/files/$1.py" --suite qrv2-bench --no-baseline \
    --timing-region gpumode --cases "$2" --json-out "$OUT/bench_$1.json" > "$OUT/bench_$1.txt" 2>&1
  stamp "bench $1: exit $?"
}
S640=dense-640x512-c2,mixed-640x512-c2,rankdef-640x512-c0,clustered-640x512-c0,rowscale-640x512-c0,nearcollinear-640x512-c0
S1024=dense-60x1024-c2,mixed-60x1024-c2,nearrank-60x1024-c0
bench cuda_onchip dense-20x32-c1,dense-40x176-c1
bench lookahead_split dense-40x352-c1,dense-8x2048-c1,dense-2x4096-c1
bench cuda_blocked "dense-40x176-c1,dense-40x352-c1,$S640,$S1024,dense-8x2048-c1,dense-2x4096-c1"
for f in cuda_onchip lookahead_split cuda_blocked; do
  timeout 200 python3 -m search verify "kernels/families/files/$f.py" --suite qrv2-tests > "$OUT/verify_$f.txt" 2>&1
  stamp "verify $f on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_$f.txt"))"
done
python3 tools/composite_table.py "$OUT"/bench_*.json | tee "$OUT/composite.md"
