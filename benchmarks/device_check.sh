#!/usr/bin/env bash
# What a user does on a GPU, checked on the device machine (the test suite runs on CPUs):
#
#   bash benchmarks/device_check.sh        # through the device tool, carrying .whl and .data
#
# Installs vaezoo as device_run.sh does, unpacks MNIST from .data/MNIST/raw/*.gz (make it with
# `mkdir -p .data/MNIST/raw && for f in ../shared/datasets/MNIST/raw/*; do gzip -9 -n -c $f >
# .data/MNIST/raw/$(basename $f).gz; done`; 11 MB), then: every zoo entry loaded with device="cuda" against the
# CPU (benchmarks/device_check.py); `vaezoo eval NAME --check` on the GPU for the MNIST entries; a short
# `vaezoo train --device auto` and its evaluation. (A dSprites entry's suite does not fit: four of
# betatcvae-joint-dsprites's metrics had not finished in 240 s on an H200, docs/benchmarks.md.)
# Everything goes to $OUT/device_check.log.
set -uo pipefail
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 VAEZOO_PROGRESS=0
pip_install="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site"
[ -d /tmp/site/vaezoo ] || { $pip_install .whl/*.whl && $pip_install --no-build-isolation . ; } || exit 1
mkdir -p /tmp/data/MNIST/raw
for f in .data/MNIST/raw/*.gz; do gunzip -c "$f" > "/tmp/data/MNIST/raw/$(basename "$f" .gz)"; done
vaezoo="python3 -m vaezoo"
step() {  # step SECONDS COMMAND...: one check, timed, its output and exit code logged
  local limit=$1; shift
  echo "\$ $*"; local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tail -n 25; echo "exit ${PIPESTATUS[0]} in $((SECONDS - start)) s"; echo
}
{
  nvidia-smi --query-gpu=name,memory.total --format=csv
  step 120 python3 benchmarks/device_check.py --device cuda
  step 120 $vaezoo eval jointvae-mnist --device cuda --check --data-root /tmp/data
  step 120 $vaezoo eval jointvae-original-mnist --device auto --check --data-root /tmp/data
  step 120 $vaezoo eval vae-mnist --device cuda --check --metrics elbo --data-root /tmp/data
  step 120 $vaezoo train jointvae-mnist --device auto --data-root /tmp/data --epochs 1 --out /tmp/run --no-eval
  step 120 $vaezoo eval /tmp/run --device cuda --metrics cluster_accuracy --data-root /tmp/data
} > "$OUT/device_check.log" 2>&1
cat "$OUT/device_check.log"
