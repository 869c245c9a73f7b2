#!/usr/bin/env bash
# The search-throughput measurement on an H200 host: the same search (runs/h200.yaml, fixed seed,
# Optuna and crossover, no LLM: the device machine has no network) for MINUTES on each GPU count.
# Each run starts with an empty Triton cache so no run inherits another's compiled kernels.
#
# A device command may run 10 minutes at most, so a 10-minute search runs detached and spans two calls:
#   bash lab/device_search.sh start 10 1     # launch detached, report progress for ~9.5 min
#   bash lab/device_search.sh collect 1      # next call (machine still warm): wait, collect
# (WATCH_S sets how long start watches, 470 s by default: less when the call does other work first)
# or, for short searches that fit in one call (counts run one after another):
#   bash lab/device_search.sh run 3 "1 2"
# Outputs under $OUT: env.txt, gpuN.log, statusN.json, timelineN.txt (where the time went: tools/run_timeline.py),
# honesty.txt (the seeds' standalone benches against the search's medians: tools/honesty_table.py),
# runs.tgz (run dirs without work/ and the Triton cache), composite.py (exported from the last count's run)
# and export_verify.txt (it on qrv2-tests).
set -u
MODE=${1:-run}
OUT=${OUT:-/tmp/out}
bash .devbundle/setup.sh > /dev/null && export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STATE=/tmp/qrsearch-device   # survives between calls while the machine stays warm

env_report() {
  { date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv;
    python3 -c "import torch, triton, ray, optuna; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'optuna', optuna.__version__)"; } > "$OUT/env.txt" 2>&1
}

launch() {  # launch G MINUTES [CONFIG NAME]: start one search in its own session, detached from this shell
  local g=$1 minutes=$2 config=${3:-runs/h200.yaml} name=${4:-gpu$1}
  export TRITON_CACHE_DIR=/tmp/triton-cache-$name
  rm -rf "$TRITON_CACHE_DIR" "runs/$name"
  mkdir -p "$STATE"
  setsid nohup timeout $(( minutes * 60 + 300 )) python3 -m search launch --config "$config" \
      --name "$name" --gpus "$g" --max-minutes "$minutes" --max-evals 100000 \
      > "$STATE/$name.log" 2>&1 < /dev/null &
  echo $! > "$STATE/$name.pid"
}

running() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

watch() {  # watch NAME SECONDS: print a status line every 30 s until the run ends or SECONDS pass
  local name=$1 until=$(( SECONDS + $2 ))
  while running "$name" && [ $SECONDS -lt $until ]; do
    sleep 30
    python3 -m search status "runs/$name" --json 2>/dev/null | python3 -c "
import json, sys
s = json.load(sys.stdin)
print(f\"t={$SECONDS}s evals={s['evaluations']} per_min={s['evals_per_minute']} busy={s['busy_fraction']}\", flush=True)" || true
  done
}

honesty() {  # honesty G: a standalone `qrsearch bench` of each seed file on the cases the search timed it on,
  # right after the search on the same machine, against the search's per-case medians (its own Triton cache)
  local run=runs/gpu$1 i=0 file cases family short
  rm -f "$STATE"/bench_seed*.json "$STATE"/bench_repeat*.json
  python3 tools/honesty_table.py plan "$run" > "$STATE/seeds.txt"
  local region
  region=$(python3 tools/honesty_table.py region "$run")  # timed as the search timed them
  # The standalone benches run on the CPUs the search's timing child ran on (evaluator 0's slice).
  local cpus
  cpus=$(python3 -c "import os; from search.evaluate.placement import split_cpus
print(','.join(map(str, sorted(split_cpus(sorted(os.sched_getaffinity(0)), 0, 1)[0]))))")
  while read -r file cases family short; do
    i=$((i + 1))
    TRITON_CACHE_DIR=$PWD/$run/triton-cache TORCH_EXTENSIONS_DIR=$PWD/$run/torch-extensions \
        python3 -m search bench "$file" --suite qrv2-bench --no-baseline \
        --cpus "$cpus" --cases "$cases" --timing-region "$region" --json-out "$STATE/bench_seed$i.json" > "$STATE/bench_seed$i.txt" 2>&1 || echo "bench of $family: exit $?"
  done < "$STATE/seeds.txt"
  # The noise floor: the launch-bound cases (under 1 ms) of each seed benched a second time
  # (NO_REPEAT=1 skips it, when device time is short).
  [ "${NO_REPEAT:-0}" = 1 ] || while read -r file cases family short; do
    [ "$short" = "-" ] && continue
    i=$((i + 1))
    TRITON_CACHE_DIR=$PWD/$run/triton-cache TORCH_EXTENSIONS_DIR=$PWD/$run/torch-extensions \
        python3 -m search bench "$file" --suite qrv2-bench --no-baseline \
        --cpus "$cpus" --cases "$short" --timing-region "$region" --json-out "$STATE/bench_repeat$i.json" > "$STATE/bench_repeat$i.txt" 2>&1 || echo "repeat of $family: exit $?"
  done < "$STATE/seeds.txt"
  { cat "$STATE/seeds.txt"; python3 tools/honesty_table.py table "$run" $(ls "$STATE"/bench_seed*.json 2>/dev/null) \
      --repeats $(ls "$STATE"/bench_repeat*.json 2>/dev/null) --json "$run/honesty.json"; } > "$OUT/honesty.txt" 2>&1
}

collect() {  # collect COUNTS: status, logs, where the time went, run dirs, composite export and its verification
  local counts=$1 g
  for g in $counts; do
    cp "$STATE/gpu$g.log" "$OUT/gpu$g.log" 2>/dev/null
    python3 -m search status "runs/gpu$g" --json > "$OUT/status$g.json" 2>&1
    python3 tools/run_timeline.py "runs/gpu$g" --json "runs/gpu$g/timeline.json" > "$OUT/timeline$g.txt" 2>&1
  done
  # The run dirs first: if the device time runs out during the benches below, they still come back.
  tar --exclude='work' --exclude='triton-cache' --exclude='torch-extensions' --exclude='seeds' -czf "$OUT/runs.tgz" \
      $(for g in $counts; do echo runs/gpu$g; done)
  honesty "${counts##* }"
  cp "runs/gpu${counts##* }/honesty.json" "$OUT/" 2>/dev/null
  local last=runs/gpu${counts##* }
  if python3 -m search export "$last" --composite -o "$OUT/composite.py" > "$OUT/export_verify.txt" 2>&1; then
    python3 -m search verify "$OUT/composite.py" --suite qrv2-tests >> "$OUT/export_verify.txt" 2>&1
    echo "verify exit $?" >> "$OUT/export_verify.txt"
  fi
  for g in $counts; do tail -n 6 "$OUT/gpu$g.log"; head -n 12 "$OUT/timeline$g.txt"; done
  tail -n 4 "$OUT/export_verify.txt"
  cat "$OUT/honesty.txt"
  python3 - "$OUT" $counts <<'PY'
import json, sys
for g in sys.argv[2:]:
    s = json.load(open(f"{sys.argv[1]}/status{g}.json"))
    best = {k: round(v["speedup"] or 0, 1) for k, v in s["best"].items()}
    print(f"gpus={g} evals={s['evaluations']} per_min={s['evals_per_minute']} busy={s['busy_fraction']} best={best}")
PY
}

case "$MODE" in
  start)   # start MINUTES G
    env_report; launch "$3" "$2"; watch "gpu$3" "${WATCH_S:-470}"
    if running "gpu$3"; then
      echo "still running: collect in the next call"; cp "$STATE/gpu$3.log" "$OUT/"
      # A snapshot so far, in case the machine goes back before the next call.
      python3 -m search status "runs/gpu$3" --json > "$OUT/status$3-partial.json" 2>&1
      python3 tools/run_timeline.py "runs/gpu$3" > "$OUT/timeline$3-partial.txt" 2>&1
    else collect "$3"; fi ;;
  collect) # collect COUNTS
    for g in $2; do
      if ! [ -f "$STATE/gpu$g.pid" ]; then echo "no run gpu$g on this machine (it went cold?)"; exit 1; fi
      watch "gpu$g" 540
    done
    collect "$2" ;;
  run)     # run MINUTES COUNTS
    env_report
    for g in ${3:-1 2}; do launch "$g" "$2"; watch "gpu$g" $(( $2 * 60 + 300 )); done
    collect "${3:-1 2}" ;;
  lanes)   # lanes MINUTES "L1 L2 ..": the same one-GPU search with each lane count, one after the other
    # (runs/h200.yaml with evaluation.lanes replaced); status, timeline and run dir of each, no honesty benches
    env_report
    for l in $3; do
      sed "s/^  lanes: [0-9]*/  lanes: $l/" runs/h200.yaml > "/tmp/h200-lanes$l.yaml"
      grep -q "^  lanes: $l" "/tmp/h200-lanes$l.yaml" || { echo "runs/h200.yaml has no evaluation.lanes line"; exit 2; }
      launch 1 "$2" "/tmp/h200-lanes$l.yaml" "lanes$l"; watch "lanes$l" $(( $2 * 60 + 240 ))
      cp "$STATE/lanes$l.log" "$OUT/lanes$l.log"
      python3 -m search status "runs/lanes$l" --json > "$OUT/status-lanes$l.json" 2>&1
      python3 tools/run_timeline.py "runs/lanes$l" --json "runs/lanes$l/timeline.json" > "$OUT/timeline-lanes$l.txt" 2>&1
      head -n 12 "$OUT/timeline-lanes$l.txt"
    done
    tar --exclude='work' --exclude='triton-cache' --exclude='torch-extensions' --exclude='seeds' -czf "$OUT/runs.tgz" \
        $(for l in $3; do echo runs/lanes$l; done) ;;
  *) echo "usage: $0 start MINUTES G | collect \"COUNTS\" | run MINUTES \"COUNTS\" | lanes MINUTES \"LANES\""; exit 2 ;;
esac
