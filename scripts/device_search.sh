#!/usr/bin/env bash
# The search-throughput measurement on a 2-GPU host: the same search (runs/h200.yaml, fixed seed,
# Optuna and crossover, no LLM: the device machine has no network) for MINUTES on 1 GPU, then on 2.
# Each run starts with an empty Triton cache so neither inherits the other's compiled kernels.
# Outputs under $OUT: env.txt, gpu1.log, gpu2.log, status1.json, status2.json, runs.tgz,
# composite.py (exported from the 2-GPU run) and export_verify.txt (it on qrv2-tests).
#   bash scripts/device_search.sh 4 "1 2"      # minutes, GPU counts to run (default: 1 2)
set -u
MINUTES=${1:-4}
COUNTS=${2:-1 2}
OUT=${OUT:-/tmp/out}
bash .devbundle/setup.sh && export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv;
  python3 -c "import torch, triton, ray, optuna; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'optuna', optuna.__version__)"; } > "$OUT/env.txt" 2>&1
for g in $COUNTS; do
  export TRITON_CACHE_DIR=/tmp/triton-cache-$g
  rm -rf "$TRITON_CACHE_DIR" "runs/gpu$g"
  timeout $(( MINUTES * 60 + 240 )) python3 -m search launch --config runs/h200.yaml --name "gpu$g" --gpus "$g" \
      --max-minutes "$MINUTES" --max-evals 100000 > "$OUT/gpu$g.log" 2>&1
  echo "exit $?" >> "$OUT/gpu$g.log"
  python3 -m search status "runs/gpu$g" --json > "$OUT/status$g.json" 2>&1
done
LAST=runs/gpu${COUNTS##* }
tar --exclude='work' -czf "$OUT/runs.tgz" $(for g in $COUNTS; do echo runs/gpu$g; done)
if python3 -m search export "$LAST" --composite -o "$OUT/composite.py" > "$OUT/export_verify.txt" 2>&1; then
  python3 -m search verify "$OUT/composite.py" --suite qrv2-tests >> "$OUT/export_verify.txt" 2>&1
  echo "verify exit $?" >> "$OUT/export_verify.txt"
fi
for g in $COUNTS; do tail -n 4 "$OUT/gpu$g.log"; done
tail -n 4 "$OUT/export_verify.txt"
python3 - "$OUT" $COUNTS <<'PY'
import json, sys
for g in sys.argv[2:]:
    s = json.load(open(f"{sys.argv[1]}/status{g}.json"))
    best = {k: round(v["speedup"] or 0, 1) for k, v in s["best"].items()}
    print(f"gpus={g} evals={s['evaluations']} per_min={s['evals_per_minute']} busy={s['busy_fraction']} best={best}")
PY
