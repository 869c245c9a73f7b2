#!/usr/bin/env bash
# One device call (GPU machine, repo root, $OUT set): is a launch-bound case's median reproducible
# from one fresh process to the next, timed one call per region (the search's default) or as GPU
# MODE's qr_v2 times it (up to 50 inputs back to back per region)?  The honesty bar of the
# throughput issue compares a search's medians with a standalone bench; this is its noise floor.
# Also re-times torch.geqrf on every qrv2-bench case (the baseline JSON) and benches the
# families' defaults on the 640x512 cases against it.
#
#   bash lab/region_probe.sh [REPEATS]
set -u
REPEATS=${1:-2}
. lab/device_common.sh
CPUS=0,1   # the search's timing CPUs on a 16-CPU host with one GPU (qrsearch bench --cpus)
python3 -m search bench kernels/families/files/torch_geqrf.py --suite qrv2-bench --no-baseline --cpus $CPUS \
    --json-out "$OUT/baseline-qrv2-bench.json" > "$OUT/baseline.txt" 2>&1
stamp "torch.geqrf baseline (exit $?)"
# family file | its launch-bound cases
PROBES="householder_unblocked:dense-20x32-c1
cuda_onchip:dense-20x32-c1,dense-40x176-c1
blocked_wy:dense-40x176-c1,dense-40x352-c1
lookahead_split:dense-40x352-c1
cuda_blocked:dense-40x352-c1
torch_geqrf:dense-20x32-c1"
for region in call gpumode; do
  for rep in $(seq 1 "$REPEATS"); do
    for probe in $PROBES; do
      family=${probe%%:*}; cases=${probe#*:}
      python3 -m search bench "kernels/families/files/$family.py" --suite qrv2-bench --no-baseline --cpus $CPUS \
          --cases "$cases" --timing-region $region --json-out "$OUT/probe-$family-$region-$rep.json" \
          > "$OUT/probe-$family-$region-$rep.txt" 2>&1 || echo "$family $region $rep: exit $?"
    done
    stamp "region $region, repeat $rep"
  done
done
big=dense-640x512-c2,mixed-640x512-c2,rankdef-640x512-c0,clustered-640x512-c0,rowscale-640x512-c0,nearcollinear-640x512-c0
python3 -m search bench kernels/families/files/cuda_blocked.py kernels/families/files/blocked_wy.py kernels/families/files/lookahead_split.py \
    --suite qrv2-bench --cases "$big" --cpus $CPUS --baseline-json "$OUT/baseline-qrv2-bench.json" \
    --json-out "$OUT/big640.json" > "$OUT/big640.txt" 2>&1
stamp "640x512 cases (exit $?)"
python3 - "$OUT" <<'PY'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
rows: dict[tuple[str, str], dict[str, list[float]]] = {}
for path in sorted(glob.glob(f"{out}/probe-*.json")):
    family, region, _ = re.match(r".*/probe-(.+)-(call|gpumode)-(\d+)\.json", path).groups()
    data = json.load(open(path))
    for report in data if isinstance(data, list) else [data]:
        for case in report.get("cases", []):
            t = (case.get("timing") or {}).get("median_ms")
            if t is not None:
                rows.setdefault((family, case["name"]), {}).setdefault(region, []).append(t)
print(f"{'family':22} {'case':16} {'call ms (per process)':32} {'spread':>7} {'gpumode ms (per process)':32} {'spread':>7}")
for (family, case), by in sorted(rows.items()):
    cells = []
    for region in ("call", "gpumode"):
        ts = by.get(region, [])
        spread = (max(ts) - min(ts)) / min(ts) * 100 if len(ts) > 1 else float("nan")
        cells += [" ".join(f"{t:.4f}" for t in ts), f"{spread:6.1f}%"]
    print(f"{family:22} {case:16} {cells[0]:32} {cells[1]:>7} {cells[2]:32} {cells[3]:>7}")
PY
grep -A30 "composite" "$OUT/big640.txt" | head -40
