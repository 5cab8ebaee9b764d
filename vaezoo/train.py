"""Training from a card's recipe, with atomic checkpoints, exact resume and optional DDP.

Run under ``torchrun`` (``WORLD_SIZE`` > 1) it trains with DistributedDataParallel
(gloo on CPU, nccl on CUDA) and a DistributedSampler; only rank 0 writes files.

A checkpoint (``OUT/checkpoint.pt``) holds the model, the optimiser, the step and
the RNG states at the start of that step (every rank's under DDP). Regularizer
schedules are pure functions of the step, so ``--resume`` continues exactly where
the checkpoint was taken, and a killed run loses at most one checkpoint interval.
A checkpoint is written only once its weights gave a finite loss, so the one a
diverged run names is good to resume from.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import torch
import torch.distributed as dist
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from torch.utils.data.distributed import DistributedSampler

from vaezoo.cards import Card, TrainRecipe, Weights, write_card
from vaezoo.data import ImageDataset
from vaezoo.assemble import load_dataset
from vaezoo.errors import TrainingError
from vaezoo.files import atomic_save
from vaezoo.assemble import build_model
from vaezoo.model import VAE, VAEOutput

CHECKPOINT = "checkpoint.pt"


@dataclass
class Run:
    """Where a run is: the process's rank among ``world`` processes and its device."""

    rank: int = 0
    world: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        return self.rank == 0


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (under DDP every rank holds the same weights).
        step: the step the run stopped at.
        card_path: the completed card; None when the run stopped early (``max_steps``) or on ranks other than 0.
    """

    model: VAE
    step: int
    card_path: Path | None


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


def _optimizer(recipe: TrainRecipe, model: VAE) -> torch.optim.Optimizer:
    spec = recipe.optimizer
    return getattr(torch.optim, spec.name)(model.parameters(), lr=spec.lr, **spec.options)


def _rng_state(run: Run) -> dict:
    """The RNG states a checkpoint keeps: this process's, and under DDP every rank's (a collective call)."""
    state = {"rng_cpu": torch.get_rng_state()}
    if run.world == 1:
        if torch.cuda.is_available():
            state["rng_cuda"] = torch.cuda.get_rng_state_all()
        return state
    mine = {"cpu": state["rng_cpu"]}
    if run.device.type == "cuda":
        mine["cuda"] = torch.cuda.get_rng_state(run.device)
    state["rng_ranks"] = [None] * run.world
    dist.all_gather_object(state["rng_ranks"], mine)
    return state


def _save_checkpoint(path: Path, model: VAE, optimizer, step: int, rng: dict, run: Run) -> None:
    if run.main:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, **rng}
        atomic_save(path, lambda tmp: torch.save(state, tmp))


def read_checkpoint(path: Path) -> dict:
    """The state a training checkpoint holds (model, optimizer, step, RNG states), read with ``weights_only``."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 (a damaged file makes torch.load raise many kinds of errors)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TrainingError(f"cannot read checkpoint {path} ({first}); remove it to start over") from None


def _load_checkpoint(path: Path, model: VAE, optimizer, recipe: TrainRecipe, run: Run) -> int:
    """Restore model, optimiser and RNG states from ``path``; returns its step."""
    state = read_checkpoint(path)
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise TrainingError(f"checkpoint {path} does not fit this card's model and optimiser ({first}); "
                            f"resume with the card that started the run, or choose another --out") from None
    step = int(state["step"])
    ranks = state.get("rng_ranks")
    if run.world == 1:
        torch.set_rng_state(state["rng_cpu"])
        if "rng_cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng_cuda"])
    elif ranks is not None and len(ranks) == run.world:
        torch.set_rng_state(ranks[run.rank]["cpu"])
        if "cuda" in ranks[run.rank] and run.device.type == "cuda":
            torch.cuda.set_rng_state(ranks[run.rank]["cuda"], run.device)
    else:
        torch.manual_seed(recipe.seed + 1_000_003 * run.rank + step)
        if run.main:
            print(f"{path} holds no RNG states for {run.world} processes; the sampling noise is reseeded, so "
                  f"the resumed run will not match an uninterrupted one bit for bit", file=sys.stderr)
    return step


def _resume_point(path: Path, model: VAE, optimizer, recipe: TrainRecipe, resume: bool, run: Run) -> int | None:
    """The step of the checkpoint the run continues from, or None when it starts afresh."""
    if not path.exists():
        if resume and run.main:
            print(f"no checkpoint in {path.parent}; starting from step 0", file=sys.stderr)
        return None
    if not resume:
        raise TrainingError(f"{path.parent} already holds a checkpoint ({path.name}) of a run; pass --resume "
                            f"to continue it, or choose another --out to start afresh")
    if run.main:  # a run killed while writing a checkpoint left its temporary file behind
        for stale in path.parent.glob(f".{path.name}.*.tmp"):
            stale.unlink(missing_ok=True)
    return _load_checkpoint(path, model, optimizer, recipe, run)


def _display_values(model: VAE, result: VAEOutput, step: int) -> dict[str, float]:
    """What the progress display shows of a step: the loss, its terms, KL per part, the regularizers' targets."""
    values = {"loss": result.loss.item()}
    values.update({k: v.item() for k, v in result.terms.items()})
    values.update({f"kl_{k}": v.item() for k, v in result.kl.items()})
    values.update(model.targets(result.posterior, step))
    return values


def _divergence_message(loss: torch.Tensor, step: int, epoch: int, checkpoint: Path, saved: int | None) -> str:
    last = (f"the last good checkpoint is {checkpoint} (step {saved})" if saved is not None
            else "no checkpoint has been written yet")
    return (f"loss became {loss.item()} at step {step} (epoch {epoch + 1}); {last}; "
            f"lower the learning rate or check the data for NaN or inf")


@dataclass
class _Plan:
    """How a run walks through its data: each rank's batch size, steps per epoch, and the last step."""

    batch_size: int
    per_epoch: int
    total: int

    @classmethod
    def of(cls, recipe: TrainRecipe, size: int, world: int) -> _Plan:
        if recipe.batch_size % world:
            raise TrainingError(f"the recipe's batch size {recipe.batch_size} does not split evenly over {world} "
                                f"processes; run a number of processes that divides it")
        batch_size = recipe.batch_size // world
        per_epoch = math.ceil(math.ceil(size / world) / batch_size)  # DistributedSampler pads to equal shares
        return cls(batch_size, per_epoch, recipe.epochs * per_epoch)


class Reporter:
    """Training progress on stderr: a live display on a terminal, a line every ``every`` steps otherwise.

    Both show the epoch, the step, the loss and its terms, the KL of each latent part,
    the regularizers' targets (e.g. capacities), images/s and the time left. Values
    come as a callable read only when shown, so the loop does not wait for every
    step's numbers.

    Args:
        total: the run's last step.
        start: the step the run starts from (a resumed run starts past 0).
        per_epoch: steps per epoch.
        every: steps between lines when stderr is not a terminal.
        refresh: seconds between updates of the values on a terminal.
        console: a rich console (default: stderr).
    """

    def __init__(self, total: int, start: int, per_epoch: int, every: int = 200, refresh: float = 0.5,
                 console=None):
        self.console = console or Console(stderr=True)
        self.total, self.start, self.per_epoch, self.every, self.refresh = total, start, per_epoch, every, refresh
        self.epochs = math.ceil(total / per_epoch)
        self.t0 = self.shown = time.perf_counter()
        self.images = 0
        self.display = _Display(self.console, total, start) if self.console.is_terminal else None

    def update(self, step: int, images: int, values: Callable[[], dict[str, float]]) -> None:
        """Record that ``step`` is done after ``images`` more images; show ``values()`` when it is time to."""
        self.images += images
        now = time.perf_counter()
        last = step == self.total
        if self.display is not None:
            self.display.advance_to(step)
            if now - self.shown < self.refresh and not last:
                return
        elif step % self.every and not last:
            return
        self.shown = now
        epoch = f"epoch {(step - 1) // self.per_epoch + 1}/{self.epochs}"
        rate = f"{self.images / max(now - self.t0, 1e-9):.0f} img/s"
        terms = "  ".join(f"{k} {v:.4g}" for k, v in values().items())
        if self.display is not None:
            self.display.show(epoch, rate, terms)
        else:
            left = (self.total - step) * (now - self.t0) / max(step - self.start, 1)
            eta = datetime.timedelta(seconds=round(left))
            self.console.print(f"{epoch} step {step}/{self.total} | {terms} | {rate} | eta {eta}",
                               highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop the live display, leaving its last state on screen."""
        if self.display is not None:
            self.display.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Display(Progress):
    """A progress bar (epoch, step, images/s, ETA) with the latest values on a line below it."""

    def __init__(self, console: Console, total: int, start: int):
        self.values = ""  # before Progress.__init__, which may already render
        super().__init__(TextColumn("{task.fields[epoch]}"), BarColumn(), TextColumn("step"), MofNCompleteColumn(),
                         TextColumn("{task.fields[rate]}"), TextColumn("eta"), TimeRemainingColumn(), console=console)
        self.task = self.add_task("training", total=total, completed=start, epoch="", rate="")
        self.start()

    def advance_to(self, step: int) -> None:
        self.update(self.task, completed=step)

    def show(self, epoch: str, rate: str, values: str) -> None:
        self.values = values
        self.update(self.task, epoch=epoch, rate=rate)

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        yield self.values


@contextlib.contextmanager
def _distribution_checks_off():
    """Turn off ``torch.distributions``' argument checks while training.

    They cost time every step, and once a loss goes NaN they raise from inside the
    model, before the loop can name the step and the last good checkpoint.
    """
    previous = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(previous)


def fit(model: VAE, dataset: ImageDataset, recipe: TrainRecipe, out: Path, resume: bool = False,
        max_steps: int | None = None, run: Run | None = None) -> int:
    """Train ``model`` on ``dataset`` with ``recipe``, checkpointing into ``out``.

    Args:
        model: the model, on ``run.device``.
        dataset: the training images.
        recipe: epochs, batch size, optimiser, seed and checkpoint interval.
        out: the directory of ``checkpoint.pt``.
        resume: continue from ``out/checkpoint.pt``; without it an existing checkpoint is an error.
        max_steps: stop when the run reaches this step (a checkpoint is written there, to resume from).
        run: rank, world size and device (default: one process on the CPU).

    Returns:
        The step the run stopped at: ``recipe.epochs`` times the steps per epoch unless ``max_steps`` stopped it.
    """
    run = run or Run()
    optimizer = _optimizer(recipe, model)
    checkpoint = Path(out) / CHECKPOINT
    torch.manual_seed(recipe.seed + 1_000_003 * run.rank)  # each rank's stream of sampling noise
    saved = _resume_point(checkpoint, model, optimizer, recipe, resume, run)
    step = saved or 0
    net = model if run.world == 1 else torch.nn.parallel.DistributedDataParallel(model)
    sampler = DistributedSampler(range(len(dataset)), num_replicas=run.world, rank=run.rank, shuffle=True,
                                 seed=recipe.seed)
    plan = _Plan.of(recipe, len(dataset), run.world)
    batch_size, per_epoch = plan.batch_size, plan.per_epoch
    stop = plan.total if max_steps is None else min(plan.total, max_steps)
    model.train()
    reporter = Reporter(plan.total, step, per_epoch) if run.main else contextlib.nullcontext()
    with _distribution_checks_off(), reporter:
        while step < stop:
            epoch, first = divmod(step, per_epoch)
            sampler.set_epoch(epoch)
            order = torch.tensor(list(sampler))
            for b in range(first, per_epoch):
                x = dataset.batch(order[b * batch_size:(b + 1) * batch_size], run.device)
                due = step > 0 and step % recipe.checkpoint_every == 0 and step != saved
                rng = _rng_state(run) if due else None
                result = net(x, step=step)
                if not torch.isfinite(result.loss):
                    raise TrainingError(_divergence_message(result.loss, step, epoch, checkpoint, saved))
                if due:
                    _save_checkpoint(checkpoint, model, optimizer, step, rng, run)
                    saved = step
                optimizer.zero_grad(set_to_none=True)
                result.loss.backward()
                optimizer.step()
                step += 1
                if run.main:
                    values = functools.partial(_display_values, model, result, step - 1)
                    reporter.update(step, x.shape[0] * run.world, values)
                if step == stop:
                    break
        if step != saved:
            _save_checkpoint(checkpoint, model, optimizer, step, _rng_state(run), run)
    if run.main and step < plan.total:
        print(f"stopped at step {step} of {plan.total}; continue with --resume", file=sys.stderr)
    return step


def train(card: Card, out: Path, data_root=None, epochs: int | None = None, resume: bool = False,
          seed: int | None = None, device=None, max_steps: int | None = None,
          checkpoint_every: int | None = None) -> TrainResult:
    """Train the model ``card`` describes from its recipe and write its weights and completed card.

    Args:
        card: the card with the recipe (``train``) and model (``model``).
        out: output directory: ``checkpoint.pt``, ``NAME.safetensors`` and ``NAME.toml``.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        epochs, seed, checkpoint_every: override the recipe's values.
        resume: continue from ``out/checkpoint.pt`` exactly where it stopped.
        device: "cpu", "cuda", ...
        max_steps: stop when the run reaches this step (the run can be resumed); no weights are written.

    Returns:
        The model, the step reached and, on rank 0 of a finished run, the completed card's path.
    """
    recipe = _override(card.train, epochs=epochs, seed=seed, checkpoint_every=checkpoint_every)
    if max_steps is not None and max_steps < 1:
        raise TrainingError(f"--max-steps must be at least 1, got {max_steps}")
    card = card.model_copy(update={"train": recipe})
    run = _start_run(device)
    try:
        torch.manual_seed(recipe.seed)
        dataset = load_dataset(recipe.data.name, data_root, "train", **recipe.data.options)
        model = build_model(card, device=run.device)
        step = fit(model, dataset, recipe, Path(out), resume, max_steps, run)
        finished = step == _Plan.of(recipe, len(dataset), run.world).total
        card_path = finish(card, model, Path(out), data_root, run.device, step) if finished and run.main else None
        return TrainResult(model, step, card_path)
    finally:
        if run.world > 1:
            dist.destroy_process_group()


def _override(recipe: TrainRecipe, **values) -> TrainRecipe:
    """``recipe`` with the values given on the command line, validated as the card's own are."""
    given = {k: v for k, v in values.items() if v is not None}
    try:
        return TrainRecipe.model_validate({**recipe.model_dump(), **given})
    except ValidationError as exc:
        error = exc.errors()[0]
        name = "--" + str(error["loc"][0]).replace("_", "-")
        raise TrainingError(f"{name} {given.get(error['loc'][0])}: {error['msg'].lower()}") from None


def finish(card: Card, model: VAE, out: Path, data_root, device, steps: int) -> Path:
    """Evaluate ``model`` and write its weights (the card's JSON in their header) and its completed card.

    Returns:
        The path of the completed card, ``out/NAME.toml``, beside ``out/NAME.safetensors``.
    """
    from vaezoo import __version__
    from vaezoo.evaluate import as_metrics, evaluate
    from vaezoo.weights import save_weights, sha256_of

    card = card.model_copy(update={"train": card.train.model_copy(update={"steps": steps}),
                                   "vaezoo_version": __version__, "latent": model.latent.describe(),
                                   "parameters": sum(p.numel() for p in model.parameters())})
    card = card.model_copy(update={"metrics": as_metrics(card, evaluate(model, card, data_root, device), data_root)})
    weights_path = out / f"{card.name}.safetensors"
    save_weights(model.state_dict(), weights_path, {"card": card.model_dump_json(exclude={"weights"})})
    card = card.model_copy(update={
        "weights": Weights(file=weights_path.name, sha256=sha256_of(weights_path), size=weights_path.stat().st_size),
    })
    card_path = out / f"{card.name}.toml"
    write_card(card, card_path)
    return card_path
