. lab/device_common.sh
C="--check rankdef --check mixed --check nearrank --check clustered --check band --check rowscale --check nearcollinear"
for f in .probe/cb_before.py kernels/families/files/cuda_blocked.py; do
  timeout 150 python3 lab/blocked_probe.py --file $f --shape 2x4096 --shape 8x2048 --rounds 5 --calls 5 $C --variant base:max_n=4096 > $OUT/ab_$(basename $f .py).txt 2>&1
  stamp "$f $?"; grep -E "^[0-9]|^  base |FAIL|rror|failed" $OUT/ab_$(basename $f .py).txt
done
verify_blocked; tail -1 $OUT/verify_cb.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/test_cuda_families.py -k "cholqr" > $OUT/pytest_gpu.txt 2>&1; stamp "pytest gpu cholqr $?"; tail -2 $OUT/pytest_gpu.txt
