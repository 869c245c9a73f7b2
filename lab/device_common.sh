# Sourced by the kernel device-call scripts (GPU machine, repo root, $OUT set): the carried
# Python packages, the caches, a timestamped log line (stamp), the machine's setup in
# $OUT/setup.txt, precompile_plan PLAN, which builds the CUDA C++ families and compiles
# every variant of a plan of lab/bench_families.py in 12 processes (one variant each,
# batch-1 inputs) into $OUT/precompile.log, adopt_blocked OVERRIDES WHY-NOT, which writes cuda_blocked's
# PARAMS with OVERRIDES over the device's copy (kept in $OUT; nothing where OVERRIDES is empty),
# verify_blocked, qrv2-tests of that copy into $OUT/verify_cb.txt, and build_extensions FILE...,
# which builds each family file's CUDA extension in a process of its own, all at once, so that
# nothing timed afterwards shares the machine with nvcc ($OUT/build_N.txt).
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

adopt_blocked() {
  if [ -n "$1" ]; then
    python3 tools/param_variant.py cuda_blocked "$1" /tmp/cb_variant.py \
      && cp /tmp/cb_variant.py kernels/families/files/cuda_blocked.py
    cp kernels/families/files/cuda_blocked.py "$OUT/cuda_blocked_adopted.py"
    stamp "adopted on the device's copy: $1"
  else
    stamp "$2: nothing adopted (the defaults are verified and timed as they are)"
  fi
}

verify_blocked() {
  timeout 240 python3 -m search verify kernels/families/files/cuda_blocked.py --suite qrv2-tests > "$OUT/verify_cb.txt" 2>&1
  stamp "verify cuda_blocked on qrv2-tests: exit $? ($(grep -o '[0-9]*/[0-9]* cases passed' "$OUT/verify_cb.txt"))"
}

build_extensions() {
  local i=0 f
  for f in "$@"; do
    python3 - "$f" > "$OUT/build_$i.txt" 2>&1 <<'PY' &
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("family_build", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module._extension(torch.device("cuda"))
print("built", sys.argv[1])
PY
    i=$((i + 1))
  done
  wait
  stamp "built: $(cat "$OUT"/build_*.txt | grep -c '^built') of $#"; grep -h -i error "$OUT"/build_*.txt | head -5
}
