"""One run's training loop: one model, or one model per process under DDP (``torchrun``).

Under ``torchrun`` (``WORLD_SIZE`` > 1) every process starts from process 0's weights, takes process 0's buffers
before each step and averages its gradients with the others' after it, as DistributedDataParallel does (gloo on
CPU, nccl on CUDA), and each rank takes its share of every epoch's order, the order of a DistributedSampler; only
rank 0 writes files. Not DDP itself: a process group it has used outlives ``destroy_process_group``, and its
gloo threads, still alive when the process exits, abort it if they let go of a tensor after Python has begun to
shut down.

Every ``checkpoint_every`` steps a checkpoint (:mod:`vaezoo.entries.checkpoints`) saves the model, the optimiser,
the step and the RNG states at the start of that step, once that step's loss is known to be
finite, so the one a diverged run names is good to resume from. Regularizer schedules are pure functions
of the step, so resuming (``resume``) continues exactly where the checkpoint was taken. The recipe's ``precision``
sets torch's TF32 flags for the whole step (:func:`~vaezoo.training.loop.precision_flags`); ``bf16-mixed`` runs
the forward pass under ``torch.autocast`` in bfloat16; ``compile = true`` runs it through ``torch.compile``
(:mod:`vaezoo.training.compiling`). Several runs at once are :mod:`vaezoo.training.ensemble`'s.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from torch import Tensor

from vaezoo.data import ImageDataset
from vaezoo.entries.schema import Card
from vaezoo.errors import Phrase, TrainingError
from vaezoo.latents.base import distribution_checks
from vaezoo.model import VAE, VAEOutput
from vaezoo.regularizers.collectives import average_gradients, same_buffers, same_weights
from vaezoo.terminal import note
from vaezoo.entries.checkpoints import CHECKPOINT, Checkpoint, write_checkpoint
from vaezoo.training.loop import (Plan, Run, Streams, callers_rng_kept, check_before_training, check_run_folder,
                                  device_store, diverged, epoch_order, last_good, make_optimizer,
                                  optimizer_step, precision_flags, resume_point, rng_state,
                                  on_machines, same_on_every_rank, this_machine, until)
from vaezoo.training.auxiliary import TrainingParts
from vaezoo.training.compiling import Compiled, step_tensor
from vaezoo.training.progress import Reporter
from vaezoo.signals import Interrupted, StopSignals

__all__ = ["CHECK_EVERY", "SingleRun", "fit", "fit_single"]

CHECK_EVERY = 100
"""Steps between reads of a run's non-finite flag, outside its checkpoints (each read waits for the device)."""


def _display_values(model: VAE, result: VAEOutput, step: int) -> dict[str, float]:
    """What the progress display shows of a step: the loss, its terms, KL per part, the regularizers' targets."""
    values = {"loss": result.loss.item()}
    values.update({k: v.item() for k, v in result.terms.items()})
    values.update({f"kl_{k}": v.item() for k, v in result.kl.items()})
    values.update(model.targets(result.posterior, step))
    return values


class SingleRun:
    """One run in the loop: model, optimiser, random streams, shuffle, step and checkpoint.

    It seeds its random streams with the recipe's seed, then, resuming, restores them, the model and the
    optimiser from the checkpoint in ``out``. Its card records in ``train.machine`` where the run trained (the
    checkpoint's machines, and this one from the step it began at once it has trained). A non-finite loss is noted
    on the device, with its step, and read every :data:`CHECK_EVERY` steps and before each checkpoint: the loop
    never waits for the device otherwise.
    """

    error: str | None = None  # a single run raises its error instead of stopping with it, as a member does

    def __init__(self, model: VAE, card: Card, out: Path, plan: Plan, resume: bool, run: Run,
                 read: dict[Path, Checkpoint] | None = None):
        recipe = card.train
        self.model, self.card, self.plan, self.run = model, card, plan, run
        self.optimizer = make_optimizer(recipe, model.parameters())
        self.parts = TrainingParts(model)  # the regularizers' own networks and optimisers (FactorVAE's), if any
        self.checkpoint = Path(out) / CHECKPOINT
        self.had_folder = Path(out).is_dir()
        torch.manual_seed(recipe.seed + 1_000_003 * run.rank)  # each rank's stream of sampling noise
        resumed = same_on_every_rank(
            lambda: resume_point(self.checkpoint, card, model, self.optimizer, plan, resume, run, self.parts, read),
            run, out)
        self.saved = None if resumed is None else resumed.step
        self.step = self.began = self.saved or 0
        self.machines = () if resumed is None else resumed.machines  # where the run trained before this process
        self.card = on_machines(card, self.machines)
        self.streams = Streams(run.device)
        self.shuffle = torch.Generator(run.device)
        self.epoch, self.order = -1, None
        self.shown: VAEOutput | None = None  # the last step's output, for the progress display
        self.first_bad = torch.full((), -1, dtype=torch.long, device=run.device)  # the first non-finite loss's step
        self.bad_loss = torch.zeros((), device=run.device)
        self.bad_terms: Tensor | None = None  # whether each loss term was not finite at that step
        self.term_names: list[str] = []
        self.bf16 = recipe.precision == "bf16-mixed"
        if run.world > 1:
            same_weights(model)
        self.compiled = recipe.compile
        self.net = Compiled(model) if recipe.compile else model  # the parameters are shared: checkpoints keep names

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
        with self.streams.active(), precision_flags(recipe.precision):
            if epoch != self.epoch:
                self.epoch, self.order = epoch, epoch_order(len(store), recipe.seed, epoch, run, self.shuffle)
            due = self.step != self.saved and (
                stopping is not None or self.step > 0 and self.step % recipe.checkpoint_every == 0)
            rng = rng_state(run) if due else None
            x = store.draw_pixels(store.batch(self.order[b * plan.batch_size:(b + 1) * plan.batch_size]))
            if run.world > 1:
                same_buffers(self.model)
            with torch.autocast(run.device.type, torch.bfloat16, enabled=self.bf16):
                result = self._forward(x)
            bad = ~torch.isfinite(result.loss.detach()) & (self.first_bad < 0)
            self.first_bad = torch.where(bad, self.step, self.first_bad)
            self.bad_loss = torch.where(bad, result.loss.detach().float(), self.bad_loss)
            # which terms made it so (a broken part is named by them): one stack a step, read only on failure
            nonfinite = ~torch.isfinite(torch.stack([t.detach().float() for t in result.terms.values()]))
            self.term_names = list(result.terms)
            self.bad_terms = torch.where(bad, nonfinite, nonfinite if self.bad_terms is None else self.bad_terms)
            if due:
                self.check()
                self.save(rng)
            if stopping is not None:
                return 0
            self.optimizer.zero_grad(set_to_none=True)
            result.loss.backward()
            if run.world > 1:
                average_gradients(self.model.parameters())
            optimizer_step(self.optimizer)
            if self.parts:
                self.parts.step(self.model, result, self.step, self.parts.second_images(store, plan.batch_size))
        self.step += 1
        self.shown = result
        if self.step % CHECK_EVERY == 0:
            self.check()
        return x.shape[0]

    def check(self) -> None:
        """Read the non-finite flag (waiting for the device).

        Raises:
            TrainingError: the loss became NaN or inf: the step, and the last good checkpoint to resume from.
        """
        first = int(self.first_bad)
        if first >= 0:
            terms = [name for name, bad in zip(self.term_names, self.bad_terms.tolist()) if bad]
            raise TrainingError(diverged(float(self.bad_loss), first, self.plan, terms, self.checkpoint, self.saved))

    def _forward(self, x: Tensor) -> VAEOutput:
        step = step_tensor(self.step, self.run.device) if self.compiled else self.step  # one graph for every step
        return self.net(x, step=step, checked=True)

    def save(self, rng: dict) -> None:
        """Write the checkpoint of the step reached (on rank 0), with the RNG states ``rng``."""
        if self.run.main:
            check_run_folder(self.checkpoint, self.step, self.had_folder or self.saved is not None)
            fix = Phrase("make room, then continue with {resume:True} ({last})",
                         last=last_good(self.checkpoint, self.saved))
            self.card = on_machines(self.card, self.machines, this_machine(self.run, self.began))
            write_checkpoint(self.checkpoint, self.card, self.model, self.optimizer.state_dict(), self.step, rng, fix,
                             self.parts.state_dict() if self.parts else None)
        self.saved = self.step

    def finish(self) -> None:
        """Write the checkpoint of the step reached, with this seed's present RNG states, unless it is written."""
        if self.step != self.saved:
            self.check()
            with self.streams.active():
                rng = rng_state(self.run)
            self.save(rng)

    def values(self) -> dict[str, float]:
        """The last step's values for the progress display (see :func:`_display_values`)."""
        return _display_values(self.model, self.shown, self.step - 1)


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
        Interrupted: SIGINT, SIGTERM or SIGHUP stopped the run (see the module's docstring).
        TrainingError: the loss became NaN or inf, or the checkpoint cannot be resumed with this card.
        OutputError: a checkpoint cannot be written (e.g. the disk is full); the previous one stays.
    """
    run = run or Run()
    with callers_rng_kept(run.device):
        return fit_single(model, card, Path(out), dataset, resume, max_steps, run).step


def fit_single(model: VAE, card: Card, out: Path, dataset: ImageDataset, resume: bool, max_steps: int | None,
               run: Run, read: dict[Path, Checkpoint] | None = None) -> SingleRun:
    """Train ``model`` with ``card``'s recipe, checkpointing into ``out``; the run at the step it stopped at.
    ``read``: checkpoints already read, by path, which the resume takes rather than reading them again."""
    plan = Plan.of(card.train, len(dataset), run.world)
    seed = SingleRun(model, card, out, plan, resume, run, read)
    store = device_store(dataset, run.device)
    check_before_training(store, [(model, card, plan, None)])
    stop = plan.total if max_steps is None else min(plan.total, max_steps)
    model.train()
    reporter = Reporter(plan.total, seed.step, plan.per_epoch) if run.main else contextlib.nullcontext()
    # a caller's torch.no_grad() or set_grad_enabled(False) holds no sway over the steps
    with torch.enable_grad(), distribution_checks(False), StopSignals(defer=True) as signals, reporter:
        if run.main:  # from here on a signal stops the run with a checkpoint of the step it reached
            begin = f"resuming at step {seed.step} of" if seed.saved is not None else "training"
            note(f"{begin} {plan.total:,} steps ({plan.per_epoch:,} per epoch){until(stop, plan.total, seed.step)}, a "
                 f"checkpoint every {card.train.checkpoint_every:,} steps in {seed.checkpoint}")
        while seed.step < stop:
            stopping = signals.stop_requested(run.world, run.device)
            images = seed.take_step(store, stopping)
            if stopping is not None:
                seed.finish()
                raise Interrupted(stopping, seed.step, seed.checkpoint)
            if run.main:
                reporter.update(seed.step, images * run.world, seed.values)
        seed.finish()
        stopping = signals.stop_requested(run.world, run.device)
        if stopping is not None:  # it came after the last step: the checkpoint above holds the run
            raise Interrupted(stopping, seed.step, seed.checkpoint)
    return seed
