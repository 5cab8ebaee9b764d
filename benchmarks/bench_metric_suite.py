"""Time the whole disentanglement metric suite on a shipped dSprites model, all 737,280 images.

As ``vaezoo eval NAME`` runs it: first the losses' pass over every image (encoder and decoder, at the
recipe's batch size, in inference mode with the decoder's weights in channels_last order), which is also the
metrics' one encoding of every image; then every registered metric of the suite (its defaults: the
disentanglement_lib protocol, sharing one ``Evaluation``), one after another. ``mig_chen`` and
``total_correlation`` share one entropy estimate (on ``--device``); the other metrics read mean codes
from the table the pass filled; the scikit-learn fits run on ``--jobs`` worker processes. The report
gives each step's wall and CPU time (this process's; the workers' are not counted), the images it
encoded and its value (target: the whole suite in <= 5 minutes on 2 cores), and the losses' pass's arithmetic:
its floating-point operations an image (``torch.utils.flop_counter``) and the rate it ran at, against which
a machine's peak bounds the pass from below.

    OMP_NUM_THREADS=2 python benchmarks/bench_metric_suite.py     # the issue's measure, on 2 cores
    python benchmarks/bench_metric_suite.py --no-losses           # the metrics alone (a codes-only encoding)
    python benchmarks/bench_metric_suite.py --subset 50000 --metrics betavae_score,sap_score   # quicker, partial
    python benchmarks/bench_metric_suite.py --device cuda --jobs 16   # on a GPU machine
"""

from __future__ import annotations

import argparse
import time

import torch

from vaezoo.data import EVAL_BATCH_SIZE

SUITE = ("mig_chen", "total_correlation", "mig_dlib", "betavae_score", "factorvae_score", "sap_score",
         "dci_disentanglement", "dci_completeness", "dci_informativeness", "modularity", "explicitness",
         "gaussian_total_correlation", "mutual_info_score")


def forward_flops(model, data, batch_size: int, device) -> float:
    """Floating-point operations of the model's forward pass, an image (one batch counted)."""
    from torch.utils.flop_counter import FlopCounterMode

    from vaezoo.metrics.codes import inference

    _, x = next(iter(data.batches(batch_size, torch.device(device))))
    with inference(model), FlopCounterMode(display=False) as counter:
        model(x, step=0)
    return counter.get_total_flops() / len(x)


class Clock:
    """Wall and process CPU time of a block."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card", default="betatcvae-dsprites",
                        help="a dSprites zoo entry (default betatcvae-dsprites)")
    parser.add_argument("--subset", type=int, help="use this many dSprites images (default: all)")
    parser.add_argument("--metrics", default=",".join(SUITE), help="comma-separated metrics (default: the suite)")
    parser.add_argument("--batch-size", type=int, default=EVAL_BATCH_SIZE,
                        help=f"images per encoder pass of a codes-only encoding (default {EVAL_BATCH_SIZE})")
    parser.add_argument("--no-losses", dest="losses", action="store_false",
                        help="leave out the losses' pass: the metrics encode without decoding")
    parser.add_argument("--device", default="cpu", help="where to encode and estimate (default cpu)")
    parser.add_argument("--jobs", type=int, help="worker processes of the fits (default: the cores)")
    args = parser.parse_args()

    from vaezoo.assemble import load_model, metric
    from vaezoo.entries.catalog import get_card
    from vaezoo.data.dsprites import dsprites
    from vaezoo.evaluation.measure import losses
    from vaezoo.metrics.codes import EncodingBuilder
    from vaezoo.metrics.evaluation import Evaluation
    from vaezoo.metrics.parallel import get_jobs, set_jobs
    from vaezoo.metrics.provenance import library_versions

    set_jobs(args.jobs)
    card = get_card(args.card)
    model = load_model(card, args.device)
    with Clock() as render:
        data = dsprites(subset=args.subset)
    print(f"{card.name} on {len(data):,} dSprites images (rendered in {render.wall:.1f} s, not counted); "
          f"device {args.device}; torch threads {torch.get_num_threads()}; jobs {get_jobs()}; "
          + ", ".join(f"{k} {v}" for k, v in library_versions().items()))
    print(f"{'metric':28} {'wall s':>8} {'CPU s':>8} {'encoded':>9}  value")
    wall = cpu = 0.0
    evaluation = Evaluation(model, data, args.device, args.batch_size)  # the suite's one shared encoding
    if args.losses:
        encoding = EncodingBuilder()
        with Clock() as clock:
            results = losses(model, data, card.train.steps, card.train.batch_size, args.device, encoding.add)
            evaluation.take_encoding(encoding.encoding())
        wall, cpu = clock.wall, clock.cpu
        flops = forward_flops(model, data, card.train.batch_size, args.device)
        print(f"{'losses (the one pass)':28} {clock.wall:8.1f} {clock.cpu:8.1f} {len(data):9,}  "
              f"reconstruction {results['reconstruction']:.4f}; {flops / 1e6:.1f} MFLOP an image, "
              f"{flops * len(data) / clock.wall / 1e9:.1f} GFLOP/s", flush=True)
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
