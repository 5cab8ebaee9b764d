"""Training from a card's recipe, with atomic checkpoints, exact resume and optional DDP.

Run under ``torchrun`` (``WORLD_SIZE`` > 1) it trains with DistributedDataParallel
(gloo on CPU, nccl on CUDA) and a DistributedSampler; only rank 0 writes files.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data.distributed import DistributedSampler

from vaezoo.cards import Card, Metric, Weights, write_card
from vaezoo.data import load_dataset
from vaezoo.errors import TrainingError
from vaezoo.files import atomic_save
from vaezoo.hub import build_model
from vaezoo.model import VAE

CHECKPOINT = "checkpoint.pt"


@dataclass
class Run:
    """Where a run is: the process's rank among ``world`` processes and its device."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def main(self) -> bool:
        return self.rank == 0


def _start_run(device) -> Run:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Run(device=torch.device(device or "cpu"))
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda")
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    return Run(rank, world, torch.device(f"cuda:{local}" if cuda else "cpu"))


def _optimizer(card: Card, model: VAE) -> torch.optim.Optimizer:
    spec = card.train.optimizer
    return getattr(torch.optim, spec.name)(model.parameters(), lr=spec.lr, **spec.options)


def _save_checkpoint(path: Path, model: VAE, optimizer, step: int) -> None:
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
             "rng_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["rng_cuda"] = torch.cuda.get_rng_state_all()
    atomic_save(path, lambda tmp: torch.save(state, tmp))


def _load_checkpoint(path: Path, model: VAE, optimizer) -> int:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise TrainingError(f"cannot read checkpoint {path} ({exc}); remove it to start over") from None
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_cpu"])
    if "rng_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng_cuda"])
    return int(state["step"])


class Reporter:
    """Shows progress: a rich display on a terminal, a log line every ``every`` steps otherwise."""

    def __init__(self, total: int, start: int, every: int = 200):
        from rich.console import Console

        self.console = Console(stderr=True)
        self.total, self.start, self.every = total, start, every
        self.t0 = time.perf_counter()
        self.images = 0
        self.progress = None
        if self.console.is_terminal:
            from rich.progress import BarColumn, Progress, TimeRemainingColumn

            self.progress = Progress("{task.description}", BarColumn(), "{task.completed}/{task.total}",
                                     TimeRemainingColumn(), "{task.fields[status]}", console=self.console)
            self.task = self.progress.add_task("training", total=total, completed=start, status="")
            self.progress.start()

    def update(self, step: int, epoch: int, batch: int, values: dict[str, float]) -> None:
        self.images += batch
        if self.progress is None and step % self.every and step != self.total:
            return
        rate = self.images / max(time.perf_counter() - self.t0, 1e-9)
        eta = (self.total - step) * batch / max(rate, 1e-9)
        status = " ".join(f"{k} {v:.3f}" for k, v in values.items()) + f" | {rate:.0f} img/s"
        if self.progress is not None:
            self.progress.update(self.task, completed=step, description=f"epoch {epoch}", status=status)
        else:
            self.console.print(f"epoch {epoch} step {step}/{self.total} {status} | eta {eta / 60:.1f} min",
                               highlight=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def train(card: Card, out: Path, data_root=None, epochs: int | None = None, resume: bool = False,
          seed: int | None = None, device=None, max_steps: int | None = None,
          checkpoint_every: int | None = None) -> Path | None:
    """Train the model ``card`` describes from its recipe and write its weights and completed card.

    Args:
        card: the card with the recipe (``train``) and model (``model``).
        out: output directory: ``checkpoint.pt``, ``NAME.safetensors`` and ``NAME.toml``.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        epochs, seed, checkpoint_every: override the recipe's values.
        resume: continue from ``out/checkpoint.pt`` exactly where it stopped.
        device: "cpu", "cuda", ...
        max_steps: stop after this many steps (the run can be resumed); no weights are written.

    Returns:
        The path of the completed card, or None when stopped by ``max_steps`` or on a rank other than 0.
    """
    recipe = card.train.model_copy(update={k: v for k, v in
                                           {"epochs": epochs, "seed": seed, "checkpoint_every": checkpoint_every}.items()
                                           if v is not None})
    card = card.model_copy(update={"train": recipe})
    run = _start_run(device)
    try:
        return _train(card, Path(out), data_root, resume, run, max_steps)
    finally:
        if run.world > 1:
            dist.destroy_process_group()


def _train(card: Card, out: Path, data_root, resume: bool, run: Run, max_steps: int | None) -> Path | None:
    recipe = card.train
    torch.manual_seed(recipe.seed)
    dataset = load_dataset(recipe.data.name, data_root, "train", **recipe.data.options)
    model = build_model(card, device=run.device)
    optimizer = _optimizer(card, model)
    checkpoint = out / CHECKPOINT
    step = 0
    torch.manual_seed(recipe.seed + 1_000_003 * run.rank)  # each rank's stream of sampling noise
    if resume and checkpoint.exists():
        step = _load_checkpoint(checkpoint, model, optimizer)
        if run.world > 1:  # the checkpoint holds rank 0's RNG state only
            torch.manual_seed(recipe.seed + 1_000_003 * run.rank + step)
    elif resume:
        print(f"no checkpoint in {out}; starting from step 0", file=sys.stderr)
    net = model if run.world == 1 else torch.nn.parallel.DistributedDataParallel(model)
    sampler = DistributedSampler(range(len(dataset)), num_replicas=run.world, rank=run.rank, shuffle=True,
                                 seed=recipe.seed)
    batch_size = max(recipe.batch_size // run.world, 1)
    per_epoch = math.ceil(len(sampler) / batch_size)
    total = recipe.epochs * per_epoch
    reporter = Reporter(total, step) if run.main else None
    last_saved = step
    model.train()
    try:
        while step < total and (max_steps is None or step < max_steps):
            epoch, first = divmod(step, per_epoch)
            sampler.set_epoch(epoch)
            order = torch.tensor(list(sampler))
            for b in range(first, per_epoch):
                x = dataset.batch(order[b * batch_size:(b + 1) * batch_size], run.device)
                result = net(x, step=step)
                if not torch.isfinite(result.loss):
                    raise TrainingError(
                        f"loss became {result.loss.item()} at step {step} (epoch {epoch}); the last good "
                        f"checkpoint is {checkpoint} at step {last_saved}; lower the learning rate or check the data")
                optimizer.zero_grad(set_to_none=True)
                result.loss.backward()
                optimizer.step()
                step += 1
                if reporter:
                    values = {k: v.item() for k, v in result.terms.items()}
                    values.update({f"kl_{k}": v.item() for k, v in result.kl.items()})
                    values.update(model.targets(result.posterior, step))
                    reporter.update(step, epoch, x.shape[0] * run.world, values)
                if step % recipe.checkpoint_every == 0 or step == total or step == max_steps:
                    if run.main:
                        _save_checkpoint(checkpoint, model, optimizer, step)
                    last_saved = step
                if step == max_steps:
                    break
    finally:
        if reporter:
            reporter.close()
    if step < total or not run.main:
        return None
    return finish(card, model, out, data_root, run.device, step)


def finish(card: Card, model: VAE, out: Path, data_root, device, steps: int) -> Path:
    """Write the weights (the card's JSON in their header) and the card completed with metrics."""
    from vaezoo import __version__
    from vaezoo.evaluate import evaluate
    from vaezoo.weights import save_weights, sha256_of

    card = card.model_copy(update={"train": card.train.model_copy(update={"steps": steps}),
                                   "vaezoo_version": __version__, "latent": model.latent.describe(),
                                   "parameters": sum(p.numel() for p in model.parameters())})
    weights_path = out / f"{card.name}.safetensors"
    save_weights(model.state_dict(), weights_path, {"card": card.model_dump_json(exclude={"weights", "metrics"})})
    command = f"vaezoo eval {card.name}" + (f" --data-root {data_root}" if data_root else "")
    results = evaluate(model, card, data_root, device)
    metrics = {k: Metric(value=round(v, 6), command=command, vaezoo_version=__version__) for k, v in results.items()}
    card = card.model_copy(update={
        "weights": Weights(file=weights_path.name, sha256=sha256_of(weights_path), size=weights_path.stat().st_size),
        "metrics": metrics,
    })
    card_path = out / f"{card.name}.toml"
    write_card(card, card_path)
    return card_path

