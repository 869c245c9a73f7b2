#!/usr/bin/env bash
# GPU MODE's own runner (qr_v2's eval.py, leaderboard mode: every timed output re-checked) on the
# composite of the families' defaults, with a seed of your choosing (GPU machine, repo root, $OUT set).
#
#   bash tools/gpumode_eval.sh RUNNER_DIR SEED [SPECS] [TIMEOUT_S]
#
# RUNNER_DIR holds eval.py, reference.py and task.py of problems/linalg/qr_v2 and utils.py of
# problems/pmpp_v2 from a checkout of gpu-mode/reference-kernels (they are GPU MODE's, not part of
# this repository: fetch them into an ignored folder and carry it), and task.yml:
# `python tools/gpumode_runner.py REFERENCE_KERNELS_GIT_DIR .probe/gpumode` writes them, with the
# spec files of the groups a call fits (wt9.txt, small3.txt, ...).
# SPECS is a file of specs one per line ("batch: 20; n: 32; cond: 1; seed: 43214"); by default the
# task's benchmarks.  The routes below are the composite's (tools/composite_file.py); eval.py's
# table is printed with the geomean.  The first run of a fresh machine compiles the CUDA families
# inside eval.py's warm-up.  Leaderboard mode runs every spec untimed first, then times each with up
# to 30 s of rechecked runs: 12 specs do not fit one 600 s device call (9 did in 320 s), so give
# SPECS six at a time.
set -u
. lab/device_common.sh
dir=$1 seed=$2 specs=${3:-} limit=${4:-400}
ROUTES=${ROUTES:-"20x32=cuda_onchip 40x176=cuda_onchip 40x352=lookahead_split 640x512=cuda_blocked 60x1024=cuda_blocked 8x2048=cuda_blocked 2x4096=cuda_blocked"}
args=()
for r in $ROUTES; do args+=(--route "$r"); done
python3 tools/composite_file.py "${args[@]}" -o "$dir/submission.py" || exit 1
if [ -z "$specs" ]; then
  specs=$dir/benchmarks.txt
  python3 - "$dir/task.yml" "$specs" <<'PY' || exit 1
import sys
sys.path.insert(0, "tools")
from gpumode_runner import benchmark_specs
open(sys.argv[2], "w").write("".join(s + "\n" for s in benchmark_specs(open(sys.argv[1]).read())))
PY
fi
specs=$(realpath "$specs")  # eval.py runs inside $dir
cp "$dir/submission.py" "$OUT/submission.py"
stamp "eval.py leaderboard, POPCORN_SEED=$seed, $(wc -l < "$specs") specs"
( cd "$dir" && POPCORN_FD=3 POPCORN_SEED=$seed timeout "$limit" python3 eval.py leaderboard "$specs" \
    3> "$OUT/popcorn.txt" > "$OUT/eval_stdout.txt" 2>&1; echo "eval.py exit $?" )
python3 - "$OUT/popcorn.txt" <<'PY'
import math, re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"benchmark\.(\d+)\.(\w+): (.*)", line.strip())
    if m:
        rows.setdefault(int(m[1]), {})[m[2]] = m[3]
times = []
print("| # | spec | mean ms | runs |\n|---|---|---|---|")
for i in sorted(rows):
    r = rows[i]
    ms = float(r["mean"]) / 1e6 if "mean" in r else None
    times += [ms] if ms else []
    print(f"| {i} | {r.get('spec', '')} | {f'{ms:.4g}' if ms else r.get('error', 'not run')} | {r.get('runs', '-')} |")
if times:
    print(f"| | **geomean of {len(times)}** | **{math.exp(sum(map(math.log, times)) / len(times)):.4g}** | |")
PY
grep "^check" "$OUT/popcorn.txt" || echo "check: not reached (timed out)"
