"""Training from a card's recipe: the orchestration of a run, or of an ensemble of runs.

:func:`train` trains one run (:mod:`vaezoo.training.single`; under ``torchrun``, one process per rank), and
:func:`train_seeds` an ensemble, one run per seed and swept value, stacked into one step
(:mod:`vaezoo.training.ensemble`). Either way, in this order: the output folder (``out``) is locked for the run
(:func:`vaezoo.store.locks.run_lock`) and checked (:mod:`vaezoo.training.outputs`), the card's metrics are matched
against the model (step 0, before any data is read), the data is loaded and moved to the device once, the
loop trains with atomic checkpoints and exact resume, and :mod:`vaezoo.training.publish` writes each finished run's
weights and completed card.

SIGINT (Ctrl-C), SIGTERM or SIGHUP during the loop stops the run at the end of the step under way, with a
checkpoint of the step it reached, and raises :class:`Interrupted` (:mod:`vaezoo.signals`); outside the
loop (loading the data, publishing the card) a signal stops at once. Either way a file being written is
left as it was and its temporary file removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path

import torch
import torch.distributed as dist
from pydantic import ValidationError

from vaezoo.assemble import build_model, load_dataset, with_recorded_data
from vaezoo.context import check_arguments
from vaezoo.data import check_data_root
from vaezoo.entries.catalog import card_reference, get_card, one_scan
from vaezoo.entries.schema import Card, TrainRecipe
from vaezoo.errors import CardError, OutputError, PublishWarning, TrainingError, UnknownNameError, first_line
from vaezoo.evaluation.measure import check_metrics
from vaezoo.evaluation.report import eval_command, evaluate_card
from vaezoo.metrics.parallel import worker_pool
from vaezoo.model import VAE
from vaezoo.store.locks import GENERATORS, run_lock
from vaezoo.store.paths import home_path
from vaezoo.terminal import note
from vaezoo.entries.checkpoints import CHECKPOINT, Checkpoint, check_recipe, read_checkpoint
from vaezoo.training.ensemble import fit_ensemble
from vaezoo.training.launch import launch
from vaezoo.training.loop import Plan, Run, callers_rng_kept, check_split, end_run, float32_default, start_run
from vaezoo.training.outputs import check_layout, prepare_out, remove_empty
from vaezoo.training.publish import dropped, previous_card, publish, published, run_name
from vaezoo.signals import Interrupted, StopSignals
from vaezoo.training.single import fit, fit_single
from vaezoo.training.sweeps import Sweep, check_spelling, members, parse_sweep

__all__ = ["CHECKPOINT", "Interrupted", "Run", "TrainOptions", "TrainResult", "fit", "train", "train_seeds"]


@dataclass(frozen=True)
class TrainOptions:
    """How to run a card's recipe, beside the recipe itself: what ``vaezoo train``'s options say.

    Attributes:
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        resume: continue from the checkpoints in the output folder(s) exactly where they stopped.
        device: "cpu", "cuda", ..., "auto" (:func:`vaezoo.devices.usable_device`); default: the CPU, or each
            rank's GPU under torchrun.
        max_steps: stop when the run reaches this step (it can be resumed); its weights and a card marked as stopped
            there are written, unevaluated (:func:`~vaezoo.training.publish.own_card`), and the finished run
            replaces them.
        name: the completed card's name (default ``CARD-run``); a built-in zoo entry's name is refused.
        formulation: how an ensemble's stacked step runs its members ("vmap" or "loop"; default: the faster
            on the device, see :class:`vaezoo.training.ensemble.Stack`).
        epochs, seed, checkpoint_every, precision, compile: override the recipe's values.
        evaluate: measure a finished run's metrics on its card (False leaves them to ``vaezoo eval RUN --write``).
    """

    data_root: str | os.PathLike | None = None
    resume: bool = False
    device: object = None
    max_steps: int | None = None
    name: str | None = None
    formulation: str | None = None
    epochs: int | None = None
    seed: int | None = None
    checkpoint_every: int | None = None
    precision: str | None = None
    compile: bool | None = None
    evaluate: bool = True

    def __post_init__(self) -> None:
        """Refuse values of the wrong type, naming the option: ``resume="no"`` would resume; and a ``data_root``
        that is a file."""
        try:
            checked = check_arguments(TrainOptions, {f.name: getattr(self, f.name) for f in fields(self)}, "train")
        except ValueError as exc:
            raise TypeError(str(exc)) from None
        for name, value in checked.items():  # numpy.int64(2) epochs as 2, which the recipe written records
            object.__setattr__(self, name, value)
        check_data_root(self.data_root)  # a file there: before any run folder is made

    def recipe(self, card: Card) -> Card:
        """``card`` with the recipe values these options override, validated as the card's own are; with other
        ``epochs``, without the card's ``budget``, which told the length of the card's own run."""
        values = {"epochs": self.epochs, "seed": self.seed, "checkpoint_every": self.checkpoint_every,
                  "precision": self.precision, "compile": self.compile}
        train = _override(card.train, **values)
        if train.epochs != card.train.epochs:
            train = train.model_copy(update={"budget": None})
        return card.model_copy(update={"train": train})


@dataclass
class TrainResult:
    """What :func:`train` returns.

    Attributes:
        model: the trained model (under DDP every rank holds the same weights).
        step: the step the run stopped at.
        total: the run's last step; ``step`` is less when ``max_steps`` stopped it.
        card_path: the run's card: completed, or stopped at ``step`` (``max_steps``: its weights, unevaluated);
            None on ranks other than 0 and for a run whose loss became NaN or inf.
        error: why a run of an ensemble stopped before the others (its loss became NaN or inf), or None.
        folder: the run's folder (``out``, or ``out/seed-N`` of an ensemble), holding its checkpoint.
        reports: whether this process is the one that says where the run stopped and how to continue it: under
            torchrun, process 0 alone (:func:`vaezoo.training.launch.launch`); a lone process always.
    """

    model: VAE
    step: int
    total: int
    card_path: Path | None
    error: str | None = None
    folder: Path | None = None
    reports: bool = True

    @property
    def card(self) -> Card | None:
        """The run's card as written (None where :attr:`card_path` is)."""
        return None if self.card_path is None else get_card(self.card_path)

    @property
    def measure_command(self) -> str | None:
        """The command that measures a run whose card holds no metrics (``evaluate=False``), else None."""
        card = self.card
        if card is None or card.metrics:
            return None
        return f"{eval_command(self._reference)} --write"

    @cached_property
    def _reference(self) -> str:
        """How :attr:`measure_command` names the run: named once, as the zoo finds it (a read of every card folder),
        while whether the card holds metrics is read from it each time."""
        return card_reference(get_card(self.card_path), self.card_path.parent)


def train(card: Card | str | os.PathLike, out: str | os.PathLike[str], data_root: str | os.PathLike[str] | None = None,
          epochs: int | None = None, resume: bool = False, seed: int | None = None,
          device: str | torch.device | None = None, max_steps: int | None = None,
          checkpoint_every: int | None = None, name: str | None = None, precision: str | None = None,
          compile: bool | None = None, evaluate: bool = True) -> TrainResult:
    """Train the model ``card`` describes from its recipe and write its weights and completed card.

    Args:
        card: the card with the recipe (``train``) and model (``model``), or what names one (a zoo name, a card
            file, a folder holding one: :func:`vaezoo.entries.catalog.get_card`).
        out: the run's folder: ``checkpoint.pt``, then ``NAME.safetensors`` and ``NAME.toml``.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        epochs, seed, checkpoint_every, precision, compile: override the recipe's values.
        resume: continue from ``out/checkpoint.pt`` exactly where it stopped.
        device: "cpu", "cuda", ..., "auto" (:func:`vaezoo.devices.usable_device`).
        max_steps: stop when the run reaches this step (the run can be resumed); its weights and a card marked as
            stopped there (``train.steps``, its summary) are written, unevaluated, for ``vaezoo.load(OUT)`` and
            ``vaezoo eval OUT``; resumed to its end, the run replaces them.
        name: the completed card's name (default ``CARD-run``); a built-in zoo entry's name is refused.
        evaluate: measure the finished run's metrics on the test split and record them on its card; False writes
            the card without them (``vaezoo eval OUT --write`` measures them later).

    Returns:
        The model, the step reached, the last step and, on rank 0 of a finished run, the completed card's path.

    Raises:
        Interrupted: SIGINT, SIGTERM or SIGHUP stopped the run; see the module's docstring.
        VaezooError: the overrides, the output folder, the name, the checkpoint or the data are unusable, or
            the loss became NaN (a one-line message naming the fix).
    """
    card = card if isinstance(card, Card) else get_card(card)
    options = TrainOptions(data_root=data_root, resume=resume, device=device, max_steps=max_steps, name=name,
                           epochs=epochs, seed=seed, checkpoint_every=checkpoint_every, precision=precision,
                           compile=compile, evaluate=evaluate)
    [result] = _train(card, [(options.recipe(card), _folder(out), "")], _folder(out), options)
    return result


def train_seeds(card: Card | str | os.PathLike, out: str | os.PathLike[str], seeds: Sequence[int],
                sweeps: Sequence[Sweep] = (), data_root: str | os.PathLike[str] | None = None,
                epochs: int | None = None, resume: bool = False, device: str | torch.device | None = None,
                max_steps: int | None = None, checkpoint_every: int | None = None, name: str | None = None,
                precision: str | None = None, compile: bool | None = None,
                formulation: str | None = None, evaluate: bool = True) -> list[TrainResult]:
    """Train an ensemble: one run per seed and combination of the sweeps' values, all in one step.

    The runs are stacked (:mod:`vaezoo.training.ensemble`): one forward, backward and optimiser step covers all the
    runs whose cards differ only in the seed and in float settings (a swept ``beta``, ``lr``, FactorVAE's
    ``gamma``); the networks a model's regularizers train beside it (FactorVAE's discriminator) are stacked too, and
    step after the model's step. Each run has its own data order, sampling noise, optimiser states (its training
    parts' included) and checkpoint, so each folder ends as ``train`` of that card alone would leave it (up to float
    rounding), and resumes (``resume``) on its own. Seed N goes in ``out/seed-N``, or
    ``out/KEY=VALUE/seed-N`` in a sweep (see :func:`vaezoo.training.sweeps.members`). With ``compile`` (or the
    recipe's ``compile = true``) the stacked step's forward pass goes through ``torch.compile``, for every member.

    Args:
        card, data_root, epochs, resume, device, max_steps, checkpoint_every, name, precision, compile, evaluate:
            as for :func:`train` (``device`` ``"auto"`` too).
        out: the folder of the runs' folders.
        seeds: the seeds, each once.
        sweeps: card fields and the values to train each with.
        formulation: how the stacked step runs the members' forward passes, "vmap" or "loop"
            (see :class:`vaezoo.training.ensemble.Stack`; default: the faster on the device).

    Under ``torchrun`` (``WORLD_SIZE`` > 1) the runs are shared out over the processes, every ``WORLD_SIZE``-th
    run from the process's rank; each process trains its share as one ensemble on its own device, each run as
    it would train in one process, into the same folder.

    Returns:
        Each run's result, seeds varying fastest (under torchrun, this process's share); a run whose loss
        became NaN or inf has its ``error``.

    Raises:
        Interrupted, VaezooError: as :func:`train` does; also when ``seeds`` is empty, names a seed twice,
            a sweep is unusable, sets a field ``epochs`` or ``precision`` sets too, or spells a resumed member otherwise
            than its folder (:func:`~vaezoo.training.sweeps.check_spelling`), or torchrun starts more processes than
            there are runs.
    """
    card = card if isinstance(card, Card) else get_card(card)
    options = TrainOptions(data_root=data_root, resume=resume, device=device, max_steps=max_steps, name=name,
                           formulation=formulation, epochs=epochs, checkpoint_every=checkpoint_every,
                           precision=precision, compile=compile, evaluate=evaluate)
    if isinstance(seeds, str | int) or not isinstance(seeds, Iterable):
        raise TypeError(f"seeds takes a list of seeds, e.g. [0, 1], got {seeds!r}")
    if isinstance(sweeps, str | Sweep) or not all(isinstance(sweep, Sweep) for sweep in sweeps):
        raise TypeError(f"sweeps takes a list of sweeps, e.g. [parse_sweep('beta=1,4')] "
                        f"(vaezoo.training.sweeps.parse_sweep), got {sweeps!r}")
    fixed = options.recipe(card)
    specs = members(fixed, seeds, sweeps)
    for option in ("epochs", "precision"):  # the recipe's fields an option sets that a sweep may set too
        swept = list(dict.fromkeys(getattr(m.card.train, option) for m in specs))
        if getattr(options, option) is not None and swept != [getattr(fixed.train, option)]:
            raise TrainingError.about(f"{{{option}:{{given}}}} and {{sweep}} both set train.{option} (the members': "
                                      f"{{swept}}); give it once", given=getattr(options, option),
                                      swept=", ".join(map(str, swept)))
    if resume:
        check_spelling(fixed, _folder(out), specs)
    return _train(card, [(m.card, _folder(out) / m.folder, m.label) for m in specs], _folder(out), options)


def _folder(out: str | os.PathLike) -> Path:
    """``out`` as a path (``~`` is the home folder, as a card's path reads it), refused when it is empty (which
    would be the current folder) or not a path."""
    if not isinstance(out, str | os.PathLike):
        raise OutputError.about("{out} takes the run's folder, a path, got {got}", got=type(out).__name__)
    if not os.fspath(out).strip():
        raise OutputError.about("{out} needs a folder, not an empty path (which would be the current folder)")
    return home_path(out)


def _train(card: Card, runs: list[tuple[Card, Path, str]], root: Path, options: TrainOptions) -> list[TrainResult]:
    """Train each ``(card, out, label)`` of ``runs``: alone when it is one unlabelled run, else as an ensemble.

    The output folder ``root`` (``out``) and each run's folder are locked for the whole run: a second run into
    any of them (``out/seed-0`` of a running ensemble too) is refused. Runs and evaluations of other threads of the
    process wait for it (:data:`vaezoo.store.locks.GENERATORS`).
    """
    with GENERATORS:  # the run seeds and draws from torch's global generators, which another thread's run would move
        return _train_in_turn(card, runs, root, options)


def _train_in_turn(card: Card, runs: list[tuple[Card, Path, str]], root: Path,
                   options: TrainOptions) -> list[TrainResult]:
    """:func:`_train`, holding torch's global generators."""
    if options.max_steps is not None and options.max_steps < 1:
        raise TrainingError.of_value("{max_steps} must be at least 1, got {got}", got=options.max_steps)
    options = replace(options, name=run_name(card, options.name))
    # the dataset's options as the run's card records them, read once, after the arguments are checked and before
    # the model is built from them: the card records what the run trained on, and a resume on other data is refused
    # as another recipe
    given, runs = runs, _recorded(runs)
    where = launch()
    world = where.world
    if world > len(runs) and not _alone(runs):
        fix = "run it without torchrun" if len(runs) == 1 else f"run at most {len(runs)} processes (--nproc-per-node)"
        raise TrainingError.about(f"torchrun starts {world} processes for {len(runs)} run{'s' * (len(runs) > 1)}, so "
                                  f"some would have none; {fix}")
    if _alone(runs):  # before the processes part ways, while each says what the others say
        check_split(runs[0][0].train, world)
    try:
        with StopSignals(defer=False):
            run = start_run(options.device)
            try:
                _same_command(given, runs, options, run)
                with contextlib.ExitStack() as held:
                    local = run
                    if run.world > 1 and not _alone(runs):  # each process trains its share of the runs as one process
                        if run.main:
                            held.enter_context(run_lock(root))
                            check_layout(root, alone=False)
                        # once the folder is checked the processes are each a run of their own: no collective (a
                        # regularizer's whole-batch gather) may join them
                        end_run()
                        runs, local = runs[run.rank::run.world], Run(device=run.device)
                        for folder in dict.fromkeys(out for _, out, _ in runs):
                            held.enter_context(run_lock(folder))
                    elif run.main:
                        for folder in dict.fromkeys([root, *(out for _, out, _ in runs)]):
                            held.enter_context(run_lock(folder))
                        check_layout(root, alone=_alone(runs))
                    # under a caller's torch.inference_mode() the weights built here would be tensors no step changes;
                    # the recipe's seeds replace the random state only until the run returns
                    with torch.inference_mode(False), callers_rng_kept(local.device), float32_default():
                        results = _train_held(runs, options, local)
            except BaseException as exc:
                if dist.is_initialized():
                    dist.destroy_process_group()
                    if _lost_touch(exc):
                        raise _lost_peers(exc, run, runs) from None
                raise
            return [replace(result, reports=where.main) for result in results]
    except Interrupted as stop:  # waiting for the other processes in start_run too
        stop.reports = where.main
        raise


def _recorded(runs: list[tuple[Card, Path, str]]) -> list[tuple[Card, Path, str]]:
    """``runs`` with their dataset's options as a run's card records them
    (:func:`~vaezoo.assemble.with_recorded_data`), read once for all of them: an ensemble's members train on one
    dataset (a sweep of ``train.data`` is refused), so each member's card records what they all trained on, even
    where the dataset's files change meanwhile."""
    data = with_recorded_data(runs[0][0]).train.data
    return [(each.model_copy(update={"train": each.train.model_copy(update={"data": data})}), out, label)
            for each, out, label in runs]


def _same_command(given: list[tuple[Card, Path, str]], runs: list[tuple[Card, Path, str]], options: TrainOptions,
                  run: Run) -> None:
    """Refuse a DDP run whose processes were given different cards or options (a collective call), or read their
    dataset otherwise (``runs``' options as :func:`_recorded` read them from the ``given`` cards'): left to go on,
    they would average the gradients of different models, or of different data, or wait for each other forever
    where one stops first.

    Raises:
        TrainingError: naming the first setting that differs, and the process that has it.
    """
    if run.world == 1:
        return
    mine = {"card": [each.model_dump(mode="json") for each, _, _ in given], "run": [label for _, _, label in given],
            "max_steps": options.max_steps, "resume": options.resume, "evaluate": options.evaluate,
            "name": options.name, "formulation": options.formulation,
            # last: read from the cards above, whose own difference is said first, as what made this one
            "data": runs[0][0].train.data.model_dump(mode="json")["options"]}
    told: list[dict | None] = [None] * run.world
    dist.all_gather_object(told, mine)
    for rank, other in enumerate(told):
        if other != told[0]:
            where, first, then = _difference(told[0], other)
            if where.partition(".")[0] == "data":
                raise TrainingError(f"process {rank} of this run read dataset '{runs[0][0].train.data.name}' "
                                    f"otherwise than process 0 ({where.partition('.')[2] or 'options'} {then!r}, not "
                                    f"{first!r}): its files changed between the processes' reads, or are not the same "
                                    f"files on every machine; give every process the same files and start again")
            raise TrainingError(f"process {rank} of this run was given another {where} than process 0 ({then!r}, not "
                                f"{first!r}); start every process with the same command line and card")


def _difference(a: object, b: object, where: str = "") -> tuple[str, object, object]:
    """The first place where ``a`` and ``b`` (JSON-like values) differ: its dotted path, and the two values there."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        key = next(k for k in a if a[k] != b[k])
        return _difference(a[key], b[key], f"{where}.{key}" if where else str(key))
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        i = next(i for i in range(len(a)) if a[i] != b[i])
        return _difference(a[i], b[i], where if len(a) == 1 else f"{where}[{i}]")
    return where, a, b


def _lost_touch(exc: BaseException) -> bool:
    """Whether ``exc`` is the process group's word that another process is gone, or stuck (a collective that
    timed out): torch's distributed errors, and gloo's own, which torch raises as a plain RuntimeError."""
    return isinstance(exc, dist.DistError) or type(exc) is RuntimeError and "/gloo/" in str(exc)


def _lost_peers(exc: BaseException, run: Run, runs: list[tuple[Card, Path, str]]) -> TrainingError:
    """The one line of a process whose collective failed because another process of the run stopped first."""
    why = re.sub(r"^\[[^\]]*\]\s*", "", first_line(exc))  # gloo's [file.cc:line]
    why = why.split(". ")[0].rstrip(".")
    kept = [out / CHECKPOINT for _, out, _ in runs if (out / CHECKPOINT).is_file()]
    left = ("the last checkpoint{s} ({files}) {are} kept, to continue with {resume:True}" if kept
            else "no checkpoint was written")
    return TrainingError.about("process {rank} of {world} lost touch with the other processes of this run ({why}): "
                               f"one of them stopped first (its own lines say why, or it was killed); {left}",
                               rank=run.rank, world=run.world, why=why, s="s" * (len(kept) > 1),
                               files=", ".join(map(str, kept)), are="are" if len(kept) > 1 else "is")


def _train_held(runs: list[tuple[Card, Path, str]], options: TrainOptions, run: Run) -> list[TrainResult]:
    """:func:`_train` once the run holds its output folder."""
    made: list[Path] = []
    try:
        if run.main:
            for each, out, _ in runs:
                made += prepare_out(out, options.name, options.resume, each)
        models = []
        for each, _, label in runs:
            torch.manual_seed(each.train.seed)  # the model's initial weights
            try:
                models.append(build_model(each, device=run.device))
            except (CardError, UnknownNameError) as exc:  # a swept value the card's schema takes and its model's
                if not label:  # parts refuse, or a part no plugin registers (the card itself was blamed)
                    raise
                raise type(exc)(f"{label}: {exc}") from None
        check_metrics(models[0], runs[0][0])  # before the data is read, not after training: every metric asked for
        read = _check_data_read_alike(runs) if options.resume else {}
        data = runs[0][0].train.data
        dataset = load_dataset(data.name, options.data_root, "train", **data.options)
        if _alone(runs):
            trained = [fit_single(models[0], *runs[0][:2], dataset, options.resume, options.max_steps, run, read)]
        else:
            trained = fit_ensemble([(m, c, out, label) for m, (c, out, label) in zip(models, runs)], dataset,
                                   options.resume, options.max_steps, run, options.formulation, read)
        if dist.is_initialized():
            # Trained, the processes part: process 0 alone publishes and evaluates, for longer than a collective
            # waits (30 minutes with gloo, 10 with nccl), so the others do not wait for it. Every process reaches
            # this point, its collectives done, before the group goes.
            end_run()
        results = []
        with worker_pool():  # the members' evaluations fit their metrics on one pool of worker processes
            for t, (member_card, out, _) in zip(trained, runs):
                total = Plan.of(member_card.train, len(dataset), run.world).total
                card_path = None
                if run.main and t.error is None:
                    card_path = (_completed_card(t, out, options, run) if t.step == total
                                 else _stopped_card(t, out, options, total))
                results.append(TrainResult(t.model, t.step, total, card_path, t.error, out))
        return results
    except BaseException:
        remove_empty(made)
        raise


def _check_data_read_alike(runs: list[tuple[Card, Path, str]]) -> dict[Path, Checkpoint]:
    """Refuse to resume a run whose checkpoint was made from its dataset read otherwise (image_folder's folder gained
    an image since the run started: its ``split_sizes`` differ), before the images are read; the resume checks the
    whole recipe once they are. A checkpoint that cannot be read is left to the resume, which tells the other
    processes of a torchrun run why.

    Returns:
        The checkpoints read, by path: the resume takes them from there, so that each file is read once.

    Raises:
        TrainingError: the checkpoint's refusal, naming the fields that differ.
    """
    read = {}
    for card, out, _ in runs:
        try:
            checkpoint = read_checkpoint(out / CHECKPOINT, fix="")
        except TrainingError:  # none (the run starts afresh), or one the resume refuses
            continue
        check_recipe(checkpoint, card, under="train.data.")
        read[out / CHECKPOINT] = checkpoint
    return read


def _alone(runs: list[tuple[Card, Path, str]]) -> bool:
    """Whether ``runs`` is one run trained alone in its output folder, not an ensemble's members."""
    return len(runs) == 1 and not runs[0][2]


def _completed_card(trained, out: Path, options: TrainOptions, run: Run) -> Path:
    """The completed card of a run that reached its last step: the one it already had when a finished run is
    resumed (with what was recorded on it since), else the card :func:`~vaezoo.training.publish.publish` writes."""
    kept = _kept(out, options, trained.step, stopped=False)
    if kept is not None:
        return kept
    before = previous_card(out, options.name) if options.resume else None
    with trained.streams.active():  # what the evaluation draws, too, is what this run alone draws
        written = publish(trained.card, trained.model, out, options.name, trained.step)
        if options.evaluate:
            _record(written, options.data_root, run.device)
    _say_dropped(before, written)
    return written


def _stopped_card(trained, out: Path, options: TrainOptions, total: int) -> Path:
    """The weights and card of a run that ``max_steps`` stopped short of its last step ``total``: they load and
    evaluate as a finished run's do, the card marked as stopped (``train.steps``, its summary); not evaluated. The
    run resumed to its end publishes its completed card over them."""
    kept = _kept(out, options, trained.step, stopped=True)
    if kept is not None:
        return kept
    before = previous_card(out, options.name) if options.resume else None
    with trained.streams.active():
        written = publish(trained.card, trained.model, out, options.name, trained.step, total)
    _say_dropped(before, written)
    return written


def _say_dropped(before: Card | None, written: Path) -> None:
    """Warn, naming it, of what the card ``before`` of a resumed run held and its new card ``written`` does not
    (hand edits, notes, spreads over seeds: :func:`~vaezoo.training.publish.dropped`)."""
    after = previous_card(written.parent, written.stem)
    found = dropped(before, after) if before is not None and after is not None else []
    if found:
        warnings.warn(f"{written} was written anew for the run's new weights, from its training card: it no longer "
                      f"holds {', '.join(found)}, which it held before this resume; copy back by hand what still "
                      f"holds", PublishWarning, stacklevel=2)


def _kept(out: Path, options: TrainOptions, step: int, stopped: bool) -> Path | None:
    """The card a resumed run already published for ``step`` (a stopped run's, or a finished run's with its
    metrics), kept as it is with what was recorded on it since (``vaezoo eval --write``); None: publish it."""
    kept = published(out, options.name, step, stopped) if options.resume else None
    if kept is not None:
        note(f"{out}: the run {'was stopped' if stopped else 'had finished'} at step {step:,}; its card {kept} is "
             f"kept as it is")
    return kept


def _record(card_path: Path, data_root, device) -> None:
    """Measure a published run and record its metrics on its card, as ``vaezoo eval OUT --write`` does; a metric
    that fails is left off, with a :class:`PublishWarning` naming the command that measures it again, and one that
    is not a finite number (NaN, inf) is recorded with a :class:`PublishWarning` saying why."""
    report = evaluate_card(card_path.parent, data_root=data_root, device=device, write=True)  # the run's folder
    ref = card_reference(report.card, card_path.parent)
    for metric, why in report.failed.items():
        command = eval_command(ref, data_root, [metric])
        again = "" if metric == "card sections" else f"; measure it again with: {command}"
        warnings.warn(f"{why}; the card is written without it{again}", PublishWarning, stacklevel=2)
    for metric, why in report.not_finite.items():
        warnings.warn(f"{why} ({report.results[metric]} on the card)", PublishWarning, stacklevel=2)


def _override(recipe: TrainRecipe, **values) -> TrainRecipe:
    """``recipe`` with the values of the arguments that override it, validated as the card's own are."""
    given = {k: v for k, v in values.items() if v is not None}
    try:
        return TrainRecipe.model_validate({**recipe.model_dump(), **given})
    except ValidationError as exc:
        error = exc.errors()[0]
        field, message = str(error["loc"][0]), error["msg"]
        if message.startswith("Input should be "):  # "Input should be greater than 0": as vaezoo says a bound
            raise TrainingError.of_value(f"{{{field}}} must be {{bound}}, got {{value}}", value=given.get(field),
                                         bound=message.removeprefix("Input should be ")) from None
        raise TrainingError.of_value(f"{{{field}:{{value}}}}: {{problem}}", value=given.get(field),
                                     problem=message.lower()) from None


def run_recipe(card: Card | str | os.PathLike, out: str | os.PathLike, *, seeds: Sequence[int] | None = None,
               sweeps: Sequence[Sweep | str] = (), seed: int | None = None, **options) -> list[TrainResult]:
    """What ``vaezoo train`` does: :func:`train` one run, or with ``seeds`` or ``sweeps`` an ensemble
    (:func:`train_seeds`, of ``seed``, else the recipe's seed, when only ``sweeps`` are given).

    Args:
        card: the card, or what names one.
        out: the run's folder, or the folder of an ensemble's runs.
        seeds: one run per seed, trained as one ensemble.
        sweeps: card fields and their values (:class:`~vaezoo.training.sweeps.Sweep`, or ``KEY=V1,V2`` as
            ``--sweep`` takes it).
        seed: the seed of a single run (or of a sweep without ``seeds``).
        options: as :func:`train` and :func:`train_seeds` take them (``data_root``, ``resume``, ``max_steps``...).

    Returns:
        Each run's result, with its folder and its card.

    Raises:
        Interrupted: a stop signal ended the run; its ``checkpoints`` are every run's checkpoint file.
        VaezooError: as :func:`train` and :func:`train_seeds` raise it.
    """
    card = card if isinstance(card, Card) else get_card(card)
    sweeps = [parse_sweep(s) if isinstance(s, str) else s for s in sweeps]
    if not (seeds or sweeps):
        folders = [home_path(out)]
    else:
        seeds = seeds or [card.train.seed if seed is None else seed]
        folders = [home_path(out) / m.folder for m in members(card, seeds, sweeps)]
    try:
        results = train_seeds(card, out, seeds, sweeps, **options) if seeds or sweeps else [
            train(card, out, seed=seed, **options)]
    except Interrupted as stop:
        stop.checkpoints = [folder / CHECKPOINT for folder in folders]
        raise
    with one_scan():  # each run's measure command named after one read of the zoo, not one per run
        for result in results:
            _ = result.measure_command
    return results
