#!/usr/bin/env bash
# The A/Bs behind a change of family defaults (kernels/BENCHMARKS.md), on the GPU machine (repo
# root, $OUT set): each line runs tools/param_ab.sh into its own folder of $OUT and keeps the
# table it prints in $OUT/<name>.txt.
#
#   bash lab/defaults_ab.sh PLAN      (PLAN: s14a, s14b; see below)
set -u
OUT=${OUT:-/tmp/out}
. lab/device_common.sh
ab() {  # name family overrides cases rounds
  mkdir -p "$OUT/$1"
  OUT="$OUT/$1" bash tools/param_ab.sh "$2" "$3" "$4" "$5" > "$OUT/$1.txt" 2>&1
  cat "$OUT/$1.txt"
}
case ${1:?plan} in
  s14a)  # session 14: cuda_blocked's new defaults against the old ones, 60x1024's warps, cuda_onchip
    ab cb-old cuda_blocked nb_le512=64,block_le512=128,apply_bn=64,apply_stages=2 \
      dense-40x352-c1,dense-640x512-c2,mixed-640x512-c2,dense-60x1024-c2,mixed-60x1024-c2 2
    ab cb-w4 cuda_blocked apply_warps_le1024=4 dense-60x1024-c2,mixed-60x1024-c2,nearrank-60x1024-c0 3
    ab onchip cuda_onchip warps_96=4,warps_128=8,warps_160=32,warps_192=16 dense-20x32-c1,dense-40x176-c1 3
    ;;
  s14b)  # session 14: lookahead_split's Cholesky QR panels; run m's winners' knobs, tall cases and 40x352 apart
    ab la-cholqr lookahead_split coop_panel=cholqr2 dense-8x2048-c1,dense-2x4096-c1 2
    ab la-tall lookahead_split prec_t=tf32x3,stages_coop=3 dense-8x2048-c1,dense-2x4096-c1 2
    python3 tools/param_variant.py lookahead_split coop_panel=cholqr2 "$OUT/variants/lookahead_split.py"
    timeout 300 python3 -m search verify "$OUT/variants/lookahead_split.py" --suite qrv2-tests > "$OUT/verify-cholqr2.txt" 2>&1
    echo "verify cholqr2 on qrv2-tests: exit $?"; tail -30 "$OUT/verify-cholqr2.txt"
    ;;
  s14c)  # session 14: run m's 40x352 winner's knobs (B/A 1.06: one B process in the slow mode; not adopted)
    ab la-352 lookahead_split bm_min=32,join_reduce=False,warps_bm_le256=8 dense-40x352-c1 2
    ;;
  *) echo "unknown plan $1" >&2; exit 2 ;;
esac
