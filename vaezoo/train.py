"""Training from a card's recipe: the loop, with atomic checkpoints, exact resume, stop signals and optional DDP.

Run under ``torchrun`` (``WORLD_SIZE`` > 1) it trains with DistributedDataParallel
(gloo on CPU, nccl on CUDA) and a DistributedSampler; only rank 0 writes files.

The run's folder (``--out``) is checked before anything else: it must be a folder vaezoo can write in,
and hold no finished run. Every ``checkpoint_every`` steps a checkpoint (:mod:`vaezoo.checkpoints`)
saves the model, the optimiser, the step and the RNG states at the start of that step. Regularizer
schedules are pure functions of the step, so ``--resume`` continues exactly where the checkpoint was
taken. A checkpoint is written only once its weights gave a finite loss, so the one a diverged run
names is good to resume from.

SIGINT (Ctrl-C) or SIGTERM during the loop stops the run at the end of the step under way, with a
checkpoint of the step it reached, and raises :class:`Interrupted`; a second SIGINT stops at once. A
signal outside the loop (loading the data, publishing the card) stops at once. Either way a file being
written is left as it was and its temporary file removed. At the end :mod:`vaezoo.publish` writes the
weights and the completed card.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import torch
import torch.distributed as dist
from pydantic import ValidationError
from torch.utils.data.distributed import DistributedSampler

from vaezoo.assemble import build_model, load_dataset, load_weights
from vaezoo.cards import Card, TrainRecipe
from vaezoo.checkpoints import (CHECKPOINT, check_recipe, read_checkpoint, remove_temporaries, restore_rng,
                                write_checkpoint)
from vaezoo.data import ImageDataset
from vaezoo.errors import OutputError, TrainingError
from vaezoo.files import folder_problem
from vaezoo.model import VAE, VAEOutput
from vaezoo.publish import publish, run_name
from vaezoo.terminal import printable
from vaezoo.train_progress import Reporter

__all__ = ["CHECKPOINT", "Interrupted", "Run", "TrainResult", "fit", "train"]


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
        total: the run's last step; ``step`` is less when ``max_steps`` stopped it.
        card_path: the completed card; None when the run stopped early (``max_steps``) or on ranks other than 0.
    """

    model: VAE
    step: int
    total: int
    card_path: Path | None


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a run.

    Attributes:
        signal: the signal's number.
        step: the step of the checkpoint written when the loop stopped; None when the signal stopped the
            run outside the loop or a second SIGINT stopped it at once (the last checkpoint, if any, stays).
        checkpoint: the checkpoint file of the run.
    """

    def __init__(self, signum: int, step: int | None = None, checkpoint: Path | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signal, self.step, self.checkpoint = signum, step, checkpoint


class _StopSignals:
    """Handles SIGINT and SIGTERM in the main thread while in use, then gives back the previous handlers.

    With ``defer``, the first signal is only noted (``received``) for the loop to stop at the end of its
    step; a second SIGINT raises :class:`Interrupted` at once, a second SIGTERM is ignored (the run is
    already stopping). Without ``defer`` every signal raises at once.
    """

    def __init__(self, defer: bool):
        self.defer = defer
        self.received: int | None = None
        self.previous: dict[int, object] = {}

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():  # Python handles signals there only
            self.previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame) -> None:
        if self.defer and self.received is None:
            self.received = signum
        elif not self.defer or signum == signal.SIGINT:
            raise Interrupted(signum)

    def stop_requested(self, run: Run) -> int | None:
        """The signal that asks the run to stop, if any; under DDP a signal on any rank stops every rank."""
        if run.world == 1:
            return self.received
        flag = torch.tensor([self.received or 0], device=run.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item()) or None


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


def _checkpoint_exists_error(path: Path) -> TrainingError:
    return TrainingError(f"{path.parent} already holds a checkpoint ({path.name}) of a run; pass --resume "
                         f"to continue it, or choose another --out to start afresh")


def _resume_point(path: Path, card: Card, model: VAE, optimizer, plan: _Plan, resume: bool, run: Run) -> int | None:
    """Restore model, optimiser and RNG states from the checkpoint ``path``: its step, or None to start afresh."""
    if not path.exists():
        if resume and run.main:
            print(printable(f"no checkpoint in {path.parent}; starting from step 0"), file=sys.stderr)
        return None
    if not resume:
        raise _checkpoint_exists_error(path)
    if run.main:  # a run killed while writing a checkpoint left its temporary file behind
        remove_temporaries(path)
    checkpoint = read_checkpoint(path, fix="remove it to start over, or choose another --out")
    check_recipe(checkpoint, card)
    if checkpoint.step > plan.total:
        raise TrainingError(f"checkpoint {path} is at step {checkpoint.step}, past this run's last step {plan.total} "
                            f"({card.train.epochs} epochs of {plan.per_epoch} steps); pass --epochs "
                            f"{math.ceil(checkpoint.step / plan.per_epoch)} or more to continue it")
    load_weights(model, checkpoint.model, f"checkpoint {path}")
    try:
        optimizer.load_state_dict(checkpoint.optimizer)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TrainingError(f"the optimiser state in checkpoint {path} does not fit this card's "
                            f"{card.train.optimizer.name} optimiser ({first}); resume with the card that started "
                            f"the run, or choose another --out") from None
    if not restore_rng(checkpoint, run.rank, run.world, run.device):
        torch.manual_seed(card.train.seed + 1_000_003 * run.rank + checkpoint.step)
        if run.main:
            print(printable(f"{path} holds no RNG states for {run.world} processes; the sampling noise is reseeded, "
                            f"so the resumed run will not match an uninterrupted one bit for bit"), file=sys.stderr)
    return checkpoint.step


def _display_values(model: VAE, result: VAEOutput, step: int) -> dict[str, float]:
    """What the progress display shows of a step: the loss, its terms, KL per part, the regularizers' targets."""
    values = {"loss": result.loss.item()}
    values.update({k: v.item() for k, v in result.terms.items()})
    values.update({f"kl_{k}": v.item() for k, v in result.kl.items()})
    values.update(model.targets(result.posterior, step))
    return values


def _last_good(checkpoint: Path, saved: int | None) -> str:
    return (f"the last good checkpoint is {checkpoint} (step {saved})" if saved is not None
            else "no checkpoint has been written yet")


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


def fit(model: VAE, dataset: ImageDataset, card: Card, out: Path, resume: bool = False,
        max_steps: int | None = None, run: Run | None = None) -> int:
    """Train ``model`` on ``dataset`` with ``card``'s recipe, checkpointing into ``out``.

    Args:
        model: the model, on ``run.device``.
        dataset: the training images.
        card: the card whose recipe (``card.train``: epochs, batch size, optimiser, seed, checkpoint interval)
            the run follows; its name and recipe are stored in each checkpoint.
        out: the directory of ``checkpoint.pt``.
        resume: continue from ``out/checkpoint.pt``; without it an existing checkpoint is an error.
        max_steps: stop when the run reaches this step (a checkpoint is written there, to resume from).
        run: rank, world size and device (default: one process on the CPU).

    Returns:
        The step the run stopped at: ``recipe.epochs`` times the steps per epoch unless ``max_steps`` stopped it.

    Raises:
        Interrupted: SIGINT or SIGTERM stopped the run (see the module's docstring).
        TrainingError: the loss became NaN or inf, or the checkpoint cannot be resumed with this card.
        OutputError: a checkpoint cannot be written (e.g. the disk is full); the previous one stays.
    """
    run = run or Run()
    recipe = card.train
    optimizer = _optimizer(recipe, model)
    checkpoint = Path(out) / CHECKPOINT
    plan = _Plan.of(recipe, len(dataset), run.world)
    torch.manual_seed(recipe.seed + 1_000_003 * run.rank)  # each rank's stream of sampling noise
    saved = _resume_point(checkpoint, card, model, optimizer, plan, resume, run)
    step = saved or 0
    net = model if run.world == 1 else torch.nn.parallel.DistributedDataParallel(model)
    sampler = DistributedSampler(range(len(dataset)), num_replicas=run.world, rank=run.rank, shuffle=True,
                                 seed=recipe.seed)
    stop = plan.total if max_steps is None else min(plan.total, max_steps)

    def save(rng: dict) -> None:
        if run.main:
            fix = f"make room, then continue with --resume ({_last_good(checkpoint, saved)})"
            write_checkpoint(checkpoint, card, model, optimizer, step, rng, fix)

    model.train()
    reporter = Reporter(plan.total, step, plan.per_epoch) if run.main else contextlib.nullcontext()
    with _distribution_checks_off(), _StopSignals(defer=True) as signals, reporter:
        if run.main:  # from here on a signal stops the run with a checkpoint of the step it reached
            start = f"resuming at step {step} of {plan.total}" if saved is not None else f"training {plan.total} steps"
            print(printable(f"{start} ({plan.per_epoch} per epoch), a checkpoint every {recipe.checkpoint_every} "
                            f"steps in {checkpoint}"), file=sys.stderr, flush=True)
        while step < stop:
            epoch, first = divmod(step, plan.per_epoch)
            sampler.set_epoch(epoch)
            order = torch.tensor(list(sampler))
            for b in range(first, plan.per_epoch):
                stopping = signals.stop_requested(run)
                x = dataset.batch(order[b * plan.batch_size:(b + 1) * plan.batch_size], run.device)
                due = step != saved and (stopping is not None or step > 0 and step % recipe.checkpoint_every == 0)
                rng = _rng_state(run) if due else None
                result = net(x, step=step)
                if not torch.isfinite(result.loss):
                    raise TrainingError(f"loss became {result.loss.item()} at step {step} (epoch {epoch + 1}); "
                                        f"{_last_good(checkpoint, saved)}; lower the learning rate or check the "
                                        f"data for NaN or inf")
                if due:
                    save(rng)
                    saved = step
                if stopping is not None:
                    raise Interrupted(stopping, step, checkpoint)
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
            save(_rng_state(run))
            saved = step
        stopping = signals.stop_requested(run)
        if stopping is not None:  # it came after the last step: the checkpoint above holds the run
            raise Interrupted(stopping, step, checkpoint)
    return step


def _prepare_out(out: Path, name: str, resume: bool) -> list[Path]:
    """Check, before the run starts, that it can write its files in ``out`` and overwrites no other run's.

    ``out`` must be a folder (created if missing) vaezoo can create files in. Without ``resume`` it must
    hold no checkpoint and no finished run (a ``*.toml`` card, ``NAME.safetensors``); with ``resume``, no
    card other than ``NAME.toml`` (the folder must end holding one card).

    Returns:
        The folders it created, outermost first (to remove should the run end before writing anything).

    Raises:
        OutputError, TrainingError: one line naming the path and what to do.
    """
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is a file, not a folder; choose another --out")
    missing = [p for p in (out, *out.parents) if not p.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".vaezoo-probe.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"cannot write in --out {out}: {folder_problem(out, exc)}; choose another --out") from None
    cards = sorted(p.name for p in out.glob("*.toml"))
    if resume:
        others = [c for c in cards if c != f"{name}.toml"]
        if others:
            raise OutputError(f"--out {out} holds the card {', '.join(others)}, not this run's {name}.toml; resume "
                              f"with the --name the run was started with, or choose another --out")
        return missing
    if (out / CHECKPOINT).exists():
        raise _checkpoint_exists_error(out / CHECKPOINT)
    finished = cards + [f"{name}.safetensors"] * (out / f"{name}.safetensors").exists()
    if finished:
        raise OutputError(f"--out {out} already holds {', '.join(finished)}, the files of a finished run; "
                          f"choose another --out")
    return missing


def train(card: Card, out: Path, data_root=None, epochs: int | None = None, resume: bool = False,
          seed: int | None = None, device=None, max_steps: int | None = None,
          checkpoint_every: int | None = None, name: str | None = None) -> TrainResult:
    """Train the model ``card`` describes from its recipe and write its weights and completed card.

    Args:
        card: the card with the recipe (``train``) and model (``model``).
        out: the run's folder: ``checkpoint.pt``, then ``NAME.safetensors`` and ``NAME.toml``.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        epochs, seed, checkpoint_every: override the recipe's values.
        resume: continue from ``out/checkpoint.pt`` exactly where it stopped.
        device: "cpu", "cuda", ...
        max_steps: stop when the run reaches this step (the run can be resumed); no weights are written.
        name: the completed card's name (default ``CARD-run``); a built-in zoo entry's name is refused.

    Returns:
        The model, the step reached, the last step and, on rank 0 of a finished run, the completed card's path.

    Raises:
        Interrupted: SIGINT or SIGTERM stopped the run; see the module's docstring.
        VaezooError: the overrides, the output folder, the name, the checkpoint or the data are unusable, or
            the loss became NaN (a one-line message naming the fix).
    """
    recipe = _override(card.train, epochs=epochs, seed=seed, checkpoint_every=checkpoint_every)
    if max_steps is not None and max_steps < 1:
        raise TrainingError(f"--max-steps must be at least 1, got {max_steps}")
    name = run_name(card, name)
    card = card.model_copy(update={"train": recipe})
    out = Path(out)
    with _StopSignals(defer=False):
        run = _start_run(device)
        made: list[Path] = []
        try:
            if run.main:
                made = _prepare_out(out, name, resume)
            torch.manual_seed(recipe.seed)
            dataset = load_dataset(recipe.data.name, data_root, "train", **recipe.data.options)
            model = build_model(card, device=run.device)
            step = fit(model, dataset, card, out, resume, max_steps, run)
            total = _Plan.of(recipe, len(dataset), run.world).total
            finished = step == total and run.main
            card_path = publish(card, model, out, name, step, data_root, run.device) if finished else None
            return TrainResult(model, step, total, card_path)
        except BaseException:
            _remove_empty(made)
            raise
        finally:
            if run.world > 1:
                dist.destroy_process_group()


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a run created, innermost first, as long as they are still empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return


def _override(recipe: TrainRecipe, **values) -> TrainRecipe:
    """``recipe`` with the values given on the command line, validated as the card's own are."""
    given = {k: v for k, v in values.items() if v is not None}
    try:
        return TrainRecipe.model_validate({**recipe.model_dump(), **given})
    except ValidationError as exc:
        error = exc.errors()[0]
        name = "--" + str(error["loc"][0]).replace("_", "-")
        raise TrainingError(f"{name} {given.get(error['loc'][0])}: {error['msg'].lower()}") from None
