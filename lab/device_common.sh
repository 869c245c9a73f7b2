# Sourced by the kernel device-call scripts (GPU machine, repo root, $OUT set): the carried
# Python packages, the caches, a timestamped log line (stamp), the machine's setup in
# $OUT/setup.txt, and precompile_plan PLAN, which builds the CUDA C++ families and compiles
# every variant of a plan of lab/bench_families.py in 12 processes (one variant each,
# batch-1 inputs) into $OUT/precompile.log.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
bash .devbundle/setup.sh > /dev/null && export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache TORCH_EXTENSIONS_DIR=/tmp/torch-ext
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/log.txt"; }
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  nvcc --version | tail -1
} > "$OUT/setup.txt" 2>&1

precompile_plan() {
  local w
  for w in $(seq 0 11); do
    python3 lab/bench_families.py precompile "$1" "$w" 12 >> "$OUT/precompile.log" 2>&1 &
  done
  wait
  stamp "precompiled: $(grep -c '^precompiled' "$OUT/precompile.log") ok, $(grep -c 'failed' "$OUT/precompile.log") failed"
  grep failed "$OUT/precompile.log" | cut -c1-600
}
