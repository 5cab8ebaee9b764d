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
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from pydantic import ValidationError
from torch import Tensor

from vaezoo.assemble import build_model, load_dataset
from vaezoo.cards import Card, TrainRecipe
from vaezoo.checkpoints import CHECKPOINT, write_checkpoint
from vaezoo.data import ImageDataset
from vaezoo.errors import OutputError, TrainingError
from vaezoo.files import folder_problem
from vaezoo.locks import run_lock
from vaezoo.loop import (Interrupted, Plan, Run, StopSignals, Streams, check_dataset, checkpoint_exists_error, device_store,
                         distribution_checks_off, epoch_order, last_good, make_optimizer, resume_point, rng_state,
                         start_run)
from vaezoo.ensemble import fit_ensemble
from vaezoo.evaluate import check_metrics
from vaezoo.model import VAE, VAEOutput
from vaezoo.publish import publish, run_name
from vaezoo.sweeps import Sweep, members
from vaezoo.terminal import printable
from vaezoo.train_progress import Reporter

__all__ = ["CHECKPOINT", "Interrupted", "Run", "TrainResult", "fit", "train", "train_seeds"]


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (under DDP every rank holds the same weights).
        step: the step the run stopped at.
        total: the run's last step; ``step`` is less when ``max_steps`` stopped it.
        card_path: the completed card; None when the run stopped early (``max_steps``) or on ranks other than 0.
        error: why a run of an ensemble stopped before the others (its loss became NaN or inf), or None.
    """

    model: VAE
    step: int
    total: int
    card_path: Path | None
    error: str | None = None


def _display_values(model: VAE, result: VAEOutput, step: int) -> dict[str, float]:
    """What the progress display shows of a step: the loss, its terms, KL per part, the regularizers' targets."""
    values = {"loss": result.loss.item()}
    values.update({k: v.item() for k, v in result.terms.items()})
    values.update({f"kl_{k}": v.item() for k, v in result.kl.items()})
    values.update(model.targets(result.posterior, step))
    return values


class _SeedRun:
    """One seed's run in the loop: model, optimiser, random streams, shuffle, step and checkpoint.

    It seeds its random streams with the recipe's seed, then, resuming, restores them, the model and the
    optimiser from the checkpoint in ``out``. ``who`` starts its error messages (the seed, among several).
    """

    def __init__(self, model: VAE, card: Card, out: Path, plan: Plan, resume: bool, run: Run, who: str = ""):
        recipe = card.train
        self.model, self.card, self.plan, self.run, self.who = model, card, plan, run, who
        self.optimizer = make_optimizer(recipe, model.parameters())
        self.checkpoint = Path(out) / CHECKPOINT
        torch.manual_seed(recipe.seed + 1_000_003 * run.rank)  # each rank's stream of sampling noise
        self.saved = resume_point(self.checkpoint, card, model, self.optimizer, plan, resume, run)
        self.step = self.saved or 0
        self.streams = Streams(run.device)
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
                self.epoch, self.order = epoch, epoch_order(len(store), recipe.seed, epoch, run, self.shuffle)
            x = store.batch(self.order[b * plan.batch_size:(b + 1) * plan.batch_size])
            due = self.step != self.saved and (
                stopping is not None or self.step > 0 and self.step % recipe.checkpoint_every == 0)
            rng = rng_state(run) if due else None
            with torch.autocast(run.device.type, torch.bfloat16, enabled=self.bf16):
                result = self._forward(x)
            if not torch.isfinite(result.loss):
                raise TrainingError(f"{self.who}loss became {result.loss.item()} at step {self.step} "
                                    f"(epoch {epoch + 1}); {last_good(self.checkpoint, self.saved)}; lower the "
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
            return self.net(x, step=self.step, checked=True)
        except self.compile_failures as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise TrainingError(f"torch.compile cannot compile the model here ({first}); train without it: "
                                f"compile = false in the card's [train], and no --compile") from None

    def save(self, rng: dict) -> None:
        """Write the checkpoint of the step reached (on rank 0), with the RNG states ``rng``."""
        if self.run.main:
            fix = f"make room, then continue with --resume ({last_good(self.checkpoint, self.saved)})"
            write_checkpoint(self.checkpoint, self.card, self.model, self.optimizer.state_dict(), self.step, rng, fix)
        self.saved = self.step

    def finish(self) -> None:
        """Write the checkpoint of the step reached, with this seed's present RNG states, unless it is written."""
        if self.step != self.saved:
            with self.streams.active():
                rng = rng_state(self.run)
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
    return _fit(model, card, Path(out), dataset, resume, max_steps, run or Run()).step


def _fit(model: VAE, card: Card, out: Path, dataset: ImageDataset, resume: bool, max_steps: int | None,
         run: Run) -> _SeedRun:
    """Train ``model`` with ``card``'s recipe, checkpointing into ``out``; the run at the step it stopped at."""
    plan = Plan.of(card.train, len(dataset), run.world)
    seed = _SeedRun(model, card, out, plan, resume, run)
    store = device_store(dataset, run.device)
    check_dataset(model, store)
    stop = plan.total if max_steps is None else min(plan.total, max_steps)
    model.train()
    reporter = Reporter(plan.total, seed.step, plan.per_epoch) if run.main else contextlib.nullcontext()
    with distribution_checks_off(), StopSignals(defer=True) as signals, reporter:
        if run.main:  # from here on a signal stops the run with a checkpoint of the step it reached
            begin = f"resuming at step {seed.step} of" if seed.saved is not None else "training"
            print(printable(f"{begin} {plan.total} steps ({plan.per_epoch} per epoch), a checkpoint every "
                            f"{card.train.checkpoint_every} steps in {seed.checkpoint}"), file=sys.stderr, flush=True)
        while seed.step < stop:
            stopping = signals.stop_requested(run)
            images = seed.take_step(store, stopping)
            if stopping is not None:
                seed.finish()
                raise Interrupted(stopping, seed.step, seed.checkpoint)
            if run.main:
                reporter.update(seed.step, images * run.world, seed.values)
        seed.finish()
        stopping = signals.stop_requested(run)
        if stopping is not None:  # it came after the last step: the checkpoint above holds the run
            raise Interrupted(stopping, seed.step, seed.checkpoint)
    return seed


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
        raise checkpoint_exists_error(out / CHECKPOINT)
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
    recipe = _override(card.train, epochs=epochs, seed=seed, checkpoint_every=checkpoint_every,
                       precision=precision, compile=compile)
    [result] = _train(card, [(card.model_copy(update={"train": recipe}), Path(out), "")], Path(out), data_root,
                      resume, device, max_steps, name)
    return result


def train_seeds(card: Card, out: Path, seeds: Sequence[int], sweeps: Sequence[Sweep] = (), data_root=None,
                epochs: int | None = None, resume: bool = False, device=None, max_steps: int | None = None,
                checkpoint_every: int | None = None, name: str | None = None, precision: str | None = None,
                compile: bool | None = None, formulation: str | None = None) -> list[TrainResult]:
    """Train an ensemble: one run per seed and combination of the sweeps' values, all in one step.

    The runs are stacked (:mod:`vaezoo.ensemble`): one forward, backward and optimiser step covers all the
    runs whose cards differ only in the seed. Each run has its own data order, sampling noise, optimiser
    state and checkpoint, so each folder ends as ``train`` of that card alone would leave it (up to float
    rounding), and resumes (``resume``) on its own. Seed N goes in ``out/seed-N``, or
    ``out/KEY=VALUE/seed-N`` in a sweep (see :func:`vaezoo.sweeps.members`).

    Args:
        card, data_root, epochs, resume, device, max_steps, checkpoint_every, name, precision, compile:
            as for :func:`train`.
        out: the folder of the runs' folders.
        seeds: the seeds, each once.
        sweeps: card fields and the values to train each with.
        formulation: how the stacked step runs the members' forward passes, "vmap" or "loop"
            (see :class:`vaezoo.ensemble.Stack`; default: the faster on the device).

    Returns:
        Each run's result, seeds varying fastest; a run whose loss became NaN or inf has its ``error``.

    Raises:
        Interrupted, VaezooError: as :func:`train` does; also when ``seeds`` is empty, names a seed twice,
            a sweep is unusable, or the process runs under torchrun.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise TrainingError("--seeds trains several runs in one process; run it without torchrun")
    if compile or (compile is None and card.train.compile):
        raise TrainingError("an ensemble runs its members through torch.func.vmap, not torch.compile; train "
                            "without it: no --compile, and compile = false in the card's [train]")
    recipe = _override(card.train, epochs=epochs, checkpoint_every=checkpoint_every, precision=precision)
    specs = members(card.model_copy(update={"train": recipe}), seeds, sweeps)
    return _train(card, [(m.card, Path(out) / m.folder, m.label) for m in specs], Path(out), data_root, resume,
                  device, max_steps, name, formulation)


def _train(card: Card, runs: list[tuple[Card, Path, str]], root: Path, data_root, resume, device, max_steps,
           name, formulation=None) -> list[TrainResult]:
    """Train each ``(card, out, label)`` of ``runs``: alone when it is one unlabelled run, else as an ensemble.

    The output folder ``root`` (``--out``) is locked for the whole run: a second run into it is refused.
    """
    if max_steps is not None and max_steps < 1:
        raise TrainingError(f"--max-steps must be at least 1, got {max_steps}")
    name = run_name(card, name)
    with StopSignals(defer=False):
        run = start_run(device)
        try:
            with run_lock(root) if run.main else contextlib.nullcontext():
                results = _train_held(runs, name, data_root, resume, max_steps, formulation, run)
        except BaseException:
            if run.world > 1:
                dist.destroy_process_group()
            raise
        if run.world > 1:
            # Every rank reaches the end before the group goes: a rank that tears it down while another still
            # talks to it makes gloo abort the process at exit ("terminate called without an active exception").
            dist.barrier()
            dist.destroy_process_group()
        return results


def _train_held(runs: list[tuple[Card, Path, str]], name: str, data_root, resume, max_steps, formulation,
                run: Run) -> list[TrainResult]:
    """:func:`_train` once the run holds its output folder."""
    made: list[Path] = []
    try:
        if run.main:
            for _, out, _ in runs:
                made += _prepare_out(out, name, resume)
        data = runs[0][0].train.data
        dataset = load_dataset(data.name, data_root, "train", **data.options)
        models = []
        for each, _, _ in runs:
            torch.manual_seed(each.train.seed)  # the model's initial weights
            models.append(build_model(each, device=run.device))
        check_metrics(models[0], runs[0][0])  # at step 0, not after training: every metric the card asks for
        if len(runs) == 1 and not runs[0][2]:
            trained = [_fit(models[0], *runs[0][:2], dataset, resume, max_steps, run)]
        else:
            trained = fit_ensemble([(m, c, out, label) for m, (c, out, label) in zip(models, runs)], dataset,
                                   resume, max_steps, run, formulation)
        results = []
        for t, (member_card, out, _) in zip(trained, runs):
            total = Plan.of(member_card.train, len(dataset), run.world).total
            card_path = None
            if t.step == total and run.main:
                with t.streams.active():  # what the evaluation draws, too, is what this run alone draws
                    card_path = publish(t.card, t.model, out, name, t.step, data_root, run.device)
            results.append(TrainResult(t.model, t.step, total, card_path, getattr(t, "error", None)))
        return results
    except BaseException:
        _remove_empty(made)
        raise


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
