. lab/device_common.sh; C="--check rankdef --check mixed --check nearrank --check clustered"
for f in kernels/families/files/cuda_blocked.py .probe/cb_rsqrt.py; do timeout 150 python3 lab/blocked_probe.py --file $f --shape 2x4096 --shape 8x2048 --rounds 3 --calls 5 $C --variant base:max_n=4096 > $OUT/ab_$(basename $f .py).txt 2>&1; stamp "$f $?"; grep -E "^[0-9]|^  base |FAIL|rror" $OUT/ab_$(basename $f .py).txt; done
m() { awk '/^[0-9]+x[0-9]+: median/{s=$1} /^  base /{print s, $2}' $OUT/ab_$1.txt; }
paste <(m cuda_blocked) <(m cb_rsqrt) | awk '{if ($4 > 0.98*$2 || $4=="") bad=1; n++} END {exit (bad || n<2)}' && cp .probe/cb_rsqrt.py kernels/families/files/cuda_blocked.py && cp .probe/cb_rsqrt.py $OUT/adopted.py && stamp "rsqrt adopted"
timeout 60 python3 -m search verify kernels/families/files/cuda_blocked.py --suite qrv2-tests > $OUT/verify.txt 2>&1; stamp "verify $? $(grep -o '[0-9]*/[0-9]* cases passed' $OUT/verify.txt)"
mkdir -p $OUT/eval; OUT=$OUT/eval timeout 330 bash tools/gpumode_eval.sh .probe/gpumode 9137 "" 320
left=$(( 575 - ($(date +%s) - t0) )); stamp "ncu with ${left}s left"
[ $left -gt 40 ] && timeout $left ncu --profile-from-start off --clock-control none -k "regex:cholqr_(first|second)" -s 20 -c 2 --section SpeedOfLight --section LaunchStats --section WarpStateStats --section InstructionStats --section SourceCounters python3 lab/ncu_probe.py cuda_blocked 2x4096 > $OUT/ncu_leaf.txt 2>&1; stamp "ncu $?"
