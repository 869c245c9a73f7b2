#!/usr/bin/env bash
# Device call (probe): cuda_onchip's tiled kernel (panels of NB columns on one warp, the update out of
# shared memory, or out of H above n = 192) against the defaults: at 40x176 against the file's
# defaults, at 40x352 against lookahead_split (the composite's family there), every variant verified on
# five profiles first.  The fastest tiled variant of each shape, where it beats the other by 3%, is
# adopted on the device's copy, which then runs qrv2-tests, `qrsearch bench --timing-region gpumode`
# on the small cases, and GPU MODE's eval.py (leaderboard) on 20x32, 40x176 and 40x352 with the
# composite's routes (40x352 to cuda_onchip where adopted).
#   bash lab/onchip_tiled.sh RUNNER_DIR SEED 'VARIANTS_176' 'VARIANTS_352'   (repo root, $OUT set)
#   VARIANTS: space-separated name:KEY=VALUE[,KEY=VALUE]
set -u
source lab/device_common.sh
dir=$1 seed=$2 v176=$3 v352=$4
F=kernels/families/files/cuda_onchip.py
CHECKS=(--check rankdef --check mixed --check nearrank --check clustered)
probe() {  # out file shape variants...
  local out=$1 file=$2 shape=$3; shift 3
  local args=()
  for v in "$@"; do args+=(--variant "$v"); done
  timeout 300 python3 lab/blocked_probe.py --file "$file" --shape "$shape" --rounds 5 --calls 20 --profile \
    "${CHECKS[@]}" "${args[@]}" > "$OUT/$out" 2>&1
  stamp "probe $shape ($file): exit $?"
  grep -A10 "median over" "$OUT/$out" | grep -v Warn
}
best() {  # probe-file base-time-or-empty variants...: the fastest variant 3% under the base
  python3 - "$@" <<'PY'
import sys
sys.path.insert(0, "lab")
from blocked_probe import read_medians
times = {name: ms for (_, name), ms in read_medians(sys.argv[1])[0].items()}  # one shape a probe file
spec = {v.split(":", 1)[0]: v.split(":", 1)[1] for v in sys.argv[3:]}
base = float(sys.argv[2]) if sys.argv[2] else times.get("base")
cands = [(t, n) for n, t in times.items() if n in spec]
if base and cands and min(cands)[0] < 0.97 * base:
    print(spec[min(cands)[1]])
PY
}
timeout 400 python3 -c "
import importlib.util, torch
spec = importlib.util.spec_from_file_location('f', '$F'); f = importlib.util.module_from_spec(spec); spec.loader.exec_module(f)
f._extension(torch.device('cuda'))" > "$OUT/build.txt" 2>&1
stamp "built cuda_onchip: exit $?"
probe tiled_probe_176.txt $F 40x176 base $v176
probe tiled_probe_352.txt $F 40x352 $v352
probe lookahead_352.txt kernels/families/files/lookahead_split.py 40x352 base
ref352=$(grep -A3 "median over" "$OUT/lookahead_352.txt" | awk '$1 == "base" {print $2}')
adopt=$(best "$OUT/tiled_probe_176.txt" "" $v176)
a352=$(best "$OUT/tiled_probe_352.txt" "$ref352" $v352)
[ -n "$a352" ] && adopt=${adopt:+$adopt,}$a352
ROUTES="20x32=cuda_onchip 40x176=cuda_onchip 40x352=lookahead_split"
[ -n "$a352" ] && ROUTES="20x32=cuda_onchip 40x176=cuda_onchip 40x352=cuda_onchip"
export ROUTES
if [ -n "$adopt" ]; then
  python3 tools/param_variant.py cuda_onchip "$adopt" /tmp/onchip_variant.py && cp /tmp/onchip_variant.py $F
  cp $F "$OUT/cuda_onchip_adopted.py"
  stamp "adopted on the device's copy: $adopt"
else
  stamp "no tiled variant 3% faster: the defaults are verified and timed as they are"
fi
timeout 150 python3 -m search verify $F --suite qrv2-tests > "$OUT/verify_onchip.txt" 2>&1
stamp "verify cuda_onchip on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_onchip.txt"))"
timeout 150 python3 -m search bench $F --suite qrv2-bench --timing-region gpumode \
  --cases dense-20x32-c1,dense-40x176-c1${a352:+,dense-40x352-c1} --json-out "$OUT/bench_onchip.json" > "$OUT/bench_onchip.txt" 2>&1
stamp "bench: exit $?"; tail -8 "$OUT/bench_onchip.txt"
bash tools/gpumode_eval.sh "$dir" "$seed" "$dir/small3.txt" 150 2>&1 | tail -7
