"""Time the whole disentanglement metric suite on a shipped dSprites model, all 737,280 images.

Every registered metric of the suite runs as ``vaezoo eval`` runs it (its defaults: the
disentanglement_lib protocol, sharing one ``Evaluation``), one after another on the zoo entry's
weights, with images drawn from the whole dataset. ``mig_chen`` encodes every image once (posteriors
and mean codes in one pass) and ``total_correlation`` shares its entropy estimate; the other metrics
read mean codes from the table that pass filled. The estimator's blocks and the per-factor
classifiers run on as many threads as torch uses. The report gives each metric's wall and CPU time,
the images it encoded and its value (target: the whole suite in under 10 minutes on 2 cores).

    python benchmarks/bench_metric_suite.py                       # torch's threads: every core
    OMP_NUM_THREADS=1 python benchmarks/bench_metric_suite.py     # one core
    python benchmarks/bench_metric_suite.py --subset 50000 --metrics betavae_score,sap_score   # quicker, partial
    python benchmarks/bench_metric_suite.py --metrics mig_chen --batch-size 1000   # the encoder's batch size
"""

from __future__ import annotations

import argparse
import time

import torch

from vaezoo.data import EVAL_BATCH_SIZE

SUITE = ("mig_chen", "total_correlation", "mig_dlib", "betavae_score", "factorvae_score", "sap_score",
         "dci_disentanglement", "dci_completeness", "dci_informativeness", "modularity", "explicitness",
         "gaussian_total_correlation", "mutual_info_score")


class Clock:
    """Wall and process CPU time of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card", default="betatcvae-dsprites", help="a dSprites zoo entry (default betatcvae-dsprites)")
    parser.add_argument("--subset", type=int, help="use this many dSprites images (default: all)")
    parser.add_argument("--metrics", default=",".join(SUITE), help="comma-separated metrics (default: the suite)")
    parser.add_argument("--batch-size", type=int, default=EVAL_BATCH_SIZE,
                        help=f"images per forward pass (default {EVAL_BATCH_SIZE})")
    args = parser.parse_args()

    from vaezoo.assemble import load_model, metric
    from vaezoo.entries.catalog import get_card
    from vaezoo.data.dsprites import dsprites
    from vaezoo.metrics.provenance import library_versions
    from vaezoo.metrics.evaluation import Evaluation

    card = get_card(args.card)
    model = load_model(card)
    with Clock() as render:
        data = dsprites(subset=args.subset)
    print(f"{card.name} on {len(data):,} dSprites images (rendered in {render.wall:.1f} s, not counted); "
          f"torch threads {torch.get_num_threads()}; " + ", ".join(f"{k} {v}" for k, v in library_versions().items()))
    print(f"{'metric':28} {'wall s':>8} {'CPU s':>8} {'encoded':>9}  value")
    wall = cpu = 0.0
    evaluation = Evaluation(model, data, batch_size=args.batch_size)  # the suite's one shared encoding
    for name in args.metrics.split(","):
        before = evaluation.codes.encoded
        with Clock() as clock:
            value = metric(name).measure(evaluation)
        wall, cpu = wall + clock.wall, cpu + clock.cpu
        encoded = evaluation.codes.encoded - before
        print(f"{name:28} {clock.wall:8.1f} {clock.cpu:8.1f} {encoded:9,}  {value:.4f}", flush=True)
    print(f"{'total':28} {wall:8.1f} {cpu:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
