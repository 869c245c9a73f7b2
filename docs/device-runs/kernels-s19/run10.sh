#!/usr/bin/env bash
# New defaults (lookahead at 60x1024 and 2x4096): qrv2-tests, GPU MODE eval.py on all 12 cases, bench.
set -u
. lab/device_common.sh
python3 -c "import typer, click; print('device typer', typer.__version__, 'click', click.__version__)" 2>&1 | tail -1
export PYTHONPATH=$PWD/.probe/pysite:$PYTHONPATH  # the typer/click/rich this checkout is tested with
stamp start
timeout 200 python3 -m search verify kernels/families/files/cuda_blocked.py --suite qrv2-tests > "$OUT/verify_cuda_blocked.txt" 2>&1
stamp "verify cuda_blocked qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_cuda_blocked.txt"))"
grep -iE "fail" "$OUT/verify_cuda_blocked.txt" | head -5
ROUTES="20x32=cuda_onchip 40x176=cuda_onchip 40x352=lookahead_split 640x512=cuda_blocked 60x1024=cuda_blocked 8x2048=cuda_blocked 2x4096=cuda_blocked"
args=(); for r in $ROUTES; do args+=(--route "$r"); done
python3 tools/composite_file.py "${args[@]}" -o /tmp/warm_submission.py
python3 - <<'PY' > "$OUT/warm.txt" 2>&1
import importlib.util, torch, sys
sys.path.insert(0, ".probe/gpumode")
spec = importlib.util.spec_from_file_location("warm", "/tmp/warm_submission.py"); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
for b, n in [(20, 32), (40, 176), (40, 352), (640, 512), (60, 1024), (8, 2048), (2, 4096)]:
    a = torch.randn(b, n, n, device="cuda"); m.custom_kernel(a); torch.cuda.synchronize(); print("warm", b, n, flush=True)
PY
stamp "warm-up: $(grep -c warm "$OUT/warm.txt") shapes"
bash tools/gpumode_eval.sh .probe/gpumode 9137 "" 320
stamp "eval done"
timeout 150 python3 -m search bench kernels/families/files/cuda_blocked.py --suite qrv2-bench --no-baseline \
    --timing-region gpumode --cases "dense-640x512-c2,mixed-640x512-c2,rankdef-640x512-c0,clustered-640x512-c0,dense-60x1024-c2,mixed-60x1024-c2,nearrank-60x1024-c0,dense-8x2048-c1,dense-2x4096-c1" \
    --json "$OUT/bench_cuda_blocked.json" > "$OUT/bench_cuda_blocked.txt" 2>&1
stamp "bench: exit $?"
tail -16 "$OUT/bench_cuda_blocked.txt"
