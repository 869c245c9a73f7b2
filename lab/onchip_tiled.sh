#!/usr/bin/env bash
# Device call (probe): cuda_onchip's tiled kernel (panels of NB columns on one warp, the update out of
# shared memory) against the defaults at 40x176, every variant verified on five profiles first; the
# fastest tiled variant, where it beats the defaults by 3%, is adopted on the device's copy, which then
# runs qrv2-tests, `qrsearch bench --timing-region gpumode` on 20x32 and 40x176, and GPU MODE's eval.py
# (leaderboard) on both.
#   bash lab/onchip_tiled.sh RUNNER_DIR SEED 'name:KEY=VALUE' ...   (repo root, $OUT set)
set -u
source lab/device_common.sh
dir=$1 seed=$2
shift 2
F=kernels/families/files/cuda_onchip.py
variants=(--variant base)
for v in "$@"; do variants+=(--variant "$v"); done
timeout 420 python3 lab/blocked_probe.py --file $F --shape 40x176 --rounds 5 --calls 20 --profile \
  --check rankdef --check mixed --check nearrank --check clustered "${variants[@]}" > "$OUT/tiled_probe.txt" 2>&1
stamp "probe: exit $?"
grep -A12 "median over" "$OUT/tiled_probe.txt"
best=$(python3 - "$OUT/tiled_probe.txt" "$@" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
table = text.split("median over", 1)[1] if "median over" in text else ""
times = {m.group(1): float(m.group(2)) for m in re.finditer(r"^  (\S+)\s+([\d.]+) \(", table, re.M)}
spec = {v.split(":", 1)[0]: v.split(":", 1)[1] for v in sys.argv[2:]}
base = times.get("base")
cands = [(t, n) for n, t in times.items() if n in spec]
if base and cands and min(cands)[0] < 0.97 * base:
    print(spec[min(cands)[1]])
PY
)
if [ -n "$best" ]; then
  python3 tools/param_variant.py cuda_onchip "$best" /tmp/onchip_variant.py && cp /tmp/onchip_variant.py $F
  cp $F "$OUT/cuda_onchip_adopted.py"
  stamp "adopted on the device's copy: $best"
else
  stamp "no tiled variant 3% faster: the defaults are verified and timed as they are"
fi
timeout 150 python3 -m search verify $F --suite qrv2-tests > "$OUT/verify_onchip.txt" 2>&1
stamp "verify cuda_onchip on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_onchip.txt"))"
timeout 150 python3 -m search bench $F --suite qrv2-bench --timing-region gpumode --cases dense-20x32-c1,dense-40x176-c1 \
  --json-out "$OUT/bench_onchip.json" > "$OUT/bench_onchip.txt" 2>&1
stamp "bench: exit $?"; tail -8 "$OUT/bench_onchip.txt"
bash tools/gpumode_eval.sh "$dir" "$seed" "$dir/small2.txt" 150 2>&1 | tail -6
