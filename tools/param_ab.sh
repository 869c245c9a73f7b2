#!/usr/bin/env bash
# A/B of one family's committed defaults against parameter overrides, on the GPU machine (repo
# root, $OUT set): `qrsearch bench` of each file in ROUNDS fresh processes, alternating A and B so
# that drift hits both, GPU MODE's timed regions, the search's timing CPUs; prints each case's
# medians per process and the median of them.
#
#   bash tools/param_ab.sh FAMILY 'KEY=VALUE[,KEY=VALUE]' CASES [ROUNDS]
# e.g. bash tools/param_ab.sh cuda_blocked apply_warps_le512=4 dense-640x512-c1,mixed-640x512-c1 3
set -u
FAMILY=$1 OVERRIDES=$2 CASES=$3 ROUNDS=${4:-3}
. lab/device_common.sh
B=$(mktemp -d)/$FAMILY.py
python3 tools/param_variant.py "$FAMILY" "$OVERRIDES" "$B" || exit 2
cpus=$(python3 -c "import os; from search.evaluate.placement import split_cpus
print(','.join(map(str, sorted(split_cpus(sorted(os.sched_getaffinity(0)), 0, 1)[0]))))")
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    file="kernels/families/files/$FAMILY.py"; [ "$side" = B ] && file=$B
    timeout 200 python3 -m search bench "$file" --suite qrv2-bench --no-baseline --cpus "$cpus" \
      --cases "$CASES" --timing-region gpumode --json-out "$OUT/ab_${FAMILY}_${side}$r.json" > /dev/null 2>&1 \
      || echo "bench $side round $r: exit $?"
  done
done
python3 - "$OUT" "$FAMILY" "$OVERRIDES" <<'EOF'
import json, statistics, sys, pathlib
out, family, overrides = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
runs = {side: [json.loads(p.read_text()) for p in sorted(out.glob(f"ab_{family}_{side}*.json"))] for side in "AB"}
def medians(doc):
    return {c["name"]: c["timing"]["median_ms"] for c in doc["cases"] if c.get("timing")}
print(f"{family}: A = committed defaults, B = {overrides}")
cases = sorted({c for docs in runs.values() for d in docs for c in medians(d)})
for c in cases:
    a = [medians(d).get(c) for d in runs["A"]]; b = [medians(d).get(c) for d in runs["B"]]
    a = [x for x in a if x]; b = [x for x in b if x]
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"  {c:22s} A {' '.join(f'{x:.4f}' for x in a)} | B {' '.join(f'{x:.4f}' for x in b)} | B/A {mb / ma:.3f}")
EOF
