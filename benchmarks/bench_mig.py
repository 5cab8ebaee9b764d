"""Time ``mig_chen`` over all 737,280 dSprites images (target: under 5 minutes), and ``mig_dlib``.

The model is the betatcvae-dsprites recipe's architecture with random weights: the cost does
not depend on the weights. ``mig_chen`` is timed in its two stages, the ones ``mig_chen`` runs:
encoding every image, then the sampling estimator (10,000 codes against every posterior);
the total correlation comes from the same estimate. Wall and CPU time are both reported (on
a busy machine the CPU time is closer to what an idle one would take, for one thread).

    python benchmarks/bench_mig.py
    python benchmarks/bench_mig.py --subset 50000 --samples 2000   # a quicker, partial run
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from vaezoo.data import EVAL_BATCH_SIZE

RECIPE = Path(__file__).resolve().parents[1] / "plugins" / "vaezoo_betatcvae" / "recipes" / "betatcvae-dsprites.toml"


class Clock:
    """Wall and process CPU time of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:7.1f} s wall {self.cpu:7.1f} s CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subset", type=int, help="use this many dSprites images (default: all)")
    parser.add_argument("--samples", type=int, default=10_000, help="codes drawn by the estimator (default 10,000)")
    parser.add_argument("--batch-size", type=int, default=EVAL_BATCH_SIZE,
                        help=f"images per forward pass (default {EVAL_BATCH_SIZE})")
    args = parser.parse_args()

    from vaezoo.cards import parse_card
    from vaezoo.data.dsprites import dsprites
    from vaezoo.assemble import build_model
    from vaezoo.metrics.codes import factorised_posteriors
    from vaezoo.metrics.entropy import chen_columns, estimate_entropies
    from vaezoo.metrics.mig import chen_gaps, mig_dlib

    torch.manual_seed(0)
    model = build_model(parse_card(RECIPE)).eval()
    with Clock() as render:
        data = dsprites(subset=args.subset)
    print(f"dataset: {len(data):,} images rendered in {render} (not part of the metric); "
          f"torch threads {torch.get_num_threads()}")

    with Clock() as encode:
        posteriors = factorised_posteriors(model, data, batch_size=args.batch_size)
    with Clock() as estimate:
        entropies = estimate_entropies(posteriors.loc, 2 * posteriors.scale.log(),
                                       data.factors[:, list(chen_columns(data))], args.samples)
        value = float(chen_gaps(entropies).mean())
    print(f"mig_chen  encode {len(data):,} images     {encode}")
    print(f"mig_chen  estimator ({args.samples:,} samples) {estimate}")
    print(f"mig_chen  total                     {encode.wall + estimate.wall:7.1f} s wall "
          f"{encode.cpu + estimate.cpu:7.1f} s CPU   value {value:.4f}, total correlation "
          f"{entropies.total_correlation:.4f} nats")
    with Clock() as dlib:
        value = mig_dlib(model, data, batch_size=args.batch_size)
    print(f"mig_dlib  10,000 points             {dlib}   value {value:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
