"""What every training loop shares: where the run is (its rank, its device and the machine it records), its plan
through the data, the order of each epoch, its random streams and its resume point (its stop signals are
:mod:`vaezoo.signals`).

:mod:`vaezoo.training.single` (one model, or one per DDP rank) and :mod:`vaezoo.training.ensemble` (several
runs stacked into one step) both step through a dataset with these.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from vaezoo.data import ImageDataset
from vaezoo.devices import usable_device
from vaezoo.entries.schema import Card, Machine, TrainRecipe
from vaezoo.errors import (InputError, OutputError, Phrase, TrainingError, TrainingWarning, WeightsError,
                           first_line)
from vaezoo.latents.base import distribution_checks
from vaezoo.store.files import remove_temporaries
from vaezoo.store.weights import load_weights
from vaezoo.terminal import note
from vaezoo.training.launch import launch, meet, part, set_apart
from vaezoo.entries.checkpoints import Checkpoint, check_optimizer_state, check_recipe, read_checkpoint, restore_rng


@dataclass
class Run:
    """Where a run is: the process's rank among ``world`` processes and its device."""

    rank: int = 0
    world: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        return self.rank == 0


def this_machine(run: Run, step: int, ensemble: str | None = None, members: int | None = None) -> Machine:
    """The machine this process trains on from ``step``: ``run``'s device type (and its accelerator's name, where
    torch gives one), torch's version, its CPU threads and the processes of the run; ``ensemble`` (``vmap`` or
    ``loop``) and ``members`` for a member of an ensemble's stacked step."""
    name = getattr(getattr(torch, run.device.type, None), "get_device_name", None)
    gpu = "".join(c for c in name(run.device) if " " <= c <= "~").strip()[:100] if name is not None else ""
    return Machine(step=step, device=run.device.type, gpu=gpu or None, torch=torch.__version__,
                   threads=torch.get_num_threads(), processes=run.world if run.world > 1 else None,
                   ensemble=ensemble, members=members)


def on_machines(card: Card, history: Sequence[Machine], now: Machine | None = None) -> Card:
    """``card`` recording in its ``train.machine`` the machines a run trained on: ``history`` (its checkpoint's),
    then ``now``, the machine it trains on since, where that is another than the last of ``history``."""
    machines = list(history)
    if now is not None and not (machines and not machines[-1].differences(now)):
        machines.append(now)
    return card.model_copy(update={"train": card.train.model_copy(update={"machine": machines or None})})


def start_run(device) -> Run:
    """This process's part of a run on ``device`` (``"auto"`` too: :func:`vaezoo.devices.usable_device`; default:
    the CPU, or under torchrun each rank's GPU).

    Raises:
        DeviceError: ``device`` is not one this machine has.
        TrainingError: the variables torchrun sets are unusable, or the other processes did not come
            (:mod:`vaezoo.training.launch`).
    """
    set_apart()
    device = usable_device(device)
    where = launch()
    if where.world == 1:
        return Run(device=device or torch.device("cpu"))
    cuda = device.type == "cuda" if device is not None else torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(where.local)
    # torch.distributed.nn.functional's defaults hold the process group that exists when it is first imported
    # (torch.optim imports it): imported after the group, it keeps it past destroy_process_group, with its
    # gloo threads, which abort the process at exit if they let go of a tensor once Python has begun to shut down
    importlib.import_module("torch.distributed.nn.functional")
    dist.init_process_group("nccl" if cuda else "gloo", store=meet(where), rank=where.rank, world_size=where.world)
    return Run(where.rank, where.world, torch.device(f"cuda:{where.local}" if cuda else "cpu"))


def callers_rng_kept(device: torch.device) -> contextlib.AbstractContextManager:
    """``torch.random.fork_rng`` of the CPU's random state and ``device``'s if it is a GPU: a run seeds them with
    its recipe's seed and draws from them, and the caller finds them as they were once it returns or raises."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


@contextlib.contextmanager
def float32_default():
    """torch's default dtype float32 for the block, put back after it: a recipe's run is built and steps in float32
    (its ``precision`` says how a GPU computes that) whatever a caller's ``torch.set_default_dtype`` made it, so
    that its weights, checkpoints and card are the recipe's."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def end_run() -> None:
    """Leave the process group :func:`start_run` joined, once every process of the run has reached this point with
    its collectives done, and then their meeting point (:func:`vaezoo.training.launch.part`)."""
    dist.barrier()
    dist.destroy_process_group()
    part()


def make_optimizer(recipe: TrainRecipe, params, **extra) -> torch.optim.Optimizer:
    """The recipe's optimiser over ``params``, with ``extra`` options (e.g. ``fused``) beside the recipe's."""
    spec = recipe.optimizer
    return getattr(torch.optim, spec.name)(params, lr=spec.lr, **spec.options, **extra)


class StepOverflow(TrainingError):
    """An optimiser's step whose size its parameters' floats cannot hold (:func:`optimizer_step`)."""


RECIPE_OPTIMIZER = "the recipe's optimiser (train.optimizer)"
"""How :func:`optimizer_step`'s error names the model's optimiser."""


def optimizer_step(optimizer: torch.optim.Optimizer, whose: str = RECIPE_OPTIMIZER) -> None:
    """``optimizer.step()``, a step too large for the parameters' floats refused in one line.

    Args:
        optimizer: the optimiser.
        whose: names it and where its settings are (by default, the recipe's optimiser: :data:`RECIPE_OPTIMIZER`).

    Raises:
        StepOverflow: its learning rate, or an option larger than the parameters' dtype holds (a ``weight_decay``
            of 1e39), makes a step that dtype cannot hold: torch raised a ``RuntimeError`` with a traceback.
    """
    try:
        optimizer.step()
    except RuntimeError as exc:
        if "without overflow" not in str(exc):
            raise
        groups = optimizer.param_groups
        largest = min((torch.finfo(p.dtype).max for group in groups for p in group["params"] if p.is_floating_point()),
                      default=math.inf)
        options = [f"{key} {value:g}" for key, value in dict.fromkeys(
            (k, v) for group in groups for k, v in group.items() if k != "lr" and type(v) in (int, float)
            and abs(v) > largest)]
        rates = ", ".join(f"{lr:g}" for lr in dict.fromkeys(group["lr"] for group in groups))
        said = f"option {', '.join(options)}" if options else f"learning rate {rates}"
        raise StepOverflow(f"{whose}: {said} is too large, its step overflows the parameters' floating-point range; "
                           f"lower it") from None


def rng_state(run: Run) -> dict:
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


def checkpoint_exists_error(path: Path) -> TrainingError:
    """The error refusing to start a run afresh over the checkpoint ``path`` of another."""
    return TrainingError.about("{folder} already holds a checkpoint ({file}) of a run; pass {resume:True} to "
                               "continue it, or choose another {out} to start afresh", folder=path.parent,
                               file=path.name)


def _refusal(load, state) -> str | None:
    """``load(state)`` (a ``load_state_dict``); the first line of why it refused the state, or None when it took it."""
    try:
        load(state)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError, WeightsError) as exc:
        return first_line(exc) or type(exc).__name__
    return None


@dataclass(frozen=True)
class Resumed:
    """Where a resumed run continues: the checkpoint's step, and the machines the run trained on before it (the
    checkpoint's; empty where an older vaezoo wrote it)."""

    step: int
    machines: tuple[Machine, ...] = ()


def resume_point(path: Path, card: Card, model: torch.nn.Module, optimizer, plan: Plan, resume: bool, run: Run,
                 parts=None, read: dict[Path, Checkpoint] | None = None) -> Resumed | None:
    """Restore model, optimiser and RNG states from the checkpoint ``path``, and the regularizers' training parts
    and their optimisers into ``parts`` (a :class:`~vaezoo.training.auxiliary.TrainingParts`) when the model has
    any: where the run continues, or None to start afresh. A checkpoint made on another machine than this one (device,
    torch, threads, processes) is resumed with a :class:`TrainingWarning` naming what differs.

    ``read`` holds checkpoints already read, by path: ``path``'s is taken out of it rather than read again (a large
    model's checkpoint is not unpickled twice, nor held for the rest of the run)."""
    if not path.exists():
        if resume and run.main:
            note(f"no checkpoint in {path.parent}; starting from step 0")
        return None
    if not resume:
        raise checkpoint_exists_error(path)
    if run.main:  # a run killed while writing a checkpoint left its temporary file behind
        remove_temporaries(path)
    checkpoint = (read or {}).pop(path, None)
    if checkpoint is None:
        checkpoint = read_checkpoint(path, fix=Phrase("remove it to start over, or choose another {out}"))
    check_recipe(checkpoint, card)
    if checkpoint.step > plan.total:
        raise TrainingError.about("checkpoint {path} is at step {step}, past this run's last step {total} ({had} "
                                  "epochs of {per_epoch} steps); pass {epochs:{least}} or more to continue it",
                                  path=path, step=checkpoint.step, total=plan.total, had=card.train.epochs,
                                  per_epoch=plan.per_epoch, least=math.ceil(checkpoint.step / plan.per_epoch))
    load_weights(model, checkpoint.model, f"checkpoint {path}")
    check_optimizer_state(checkpoint, optimizer)
    if problem := _refusal(optimizer.load_state_dict, checkpoint.optimizer):
        raise TrainingError.about("the optimiser state in checkpoint {path} does not fit this card's {optimizer} "
                                  "optimiser ({problem}); resume with the card that started the run, or choose "
                                  "another {out}", path=path, optimizer=card.train.optimizer.name, problem=problem)
    if parts and (problem := _refusal(parts.load_state_dict, checkpoint.auxiliary)):
        raise TrainingError.about("checkpoint {path} holds no usable state of the regularizers' training parts "
                                  "and their optimisers ({problem}); resume with the card that started the run, "
                                  "or choose another {out}", path=path, problem=problem)
    if not restore_rng(checkpoint, run.rank, run.world, run.device):
        torch.manual_seed(card.train.seed + 1_000_003 * run.rank + checkpoint.step)
        if run.main:
            warnings.warn(f"{path} holds no RNG states for {run.world} processes; the sampling noise is reseeded, "
                          f"so the resumed run will not match an uninterrupted one bit for bit", TrainingWarning,
                          stacklevel=2)
    machines = tuple(checkpoint.machine or ())
    if machines and run.main:
        # how an ensemble stacks its members is the stack's to say, after this: compared as a run alone
        last = machines[-1].model_copy(update={"ensemble": None, "members": None})
        if moved := last.differences(this_machine(run, checkpoint.step)):
            warnings.warn(f"{path} was made on another machine than this one ({', '.join(moved)}): the run "
                          f"continues, but its weights will differ from an uninterrupted run's by float rounding, "
                          f"and its card records both machines", TrainingWarning, stacklevel=2)
    return Resumed(checkpoint.step, machines)


def same_on_every_rank(find: Callable[[], Resumed | None], run: Run, out: Path) -> Resumed | None:
    """Where this process resumes (None: afresh), as ``find`` restores it, once every process of a DDP run is found
    to resume from the same step (a collective call).

    Raises:
        TrainingError: the processes found different checkpoints, as where ``out`` is a folder of each machine's
            own (left to go on, they would wait for each other forever), or another process could not resume
            (without its word, the others would stop on a dead peer's socket error).
        Exception: whatever ``find`` raised on this process, once the others have been told.
    """
    if run.world == 1:
        return find()
    saved, failed = None, None
    try:
        saved = find()
    except Exception as exc:  # noqa: BLE001 - told to the other processes first, then raised as it is
        failed = exc
    why = None if failed is None else getattr(failed, "phrase", None) or str(failed)  # a phrase keeps its options
    told: list[tuple[int | None, Phrase | str | None]] = [(None, None)] * run.world
    dist.all_gather_object(told, (None if saved is None else saved.step, why))
    if failed is not None:
        raise failed
    for rank, (_, other) in enumerate(told):
        if other is not None:
            raise TrainingError.about("process {rank} of this run could not resume from {folder}: {why}",
                                      rank=rank, folder=out, why=other)
    steps = [step for step, _ in told]
    if len(set(steps)) > 1:
        found = ", ".join(f"rank {rank}: {'none' if step is None else f'step {step}'}"
                          for rank, step in enumerate(steps))
        raise TrainingError.about("the processes of this run found different checkpoints in {folder} ({found}); "
                                  "every process must resume from the same one: give them one {out} they share",
                                  folder=out, found=found)
    return saved


def check_run_folder(checkpoint: Path, step: int, stood: bool) -> None:
    """Refuse to write the ``checkpoint`` of ``step`` once its run's folder is gone: made again, the folder would take
    the rest of the run without its lock, where another run may have started meanwhile. ``stood`` says that the folder
    was there (when the run began, or made by an earlier checkpoint); the first checkpoint of a run given a new
    folder makes it.

    Raises:
        OutputError: the folder was removed or moved (or a file put in its place) while the run trained.
    """
    if stood and not checkpoint.parent.is_dir():
        raise OutputError.about("the run's folder {folder} is gone (removed or moved while the run trained), so the "
                                "checkpoint of step {step} is not written; where the folder was moved, continue with "
                                "{resume:True}", folder=checkpoint.parent, step=step)


def last_good(checkpoint: Path, saved: int | None) -> str:
    return (f"the last good checkpoint is {checkpoint} (step {saved})" if saved is not None
            else "no checkpoint has been written yet")


def diverged(loss: float, step: int, plan: Plan, terms: list[str], checkpoint: Path, saved: int | None) -> str:
    """Why a run stopped whose loss became NaN or inf: the loss, its step and epoch, the loss terms that were not
    finite there (which name a broken part), and the last good checkpoint to resume from."""
    which = f", in its term{'s' * (len(terms) > 1)} {', '.join(terms)}" if terms else ""
    fix = ("before any update, so no learning rate made it: check the settings of the part that makes "
           f"{'those terms' if len(terms) > 1 else 'that term'} on the card" if step == 0
           else "lower the learning rate or check the data for NaN or inf")
    return (f"loss became {loss} at step {step} (epoch {step // plan.per_epoch + 1}){which}; "
            f"{last_good(checkpoint, saved)}; {fix}")


@dataclass
class Plan:
    """How a run walks through its data: each rank's batch size, steps per epoch, the last step, and the size of
    each epoch's last batch on a rank (smaller than the others where the images do not split evenly)."""

    batch_size: int
    per_epoch: int
    total: int
    last_batch: int

    @classmethod
    def of(cls, recipe: TrainRecipe, size: int, world: int) -> Plan:
        if size < 1:  # an epoch of no step: nothing would train, and the epochs of the progress display divide by it
            raise TrainingError(f"dataset '{recipe.data.name}' gave 0 training images: nothing to train on; check the "
                                f"card's [train.data] options, or the dataset given")
        check_split(recipe, world)
        batch_size, share = recipe.batch_size // world, math.ceil(size / world)  # DistributedSampler pads shares
        per_epoch = math.ceil(share / batch_size)
        return cls(batch_size, per_epoch, recipe.epochs * per_epoch, share - (per_epoch - 1) * batch_size)


def check_split(recipe: TrainRecipe, world: int) -> None:
    """Refuse a recipe whose batch does not split evenly over the ``world`` processes of a DDP run.

    Raises:
        TrainingError: naming the batch size and the processes.
    """
    if recipe.batch_size % world:
        raise TrainingError(f"the recipe's batch size {recipe.batch_size} does not split evenly over {world} "
                            f"processes; run a number of processes that divides it")


TF32 = {"fp32": (False, False), "tf32": (True, True), "tf32-conv": (False, True), "bf16-mixed": (False, False)}
"""Each precision's TF32 flags: ``(torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)``.
bf16-mixed computes in float32 what autocast leaves in float32 (the regularizers' arithmetic, the losses)."""


@contextlib.contextmanager
def precision_flags(precision: str):
    """torch's TF32 flags set as the recipe's ``precision`` says (:data:`TF32`), and put back on exit.

    The flags decide how a GPU computes float32 matrix products and convolutions, in the forward and the backward
    pass alike; the CPU computes float32 either way. bf16-mixed's autocast is the forward pass's own.
    """
    matmul, cudnn = TF32[precision]
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def until(stop: int, total: int, step: int) -> str:
    """What the start of a run at ``step`` says of a stop short of its last step (``max_steps``): ``, this time up
    to step N``, or that it has no step to make."""
    if stop >= total:
        return ""
    if step >= stop:
        return f", stopping at step {stop:,}: at step {step:,} already, it has no step to make"
    return f", this time up to step {stop:,}"


def device_store(dataset: ImageDataset, device: torch.device | str) -> ImageDataset:
    """``dataset`` with its images moved to ``device`` (``"auto"`` too: :func:`vaezoo.devices.usable_device`),
    once: batches are then cut and converted there."""
    store = copy.copy(dataset)
    store.images = dataset.images.to(usable_device(device))
    return store


def check_before_training(store: ImageDataset, runs: Sequence[tuple[torch.nn.Module, Card, Plan, str | None]],
                          chunk: int = 8192) -> None:
    """What a run checks once before its first step.

    - The model's input contract (:meth:`vaezoo.model.VAE.check_input`) over the whole dataset: the steps then
      skip the per-batch check, which waits for the device every step.
    - The objective of the first batch, with ``torch.distributions``' argument checks on (training runs with
      them off): a density taken outside its support, such as a Bernoulli prior at relaxed samples, stops the
      run here instead of training a meaningless loss.
    - The same batch in eval mode too: a part that breaks its contract in eval mode only (a posterior's mode of
      the wrong width, say) fails here, naming itself, not at the evaluation after the last step; in both modes
      the code and the KL must be finite, and the KL not negative (:meth:`vaezoo.model.VAE.check_output`).
    - The objective of a batch of the size of each epoch's last batch, where that is smaller: a regularizer that
      needs more images a batch (minibatch-stratified sampling needs 2) stops the run here, not after an epoch.

    The model, its buffers and the random generators are left as they were.

    Args:
        store: the runs' dataset, on their device: checked once, by the first run's model.
        runs: each run ``(model, card, plan, label)``, an ensemble's members each with its own settings (a swept
            ``beta``); ``label`` names a member in messages (``beta=4 seed 1``), None names a single run by its card.
        chunk: images checked at a time.

    Raises:
        InputError: a chunk of the dataset is not what the model takes, naming its images where the dataset has
            more.
        TrainingError: torch refused an argument of a distribution of the objective, a loss term of the first
            batch is not finite (naming its part), or the objective refused a batch of the recipe's size or the
            epoch's last batch; each naming the card, or the member.
        PluginError: a part broke its contract (:meth:`vaezoo.model.VAE.forward`).
    """
    for start in range(0, len(store), chunk):
        images = store.batch(slice(start, start + chunk))
        try:
            runs[0][0].check_input(images)
        except InputError as exc:  # its count of images is the chunk's: say which of the dataset's they are
            if len(images) == len(store):
                raise
            raise InputError(f"the dataset's images {start:,} to {start + len(images) - 1:,} (of {len(store):,}): "
                             f"{exc}") from None
        if start == 0:
            for model, card, plan, label in runs:
                _check_first_batch(model, images, card, plan, label)


def _check_first_batch(model: torch.nn.Module, images: Tensor, card: Card, plan: Plan, member: str | None) -> None:
    who = f"card '{card.name}'" if member is None else member
    try:
        _check_objective(model, images[:plan.batch_size], who, member is not None)
    except InputError as exc:  # the images passed check_input: the batch's size is what is refused
        raise TrainingError(f"{who}: the model refuses a batch of {plan.batch_size} image(s), the recipe's "
                            f"batch_size ({exc}); give the card a larger batch_size") from None
    if plan.last_batch < plan.batch_size:
        _check_last_batch(model, images[:plan.last_batch], who, plan, member is not None)


def _check_last_batch(model: torch.nn.Module, x: Tensor, who: str, plan: Plan, member: bool) -> None:
    try:
        _check_objective(model, x, who, member)
    except InputError as exc:
        raise TrainingError(f"{who}: each epoch ends in a batch of {plan.last_batch} image(s) where the others "
                            f"hold {plan.batch_size}, and the model refuses it ({exc}); choose a batch size or a data "
                            f"subset that leaves a larger last batch") from None


def _check_objective(model: torch.nn.Module, x: Tensor, who: str, member: bool) -> None:
    trial = copy.deepcopy(model).train()
    try:
        owners = {"reconstruction": f"the likelihood {type(trial.likelihood).__name__}"}
        for i, regularizer in enumerate(trial.regularizers):  # which part makes each term, as the pass runs
            where = f"regularizer {type(regularizer).__name__} (regularizers.{i}, {type(regularizer).__module__})"
            regularizer.register_forward_hook(
                lambda _, __, terms, where=where: owners.update(dict.fromkeys(terms, where))
                if isinstance(terms, Mapping) else None)
        with callers_rng_kept(x.device), torch.no_grad(), \
                distribution_checks(True):
            for mode in (True, False):
                out = trial.train(mode)(x, step=0)
                trial.check_output(out)
                _check_terms(out.terms, owners, who, member)
    except ValueError as exc:
        if not _raised_in_distributions(exc):  # a part's own error (a param_size unlike what its posterior reads)
            raise
        first = first_line(exc) or type(exc).__name__
        raise TrainingError(f"{who}: its objective takes a distribution outside its support ({first}); "
                            f"vaezoo.testing.check_regularizer and check_latent_family name the part") from None


def _raised_in_distributions(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by ``torch.distributions`` itself (an argument or a value outside a distribution's
    support, which the check turns on): any other ValueError is a part's own, and goes up as it is, so that the
    command line names the plugin whose code raised it."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and str(frame.tb_frame.f_globals.get("__name__", "")).startswith("torch.distributions")


def _check_terms(terms: Mapping[str, Tensor], owners: Mapping[str, str], who: str, member: bool) -> None:
    """Refuse a first batch whose loss ``terms`` are not all finite, naming the part that makes each (``owners``):
    at step 0 the weights are the initial ones, so the part's settings (a weight of 1e308, on the card or swept for
    an ensemble's ``member``) make it, not a learning rate, nor the data (already checked)."""
    values = {term: float(value) for term, value in terms.items()}
    bad = [term for term, value in values.items() if not math.isfinite(value)]
    if not bad:
        return
    said = "; ".join(f"{term} = {values[term]} from {owners.get(term, 'an unknown part')}" for term in bad)
    settings = "this run's settings of that part (the card's, or a swept value)" if member else \
        "that part's settings on the card"
    raise TrainingError(f"{who}: on the first batch, before any step, the loss term{'s' * (len(bad) > 1)} "
                        f"{said}; check {settings} (too large a weight?), as no learning rate has acted yet")


def epoch_order(size: int, seed: int, epoch: int, run: Run, generator: torch.Generator) -> Tensor:
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


class Streams:
    """One seed's states of torch's global generators (the CPU's and the run's CUDA device's).

    The sampling noise comes from the global generators. Seeds trained side by side put their own states
    in place while they step (:meth:`active`) and take them back after, so each draws exactly the numbers
    it would draw trained alone.
    """

    def __init__(self, device: torch.device | str):
        """Take the present states, of the CPU's generator and ``device``'s (``"auto"`` too:
        :func:`vaezoo.devices.usable_device`) when it is a CUDA device."""
        device = usable_device(device)
        self.cuda = device if device.type == "cuda" else None
        self.take()

    def take(self) -> None:
        self.cpu = torch.get_rng_state()
        self.gpu = torch.cuda.get_rng_state(self.cuda) if self.cuda is not None else None

    def state(self) -> tuple[Tensor, Tensor | None]:
        """The states held, to :meth:`set` back later."""
        return self.cpu, self.gpu

    def set(self, state: tuple[Tensor, Tensor | None]) -> None:
        self.cpu, self.gpu = state

    @contextlib.contextmanager
    def active(self):
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.gpu, self.cuda)
        try:
            yield
        finally:
            self.take()
