#!/usr/bin/env bash
# Device call (probe): two copies of cuda_onchip (OLD, the working tree's NEW) side by side at 20x32 and
# 40x176 with the same PARAMS variants, each verified on four stress profiles first; one process per
# copy, the same machine.   bash lab/onchip_ab.sh OLD_FILE LAYOUT...   (repo root, $OUT set)
# LAYOUT: g32_<layout> or g176_<layout> (see lab/onchip_groups_probe.sh).
set -u
source lab/device_common.sh
old=$1
shift
variants=(--variant base)
for v in "$@"; do variants+=(--variant "$v:groups_${v%%_*}=${v#*_}"); done
variants=("${variants[@]//groups_g/groups_}")
for side in old new; do
  file=kernels/families/files/cuda_onchip.py
  [ "$side" = old ] && file=$old
  timeout 250 python3 lab/blocked_probe.py --file "$file" --shape 20x32 --shape 40x176 --rounds 5 --calls 20 --profile \
    --check rankdef --check mixed --check clustered --check nearrank "${variants[@]}" > "$OUT/ab_$side.txt" 2>&1
  stamp "$side: exit $?"
  grep -i "FAILED\|error" "$OUT/ab_$side.txt" | head -5
  grep -A1 "^  profile" "$OUT/ab_$side.txt" | grep -v "^--" | paste - - | awk '{print $2, $3, $4, $10}'
done
