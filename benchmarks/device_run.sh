#!/usr/bin/env bash
# One span of GPU time through the device tool: the campaign's prepared command, run from the checkout's root.
#
#   bash benchmarks/device_run.sh SECONDS [--no-bench]
#
# Installs the wheels carried in .whl (what the device machine lacks: pydantic and its needs, platformdirs,
# tomli-w; and hatchling with its needs but pathspec and pluggy, which the machine has, which builds
# vaezoo there from this checkout, as it does in a bare venv on the CPU), times bench_train.py on CUDA
# (one model against ensembles of 12; --no-bench leaves it out, giving its 80 s to training), then runs the
# campaign (benchmarks/campaign.toml) with what is left of SECONDS: it resumes the recipes
# benchmarks/campaign-state holds and trains the first that does not fit in part (--partial). It evaluates nothing (--no-eval): evaluations beside training slowed it by a
# fifth and did not finish within a span, and each card is measured again on the CPU for `vaezoo eval --check`.
# Everything it brings back is in $OUT: bench.txt, campaign.log.gz, campaign.json, one
# NAME.campaign.safetensors a trained recipe and the checkpoints of one trained in part
# (NAME.seed-N.checkpoint.pt; `python benchmarks/device_campaign.py keep DIR` puts them in campaign-state).
#
# Fetch the wheels once, into .whl (listed in .git/info/exclude; name it in the device tool's carry):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl pydantic pydantic_core annotated-types typing-inspection \
#     typing_extensions platformdirs tomli_w hatchling trove-classifiers tomlkit packaging
# The checkout travels too, and the device tool takes 64 MiB (67.1 MB) in all, which is why the logs of
# benchmarks/results are kept gzipped: on 2026-11-30 the tracked files came to 38.1 MB and these wheels to 3.2 MB,
# with no checkpoint in benchmarks/campaign-state. A recipe trained in part adds its three checkpoints (27.6 MB
# for betatcvae-dsprites), 68.9 MB in all: over the limit, so such a span needs 1.8 MB of the checkout freed first.
set -uo pipefail
budget=${1:-540}
case "${2:-}" in
  "" | --no-bench) ;;
  *) echo "device_run.sh: unknown option '$2'; the one option is --no-bench" >&2; exit 2 ;;
esac
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
pip_install="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site"
$pip_install .whl/*.whl || exit 1
$pip_install --no-build-isolation . || exit 1
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/bench.txt"
if [ "${2:-}" != "--no-bench" ]; then
  VAEZOO_PROGRESS=0 timeout 80 python3 benchmarks/bench_train.py --device cuda --card betatcvae-dsprites \
    --batch-sizes 64 --steps 100 --rounds 2 --ensemble 12 2>&1 | grep -v "^seed " | tee -a "$OUT/bench.txt"
fi
left=$((budget - SECONDS - 20))
python3 benchmarks/device_campaign.py --device cuda --deadline "$left" --partial --no-eval --out "$OUT" 2>&1 \
  | tee "$OUT/campaign.log" | grep -v "^seed \|^epoch"
gzip -9 -n "$OUT/campaign.log"
