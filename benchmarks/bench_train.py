"""Training throughput of a zoo card's model: ``vaezoo train``'s loop beside a plain PyTorch loop, in img/s
and as a fraction of the device's matmul rate.

On random uint8 images of the model's shape, kept on the device, the script times in turns (``--rounds``):

- a plain PyTorch loop: a shuffled slice of the images as floats, forward, backward, the recipe's optimiser;
- the engine: :func:`vaezoo.training.single.fit`, the loop ``vaezoo train`` runs (batches cut on the device, the NaN
  check, the random streams of its seed, the progress display), timed between its own steps;
- with ``--ensemble N``, an ensemble of N seeds in one step (:func:`vaezoo.training.ensemble.fit_ensemble`, what
  ``vaezoo train --seeds`` runs), in each formulation asked for (``--formulations``; on CUDA its step is a
  captured CUDA graph, or run eagerly, or both: ``--ensemble-steps``), timed the same way; its img/s counts every
  member's images.

Both run the same model with the same options (``--precision``, with its TF32 flags; ``--compile``: every loop's
forward pass through torch.compile, the ensemble's stacked step too, inside its CUDA graph) and
``torch.distributions``' argument checks off, as the engine runs. Each loop prints images/s (every member's),
ms a step, the TFLOP/s achieved (the FLOPs of one image's forward and backward pass, counted with
``torch.utils.flop_counter.FlopCounterMode`` on one batch, times images/s) and two shares of a peak: of an
``N x N`` matrix product in the run's precision measured in the same run on the same device, and on CUDA of
the device's datasheet peak for the precision (``--peak-tflops``; default the H200's, as
``benchmarks/device_kernels.py`` states it).

    python benchmarks/bench_train.py --device cuda                        # jointvae-mnist, batch 64 and 256
    python benchmarks/bench_train.py --device cuda --card betatcvae-dsprites --batch-sizes 64 --ensemble 12
    python benchmarks/bench_train.py --device cuda --card betatcvae-dsprites --batch-sizes 64 --ensemble 60 \
        --formulations vmap --precision bf16-mixed
    python benchmarks/bench_train.py --device cuda --card betatcvae-dsprites --batch-sizes 64 --ensemble 12 \
        --formulations vmap --ensemble-steps eager graph --compile     # eager and compiled+graph
    OMP_NUM_THREADS=1 python benchmarks/bench_train.py --steps 20 --batch-sizes 64      # a quick CPU check
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from device_kernels import (  # benchmarks/ is on the path of its scripts
    PEAK_SOURCE,
    PEAK_TFLOPS,
)
from torch.utils.flop_counter import FlopCounterMode

import vaezoo
import vaezoo.training.ensemble
import vaezoo.training.single
from vaezoo.assemble import build_model
from vaezoo.data import ImageDataset
from vaezoo.training.compiling import step_tensor
from vaezoo.training.loop import Run, precision_flags
from vaezoo.training.single import fit

DATASHEET = {"fp32": "fp32", "tf32": "tf32", "tf32-conv": "tf32", "bf16-mixed": "bf16"}
"""The datasheet peak each precision is measured against (tf32-conv: its convolutions, nearly all the FLOPs)."""

DATASET_BATCHES = 32  # the random dataset holds this many batches; the loops go round it
STACK = vaezoo.training.ensemble.Stack  # the engine's, which the ensemble loops make with or without CUDA graphs


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(size: int, dtype: torch.dtype, device: torch.device, repeats: int = 10) -> float:
    """FLOP/s of a ``size x size`` matrix product in ``dtype`` (the median of ``repeats`` timings)."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    a @ b
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def autocast(card, device: torch.device):
    return torch.autocast(device.type, torch.bfloat16, enabled=card.train.precision == "bf16-mixed")


def flops_per_image(card, batch: int, device: torch.device) -> float:
    """FLOPs of one image's forward and backward pass (matrix products and convolutions)."""
    model = build_model(card, device=device).train()
    x = torch.rand(batch, model.channels, model.image_size, model.image_size, device=device)
    with FlopCounterMode(display=False) as counter, precision_flags(card.train.precision):
        with autocast(card, device):
            loss = model(x).loss
        loss.backward()
    return counter.get_total_flops() / batch


def plain_loop(card, images: torch.Tensor, steps: int, warmup: int, device: torch.device):
    """A plain PyTorch loop of ``card``'s model: a generator of the seconds each segment of ``steps`` took."""
    torch.manual_seed(0)
    model = build_model(card, device=device).train()
    optimizer = getattr(torch.optim, card.train.optimizer.name)(model.parameters(), lr=card.train.optimizer.lr,
                                                                **card.train.optimizer.options)
    net = torch.compile(model) if card.train.compile else model
    batch, order, step = card.train.batch_size, torch.randperm(len(images), device=device), 0

    def take(n: int) -> None:
        nonlocal step
        with precision_flags(card.train.precision):
            take_steps(n)

    def take_steps(n: int) -> None:
        nonlocal step
        for _ in range(n):
            b = step % DATASET_BATCHES
            x = images[order[b * batch:(b + 1) * batch]].float().div_(255)
            with autocast(card, device):  # compiled, the step goes in as a tensor: one graph for every step
                loss = net(x, step=step_tensor(step, device) if card.train.compile else step).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1

    while True:
        take(warmup)
        sync(device)
        start = time.perf_counter()
        take(steps)
        sync(device)
        yield time.perf_counter() - start


STEP_ENDS: list[float] = []  # when the engine's steps ended, noted by _Clock


class _Clock(vaezoo.training.single.Reporter):
    """The engine's progress display, noting when each step ended (the engine waits for each step's loss)."""

    def update(self, step, images, values) -> None:
        STEP_ENDS.append(time.perf_counter())
        super().update(step, images, values)


def engine_loop(card, images: torch.Tensor, steps: int, warmup: int, device: torch.device, out: Path):
    """:func:`vaezoo.training.single.fit` of ``card``: a generator of the seconds each segment of ``steps`` took.

    Each segment resumes the run for ``warmup + steps`` steps and times the last ``steps`` between the
    ends of steps, so reading and writing the checkpoint are not counted.
    """
    torch.manual_seed(0)
    model = build_model(card, device=device)
    dataset = ImageDataset(images, scale=255.0)
    vaezoo.training.single.Reporter = _Clock
    reached = 0
    while True:
        STEP_ENDS.clear()
        reached += warmup + steps
        fit(model, dataset, card, out, resume=reached > warmup + steps, max_steps=reached, run=Run(device=device))
        yield STEP_ENDS[-1] - STEP_ENDS[-1 - steps]


def ensemble_loop(card, images: torch.Tensor, steps: int, warmup: int, device: torch.device, out: Path, members: int,
                  formulation: str, graphs: bool = True):
    """:func:`vaezoo.training.ensemble.fit_ensemble` of ``members`` seeds of ``card``: seconds of each segment of
    ``steps``; without ``graphs`` its step runs eagerly on CUDA, not captured as a CUDA graph."""
    dataset = ImageDataset(images, scale=255.0)
    reached = 0
    while True:
        models = []
        for seed in range(members):
            torch.manual_seed(seed)
            models.append(build_model(card, device=device))
        runs = [(m, card.model_copy(update={"train": card.train.model_copy(update={"seed": seed})}),
                 out / f"{formulation}-{'graph' if graphs else 'eager'}-{seed}", f"seed {seed}")
                for seed, m in enumerate(models)]
        STEP_ENDS.clear()
        reached += warmup + steps
        vaezoo.training.ensemble.Reporter = _Clock
        vaezoo.training.ensemble.Stack = functools.partial(STACK, graphs=graphs)
        vaezoo.training.ensemble.fit_ensemble(runs, dataset, resume=reached > warmup + steps, max_steps=reached,
                                              run=Run(device=device), formulation=formulation)
        yield STEP_ENDS[-1] - STEP_ENDS[-1 - steps]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card", default="jointvae-mnist", help="a zoo card (default: jointvae-mnist)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=50, help="timed steps per segment")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps before each segment")
    parser.add_argument("--rounds", type=int, default=3, help="segments of each loop, in turns")
    parser.add_argument("--precision", choices=["fp32", "tf32", "tf32-conv", "bf16-mixed"],
                        help="override the recipe's precision")
    parser.add_argument("--compile", action="store_true", help="torch.compile the forward pass (the ensemble's "
                                                                "stacked step too, inside its CUDA graph)")
    parser.add_argument("--ensemble", type=int, metavar="N", help="also time an ensemble of N seeds in one step")
    parser.add_argument("--formulations", nargs="+", default=["loop", "vmap"], choices=["loop", "vmap"],
                        help="the ensemble's formulations to time (default both)")
    parser.add_argument("--ensemble-steps", nargs="+", default=["graph"], choices=["graph", "eager"],
                        help="time the ensemble's step captured as a CUDA graph, run eagerly, or both (default "
                             "graph; on the CPU, which has no graphs, both run eagerly)")
    parser.add_argument("--matmul-size", type=int, help="side of the peak's matrices (default 4096 on cuda, "
                                                        "else 2048)")
    parser.add_argument("--peak-tflops", type=float, help=f"the device's peak in the run's precision, TFLOP/s "
                                                          f"(default on cuda {PEAK_TFLOPS}: {PEAK_SOURCE})")
    args = parser.parse_args()

    os.environ["VAEZOO_PROGRESS"] = "0"
    device = torch.device(args.device)
    card = vaezoo.get_card(args.card)
    recipe = type(card.train).model_validate({**card.train.model_dump(),
                                              "precision": args.precision or card.train.precision,
                                              "compile": args.compile or card.train.compile,
                                              "checkpoint_every": 10**9})
    dtype = torch.bfloat16 if recipe.precision == "bf16-mixed" else torch.float32
    size = args.matmul_size or (4096 if device.type == "cuda" else 2048)
    with precision_flags(recipe.precision):
        peak = matmul_rate(size, dtype, device)
    datasheet = args.peak_tflops or (PEAK_TFLOPS[DATASHEET[recipe.precision]] if device.type == "cuda" else None)
    torch.distributions.Distribution.set_default_validate_args(False)  # as the engine trains

    gpu = f"{torch.cuda.get_device_name(device)}, " if device.type == "cuda" else ""
    print(f"{card.name} training on {device} ({gpu}{torch.get_num_threads()} CPU thread(s)), torch "
          f"{torch.__version__}, precision {recipe.precision}, compile {'on' if recipe.compile else 'off'}")
    print(f"peak: {str(dtype).removeprefix('torch.')} matmul {size}x{size}: {peak / 1e12:,.4g} TFLOP/s measured"
          + (f"; {datasheet:,.0f} TFLOP/s datasheet" if datasheet else ""))
    print(f"{'batch':>5}  {'loop':<22} {'img/s':>10} {'ms/step':>8} {'TFLOP/s':>8} {'of matmul':>9}"
          + (f" {'of datasheet':>12}" if datasheet else ""))
    for batch in args.batch_sizes:
        run_card = card.model_copy(update={"train": recipe.model_copy(update={"batch_size": batch, "epochs": 10**6})})
        per_image = flops_per_image(run_card, batch, device)
        model = build_model(run_card)
        images = torch.randint(0, 256, (DATASET_BATCHES * batch, model.channels, model.image_size, model.image_size),
                               dtype=torch.uint8, device=device)
        with tempfile.TemporaryDirectory() as out:
            loops = {"plain PyTorch": plain_loop(run_card, images, args.steps, args.warmup, device),
                     "vaezoo train": engine_loop(run_card, images, args.steps, args.warmup, device, Path(out))}
            for formulation, kind in itertools.product(args.formulations if args.ensemble else (), args.ensemble_steps):
                name = f"ensemble {args.ensemble} {formulation}" + (" eager" if kind == "eager" else "")
                loops[name] = ensemble_loop(run_card, images, args.steps, args.warmup, device, Path(out),
                                            args.ensemble, formulation, graphs=kind == "graph")
            times = {name: [] for name in loops}
            for _ in range(args.rounds):
                for name, loop in loops.items():
                    times[name].append(next(loop))
        rates = {}
        for name, seconds in times.items():
            members = args.ensemble if name.startswith("ensemble") else 1
            rates[name] = args.steps * batch * members / statistics.median(seconds)
            achieved = rates[name] * per_image
            print(f"{batch:>5}  {name:<22} {rates[name]:>10,.0f} {1e3 * statistics.median(seconds) / args.steps:>8.2f} "
                  f"{achieved / 1e12:>8.4g} {achieved / peak:>9.1%}"
                  + (f" {achieved / (datasheet * 1e12):>12.2%}" if datasheet else ""))
        for name in (n for n in rates if n.startswith("ensemble")):
            print(f"{'':>5}  {name} / vaezoo train: {rates[name] / rates['vaezoo train']:.2f}x the images/s")
        print(f"{'':>5}  vaezoo train / plain PyTorch: {rates['vaezoo train'] / rates['plain PyTorch']:.3f} "
              f"({per_image / 1e6:,.2f} MFLOP per image, forward and backward; medians of {args.rounds} rounds of "
              f"{args.steps} steps)")


if __name__ == "__main__":
    main()
