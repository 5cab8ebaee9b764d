"""Training throughput of the JointVAE MNIST recipe, and its FLOP/s against a plain fp32 matrix product.

For each batch size the script measures, on random images of the recipe's shape:

- the model step: forward, backward and the recipe's optimiser step, timed alone;
- the engine loop: :func:`vaezoo.train.fit`, the loop ``vaezoo train`` runs (batching,
  NaN check, progress display), in steady state after a warm-up segment.

The FLOPs of a step (matrix products and convolutions, forward and backward) are
counted with ``torch.utils.flop_counter.FlopCounterMode``; achieved FLOP/s are
reported as a fraction of an ``N x N`` fp32 matmul's FLOP/s measured in the same
run with the same thread count. ``--profile`` prints the engine loop's most
expensive operators (``torch.profiler``).

    python benchmarks/bench_train.py                      # batch 64 and 256
    python benchmarks/bench_train.py --steps 5 --warmup 2 --batch-sizes 64     # a quick check
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity
from torch.utils.flop_counter import FlopCounterMode

import vaezoo
from vaezoo.data import ImageDataset
from vaezoo.train import Run, fit

CARD = "jointvae-mnist"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_flops(size: int, repeats: int, device: torch.device) -> float:
    """FLOP/s of a ``size x size`` fp32 matrix product (the median of ``repeats`` timings)."""
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    a @ b
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def model_step(model, optimizer, x: torch.Tensor, step: int) -> None:
    """One training step as the engine takes it, without the loop around it."""
    result = model(x, step=step)
    torch.isfinite(result.loss).item()
    optimizer.zero_grad(set_to_none=True)
    result.loss.backward()
    optimizer.step()


def image_shape(card) -> tuple[int, int, int]:
    return card.model["channels"], card.model["image_size"], card.model["image_size"]


def step_flops(card, batch: int, device: torch.device) -> int:
    """FLOPs of one training step (forward and backward) at ``batch``."""
    model = vaezoo.build_model(card, device=device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=card.train.optimizer.lr)
    with FlopCounterMode(display=False) as counter:
        model_step(model, optimizer, torch.rand(batch, *image_shape(card), device=device), 0)
    return counter.get_total_flops()


def time_model_step(card, batch: int, steps: int, warmup: int, device: torch.device) -> float:
    """Median seconds per model step."""
    model = vaezoo.build_model(card, device=device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=card.train.optimizer.lr)
    x = torch.rand(batch, *image_shape(card), device=device)
    times = []
    for step in range(warmup + steps):
        sync(device)
        start = time.perf_counter()
        model_step(model, optimizer, x, step)
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times[warmup:])


def engine(card, batch: int, steps: int, warmup: int, device: torch.device, profile: bool) -> float:
    """Seconds per step of :func:`vaezoo.train.fit` on random images, in steady state.

    After ``warmup`` steps the run is resumed twice, for ``steps`` and then for
    ``2 * steps`` steps; the difference of the two times leaves out what a resume
    costs once (reading the checkpoint, writing one at the end). With ``profile``,
    a last segment of ``steps`` runs under ``torch.profiler``.
    """
    ends = [warmup, warmup + steps, warmup + 3 * steps] + ([warmup + 4 * steps] if profile else [])
    card = card.model_copy(update={"train": card.train.model_copy(
        update={"batch_size": batch, "epochs": 1, "checkpoint_every": 10**9})})
    dataset = ImageDataset(torch.randint(0, 256, (ends[-1] * batch, *image_shape(card)), dtype=torch.uint8))
    model = vaezoo.build_model(card, device=device)
    run = Run(device=device)
    with tempfile.TemporaryDirectory() as out:
        fit(model, dataset, card, Path(out), max_steps=warmup, run=run)
        times = []
        for end in ends[1:3]:
            sync(device)
            start = time.perf_counter()
            fit(model, dataset, card, Path(out), resume=True, max_steps=end, run=run)
            sync(device)
            times.append(time.perf_counter() - start)
        if profile:
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
            with torch.profiler.profile(activities=activities) as profiler:
                fit(model, dataset, card, Path(out), resume=True, max_steps=ends[3], run=run)
            print(f"\nengine loop at batch {batch}, {steps} steps, operators by self CPU time:")
            print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    return (times[1] - times[0]) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=30, help="timed steps per measurement")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before each measurement")
    parser.add_argument("--matmul-size", type=int, default=2048)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--profile", action="store_true", help="profile the engine loop (slower)")
    args = parser.parse_args()

    device = torch.device(args.device)
    card = vaezoo.get_card(CARD)
    peak = matmul_flops(args.matmul_size, max(args.steps, 5), device)
    rows = []
    for batch in args.batch_sizes:
        flops = step_flops(card, batch, device)
        alone = time_model_step(card, batch, args.steps, args.warmup, device)
        looped = engine(card, batch, args.steps, args.warmup, device, args.profile)
        rows.append((batch, flops, alone, looped))

    print(f"\n{CARD} training on {device} with {torch.get_num_threads()} thread(s), torch {torch.__version__}")
    print(f"fp32 matmul {args.matmul_size}x{args.matmul_size}: {peak / 1e9:.1f} GFLOP/s")
    header = ("batch", "GFLOP/step", "what", "ms/step", "images/s", "GFLOP/s", "of matmul")
    print(f"{header[0]:>5} {header[1]:>10}  {header[2]:<11} {header[3]:>8} {header[4]:>9} {header[5]:>8} "
          f"{header[6]:>9}")
    for batch, flops, alone, looped in rows:
        for what, seconds in (("model step", alone), ("engine loop", looped)):
            achieved = flops / seconds
            print(f"{batch:>5} {flops / 1e9:>10.3f}  {what:<11} {seconds * 1e3:>8.1f} {batch / seconds:>9.0f} "
                  f"{achieved / 1e9:>8.1f} {achieved / peak:>9.0%}")
    print("target: the engine loop at batch 256 reaches at least 60% of the matmul's FLOP/s")


if __name__ == "__main__":
    main()
