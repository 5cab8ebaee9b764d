#!/usr/bin/env bash
# One span of GPU time through the device tool: the campaign's prepared command, run from the checkout's root.
#
#   bash benchmarks/device_run.sh SECONDS
#
# Installs the wheels carried in .whl (vaezoo's own, built here with `pip wheel --no-deps . -w .whl`, and
# those the device machine lacks: pydantic and its needs, platformdirs, tomli-w), times bench_train.py on
# CUDA (one model against ensembles of 12), then runs the campaign (benchmarks/campaign.toml) with what is
# left of SECONDS. Everything it brings back is in $OUT: bench.txt, campaign.log, campaign.json and one
# NAME.campaign.safetensors a trained recipe.
set -uo pipefail
budget=${1:-540}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/bench.txt"
VAEZOO_PROGRESS=0 timeout 80 python3 benchmarks/bench_train.py --device cuda --card betatcvae-dsprites \
  --batch-sizes 64 --steps 100 --rounds 2 --ensemble 12 2>&1 | grep -v "^seed " | tee -a "$OUT/bench.txt"
left=$((budget - SECONDS - 20))
python3 benchmarks/device_campaign.py --device cuda --deadline "$left" --out "$OUT" 2>&1 | tee "$OUT/campaign.log"
