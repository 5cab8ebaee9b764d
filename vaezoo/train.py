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

The dataset's images (uint8, or dSprites' bit-packed rows) are moved to the run's device once, and every
batch is cut and converted there, in an order shuffled on that device: on CUDA no batch crosses from the
host. The recipe's ``precision = "bf16"`` runs the forward pass under ``torch.autocast`` in bfloat16,
``compile = true`` through ``torch.compile``. :func:`train_seeds` trains several seeds side by side in one
process (one GPU): each seed has its model, optimiser, shuffle and random streams, they share the
dataset on the device and take their steps in turn, and each ends exactly as it would trained alone.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import torch
import torch.distributed as dist
from pydantic import ValidationError
from torch import Tensor

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

__all__ = ["CHECKPOINT", "Interrupted", "Run", "TrainResult", "fit", "train", "train_seeds"]


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


def _device_store(dataset: ImageDataset, device: torch.device) -> ImageDataset:
    """``dataset`` with its images moved to ``device``, once: batches are then cut and converted there."""
    store = copy.copy(dataset)
    store.images = dataset.images.to(device)
    return store


def _epoch_order(size: int, seed: int, epoch: int, run: Run, generator: torch.Generator) -> Tensor:
    """This rank's order of the ``size`` images in ``epoch``, drawn on ``generator``'s device.

    It is the order of ``DistributedSampler(shuffle=True, seed=seed)``: the permutation of a generator
    seeded with ``seed + epoch``, padded to equal shares by repeating its start, every ``world``-th index
    from ``rank``. On the CPU it is the sampler's very order, so runs it checkpointed resume exactly.
    """
    generator.manual_seed(seed + epoch)
    order = torch.randperm(size, generator=generator, device=generator.device)
    padded = math.ceil(size / run.world) * run.world
    if padded > size:
        order = order.repeat(math.ceil(padded / size))[:padded]
    return order[run.rank::run.world]


class _Streams:
    """One seed's states of torch's global generators (the CPU's and the run's CUDA device's).

    The sampling noise comes from the global generators. Seeds trained side by side put their own states
    in place while they step (:meth:`active`) and take them back after, so each draws exactly the numbers
    it would draw trained alone.
    """

    def __init__(self, device: torch.device):
        self.cuda = device if device.type == "cuda" else None
        self.take()

    def take(self) -> None:
        self.cpu = torch.get_rng_state()
        self.gpu = torch.cuda.get_rng_state(self.cuda) if self.cuda is not None else None

    @contextlib.contextmanager
    def active(self):
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.gpu, self.cuda)
        try:
            yield
        finally:
            self.take()


class _SeedRun:
    """One seed's run in the loop: model, optimiser, random streams, shuffle, step and checkpoint.

    It seeds its random streams with the recipe's seed, then, resuming, restores them, the model and the
    optimiser from the checkpoint in ``out``. ``who`` starts its error messages (the seed, among several).
    """

    def __init__(self, model: VAE, card: Card, out: Path, plan: _Plan, resume: bool, run: Run, who: str = ""):
        recipe = card.train
        self.model, self.card, self.plan, self.run, self.who = model, card, plan, run, who
        self.optimizer = _optimizer(recipe, model)
        self.checkpoint = Path(out) / CHECKPOINT
        torch.manual_seed(recipe.seed + 1_000_003 * run.rank)  # each rank's stream of sampling noise
        self.saved = _resume_point(self.checkpoint, card, model, self.optimizer, plan, resume, run)
        self.step = self.saved or 0
        self.streams = _Streams(run.device)
        self.shuffle = torch.Generator(run.device)
        self.epoch, self.order = -1, None
        self.shown: VAEOutput | None = None  # the last step's output, for the progress display
        self.bf16 = recipe.precision == "bf16"
        net = model if run.world == 1 else torch.nn.parallel.DistributedDataParallel(model)
        self.compile_failures: tuple[type[Exception], ...] = ()
        if recipe.compile:
            net = _compiled(net)
            self.compile_failures = (torch._dynamo.exc.BackendCompilerFailed,)
        self.net = net

    @property
    def seed(self) -> int:
        return self.card.train.seed

    def take_step(self, store: ImageDataset, stopping: int | None) -> int:
        """Train one step on the next batch of ``store``; when ``stopping``, only check it and save.

        The checkpoint a step is due (every ``checkpoint_every`` steps, and the step the run stops at) is
        written once that step's loss is known to be finite, with the RNG states at the start of the step.

        Returns:
            The number of images of the step.
        """
        run, plan, recipe = self.run, self.plan, self.card.train
        epoch, b = divmod(self.step, plan.per_epoch)
        with self.streams.active():
            if epoch != self.epoch:
                self.epoch, self.order = epoch, _epoch_order(len(store), recipe.seed, epoch, run, self.shuffle)
            x = store.batch(self.order[b * plan.batch_size:(b + 1) * plan.batch_size])
            due = self.step != self.saved and (
                stopping is not None or self.step > 0 and self.step % recipe.checkpoint_every == 0)
            rng = _rng_state(run) if due else None
            with torch.autocast(run.device.type, torch.bfloat16, enabled=self.bf16):
                result = self._forward(x)
            if not torch.isfinite(result.loss):
                raise TrainingError(f"{self.who}loss became {result.loss.item()} at step {self.step} "
                                    f"(epoch {epoch + 1}); {_last_good(self.checkpoint, self.saved)}; lower the "
                                    f"learning rate or check the data for NaN or inf")
            if due:
                self.save(rng)
            if stopping is not None:
                return 0
            self.optimizer.zero_grad(set_to_none=True)
            result.loss.backward()
            self.optimizer.step()
        self.step += 1
        self.shown = result
        return x.shape[0]

    def _forward(self, x: Tensor) -> VAEOutput:
        try:
            return self.net(x, step=self.step)
        except self.compile_failures as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise TrainingError(f"torch.compile cannot compile the model here ({first}); train without it: "
                                f"compile = false in the card's [train], and no --compile") from None

    def save(self, rng: dict) -> None:
        """Write the checkpoint of the step reached (on rank 0), with the RNG states ``rng``."""
        if self.run.main:
            fix = f"make room, then continue with --resume ({_last_good(self.checkpoint, self.saved)})"
            write_checkpoint(self.checkpoint, self.card, self.model, self.optimizer, self.step, rng, fix)
        self.saved = self.step

    def finish(self) -> None:
        """Write the checkpoint of the step reached, with this seed's present RNG states, unless it is written."""
        if self.step != self.saved:
            with self.streams.active():
                rng = _rng_state(self.run)
            self.save(rng)

    def values(self) -> dict[str, float]:
        """The last step's values for the progress display (see :func:`_display_values`)."""
        return _display_values(self.model, self.shown, self.step - 1)


def _compiled(net: torch.nn.Module) -> torch.nn.Module:
    """``net`` through ``torch.compile`` (the parameters are shared: checkpoints and weights keep their names).

    Random numbers are drawn by torch's own operators (``fallback_random``), from the global generators as
    without compile: a compiled run draws the same sampling noise and differs only at float rounding.
    """
    try:
        return torch.compile(net, options={"fallback_random": True})
    except RuntimeError as exc:  # torch.compile refuses Python versions and platforms it does not support
        raise TrainingError(f"the recipe asks for torch.compile, which is not available here ({exc}); train "
                            f"without it: compile = false in the card's [train], and no --compile") from None


def fit(model: VAE, dataset: ImageDataset, card: Card, out: Path, resume: bool = False,
        max_steps: int | None = None, run: Run | None = None) -> int:
    """Train ``model`` on ``dataset`` with ``card``'s recipe, checkpointing into ``out``.

    Args:
        model: the model, on ``run.device``.
        dataset: the training images (moved to ``run.device`` for the run).
        card: the card whose recipe (``card.train``: epochs, batch size, optimiser, seed, checkpoint interval,
            precision, compile) the run follows; its name and recipe are stored in each checkpoint.
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
    [seed] = _fit([(model, card, Path(out))], dataset, resume, max_steps, run or Run())
    return seed.step


def _fit(runs: Sequence[tuple[VAE, Card, Path]], dataset: ImageDataset, resume: bool, max_steps: int | None,
         run: Run) -> list[_SeedRun]:
    """Train each ``(model, card, out)`` of ``runs`` (the same recipe but the seed), their steps in turn.

    Returns:
        The seeds' runs, each at the step it stopped at.
    """
    plan = _Plan.of(runs[0][1].train, len(dataset), run.world)
    several = len(runs) > 1
    seeds = [_SeedRun(model, card, out, plan, resume, run, f"seed {card.train.seed}: " if several else "")
             for model, card, out in runs]
    store = _device_store(dataset, run.device)
    stop = plan.total if max_steps is None else min(plan.total, max_steps)

    def values() -> dict[str, float]:
        if not several:
            return seeds[0].values()
        return {f"loss seed {s.seed}": s.shown.loss.item() for s in seeds if s.shown is not None}

    for s in seeds:
        s.model.train()
    start = min(s.step for s in seeds)
    reporter = Reporter(plan.total, start, plan.per_epoch) if run.main else contextlib.nullcontext()
    with _distribution_checks_off(), _StopSignals(defer=True) as signals, reporter:
        if run.main:  # from here on a signal stops the run with a checkpoint of the step it reached
            for s in seeds:
                begin = f"resuming at step {s.step} of" if s.saved is not None else "training"
                print(printable(f"{s.who}{begin} {plan.total} steps "
                                f"({plan.per_epoch} per epoch), a checkpoint every {s.card.train.checkpoint_every} "
                                f"steps in {s.checkpoint}"), file=sys.stderr, flush=True)
        while todo := [s for s in seeds if s.step < stop]:
            stopping = signals.stop_requested(run)
            images = sum(s.take_step(store, stopping) for s in todo)
            if stopping is not None:
                for s in seeds:
                    s.finish()
                raise Interrupted(stopping, min(s.step for s in seeds), seeds[0].checkpoint)
            if run.main:
                reporter.update(min(s.step for s in seeds), images * run.world, values)
        for s in seeds:
            s.finish()
        stopping = signals.stop_requested(run)
        if stopping is not None:  # it came after the last step: the checkpoints above hold the run
            raise Interrupted(stopping, min(s.step for s in seeds), seeds[0].checkpoint)
    return seeds


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
          checkpoint_every: int | None = None, name: str | None = None, precision: str | None = None,
          compile: bool | None = None) -> TrainResult:
    """Train the model ``card`` describes from its recipe and write its weights and completed card.

    Args:
        card: the card with the recipe (``train``) and model (``model``).
        out: the run's folder: ``checkpoint.pt``, then ``NAME.safetensors`` and ``NAME.toml``.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        epochs, seed, checkpoint_every, precision, compile: override the recipe's values.
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
    [result] = _train(card, [(seed, Path(out))], data_root, epochs, resume, device, max_steps, checkpoint_every,
                      name, precision, compile)
    return result


def train_seeds(card: Card, out: Path, seeds: Sequence[int], data_root=None, epochs: int | None = None,
                resume: bool = False, device=None, max_steps: int | None = None,
                checkpoint_every: int | None = None, name: str | None = None, precision: str | None = None,
                compile: bool | None = None) -> list[TrainResult]:
    """Train one model per seed, side by side in one process, seed N in ``out/seed-N``.

    The seeds share the dataset on the device and take their steps in turn; each has its own model,
    optimiser, shuffle, random streams and checkpoint, so each folder ends exactly as
    ``train(card, out / f"seed-{N}", seed=N)`` would leave it, and resumes (``resume``) on its own.

    Args:
        card, data_root, epochs, resume, device, max_steps, checkpoint_every, name, precision, compile:
            as for :func:`train`.
        out: the folder of the seeds' run folders.
        seeds: the seeds, each once.

    Returns:
        Each seed's result, in the order of ``seeds``.

    Raises:
        Interrupted, VaezooError: as :func:`train` does; also when ``seeds`` is empty, names a seed twice,
            or the process runs under torchrun.
    """
    seeds = list(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise TrainingError(f"--seeds must name each seed once, got {','.join(map(str, seeds)) or 'none'}")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise TrainingError("--seeds trains several seeds side by side in one process; run it without torchrun")
    return _train(card, [(s, Path(out) / f"seed-{s}") for s in seeds], data_root, epochs, resume, device,
                  max_steps, checkpoint_every, name, precision, compile)


def _train(card: Card, runs: list[tuple[int | None, Path]], data_root, epochs, resume, device, max_steps,
           checkpoint_every, name, precision, compile) -> list[TrainResult]:
    """Train ``card`` once per ``(seed, out)`` of ``runs`` (None: the recipe's seed), side by side."""
    cards = [card.model_copy(update={"train": _override(card.train, epochs=epochs, seed=seed,
                                                        checkpoint_every=checkpoint_every, precision=precision,
                                                        compile=compile)})
             for seed, _ in runs]
    if max_steps is not None and max_steps < 1:
        raise TrainingError(f"--max-steps must be at least 1, got {max_steps}")
    name = run_name(card, name)
    with _StopSignals(defer=False):
        run = _start_run(device)
        made: list[Path] = []
        try:
            if run.main:
                for _, out in runs:
                    made += _prepare_out(out, name, resume)
            data = cards[0].train.data
            dataset = load_dataset(data.name, data_root, "train", **data.options)
            models = []
            for each in cards:
                torch.manual_seed(each.train.seed)  # the model's initial weights
                models.append(build_model(each, device=run.device))
            seeds = _fit([(m, c, out) for m, c, (_, out) in zip(models, cards, runs)], dataset, resume, max_steps,
                         run)
            total = seeds[0].plan.total
            results = []
            for s, (_, out) in zip(seeds, runs):
                card_path = None
                if s.step == total and run.main:
                    with s.streams.active():  # what the evaluation draws, too, is what this seed alone draws
                        card_path = publish(s.card, s.model, out, name, s.step, data_root, run.device)
                results.append(TrainResult(s.model, s.step, total, card_path))
        except BaseException:
            _remove_empty(made)
            if run.world > 1:
                dist.destroy_process_group()
            raise
        if run.world > 1:
            # Every rank reaches the end before the group goes: a rank that tears it down while another still
            # talks to it makes gloo abort the process at exit ("terminate called without an active exception").
            dist.barrier()
            dist.destroy_process_group()
        return results


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
