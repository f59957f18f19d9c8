#!/usr/bin/env bash
# The GPU checks of issue 27 in one call, for a machine with one CUDA GPU and python3 with torch
# (submitit may come as a wheel in .whl/, installed to /tmp/site). Writes everything under $OUT:
#   device.txt        the GPU, driver and torch
#   pytest_gpu.txt    pytest tests/gpu (-rA -s: the tests' printed measurements too)
#   bench_shrink.txt  python -m prunex.bench.shrink --device cuda --keep 0.5 --sweep
#   gpu_round.txt/csv python -m benchmarks.gpu_round --device cuda --iterations 10 --profile 2 (1 x 1 ResNet-152
#                     H-SADMM, keep 0.5: medians over the frozen iterations after the first, up to 7)
# Usage: OUT=/some/dir bash benchmarks/gpu_checks.sh
set -uo pipefail
OUT=${OUT:-/tmp/gpu-checks}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD
fi
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; } 2>&1 | tee "$OUT/device.txt"
rc=0
timeout 240 python3 -m pytest tests/gpu -q -rA -s -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.txt" || rc=1
timeout 120 python3 -m prunex.bench.shrink --device cuda --keep 0.5 --sweep 2>&1 | tee "$OUT/bench_shrink.txt" || rc=1
timeout 150 python3 -m benchmarks.gpu_round --device cuda --iterations 10 --out "$OUT/gpu_round.csv" --profile 2 2>&1 | tee "$OUT/gpu_round.txt" || rc=1
exit $rc
