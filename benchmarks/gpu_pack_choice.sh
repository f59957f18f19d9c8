#!/usr/bin/env bash
# The bucket pack's launch setting on this GPU: bench.shrink --sweep names the fastest block size and warps, then
# benchmarks.gpu_round runs with the default, with the fastest, and with the default again (the machine drifts).
# Usage: OUT=/some/dir bash benchmarks/gpu_pack_choice.sh (submitit as a wheel in .whl/, as gpu_checks.sh)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
mkdir -p "$OUT"; nvidia-smi -L > $OUT/device.txt
timeout 90 python3 -m prunex.bench.shrink --device cuda --keep 0.5 --sweep > $OUT/bench_shrink.txt 2>&1
best=$(grep '^# fastest pack' $OUT/bench_shrink.txt | grep -o 'PRUNEX_PACK_BLOCK=[0-9]* PRUNEX_PACK_WARPS=[0-9]*')
echo "best: $best"; grep '^# ' $OUT/bench_shrink.txt | tail -20
for tag in default best default2; do
  if [ $tag = best ]; then e="$best"; else e=""; fi
  env $e timeout 70 python3 -m benchmarks.gpu_round --device cuda --iterations 10 --out $OUT/round_$tag.csv > $OUT/round_$tag.txt 2>&1
  echo "$tag ($e):"; tail -4 $OUT/round_$tag.txt
done
env $best timeout 80 python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | tail -3
