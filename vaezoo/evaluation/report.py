"""A card's numbers measured again: :func:`evaluate_card` returns an :class:`EvalReport`, which compares them
with the card (:meth:`EvalReport.check`) and records them on the card's file (:meth:`EvalReport.write`).

``vaezoo eval`` is this module's command line: it parses, calls :func:`evaluate_card`, and prints the report.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vaezoo.assemble import card_dataset, load_model, metric, metric_rounding
from vaezoo.context import check_arguments
from vaezoo.data import ImageDataset, check_data_root
from vaezoo.devices import usable_device
from vaezoo.entries.catalog import card_reference, get_card, one_scan, read_cards
from vaezoo.entries.checkpoints import read_checkpoint
from vaezoo.entries.entry import check_writable, update_card
from vaezoo.entries.schema import Card, Metric, recorded
from vaezoo.errors import CardError, MetricError, VaezooError
from vaezoo.evaluation.measure import evaluate, failure, why_not_finite
from vaezoo.metrics import parallel
from vaezoo.metrics.provenance import library_versions, metric_parameters
from vaezoo.terminal import note, shell_join
from vaezoo.version import __version__

if TYPE_CHECKING:
    import torch

DEFAULT_TOLERANCE = 1e-4
"""The relative tolerance of :meth:`EvalReport.check`, of max(1, |card value|)."""


@dataclass(frozen=True)
class Comparison:
    """One of the card's metrics beside its measured value.

    Attributes:
        name: the metric.
        card: the value the card records.
        measured: the value measured now; None when it was not computed.
        agrees: whether ``measured`` is ``card`` within the tolerance it was compared with.
        rounding: the difference allowed it whatever the tolerance, as float rounding alone moves it that far
            (its spec's ``rounding``; 0 for most metrics).
    """

    name: str
    card: float
    measured: float | None
    agrees: bool
    rounding: float = 0.0

    def __str__(self) -> str:
        if self.measured is None:
            return f"{self.name}: on the card but not computed"
        return f"{self.name}: card {self.card} vs measured {self.measured:.6f}"


def compare(card_metrics: dict, results: dict[str, float], tolerance: float = DEFAULT_TOLERANCE,
            rounding: Mapping[str, float] | None = None) -> list[Comparison]:
    """Each of the card's metrics beside its measured value, in the card's order.

    Args:
        card_metrics: ``{name: Metric}``, as a card's ``metrics``.
        results: ``{name: value}`` measured.
        tolerance: relative, of max(1, |card value|); NaN agrees only with NaN, an infinity only with itself.
        rounding: ``{name: difference}`` allowed to a metric whose value float rounding alone moves by more than
            ``tolerance`` (its spec's ``rounding``), whatever ``tolerance`` is.

    Returns:
        One :class:`Comparison` per card metric; a metric missing from ``results`` never agrees.

    Raises:
        MetricError: ``tolerance`` is not a finite number of at least 0 (inf would pass any model, NaN none).
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 <= tolerance < math.inf:
        raise MetricError.about("{tolerance} must be a finite number >= 0, got {got!r}", got=tolerance)
    rounding = rounding or {}
    return [Comparison(name, metric.value, results.get(name),
                       name in results and agrees(metric.value, results[name], tolerance, rounding.get(name, 0.0)),
                       rounding.get(name, 0.0))
            for name, metric in card_metrics.items()]


def agrees(card_value: float, measured: float, tolerance: float, rounding: float = 0.0) -> bool:
    """Whether ``measured`` is ``card_value`` to within ``tolerance`` of max(1, |card value|), or within
    ``rounding``; NaN agrees only with NaN, an infinity only with itself."""
    if not (math.isfinite(card_value) and math.isfinite(measured)):
        return card_value == measured or (math.isnan(card_value) and math.isnan(measured))
    return abs(measured - card_value) <= max(tolerance * max(1.0, abs(card_value)), rounding)


@dataclass(frozen=True)
class EvalReport:
    """What :func:`evaluate_card` measured on a card's test split.

    Attributes:
        card: the card measured (with the checkpoint's step as ``train.steps`` when a checkpoint was measured).
        results: ``{metric: value}``: the losses and the card's ``eval_metrics``, or the ``metrics`` asked for.
        metrics: the registered metrics asked for, if any (then the losses were not measured).
        data_root: where the dataset was read from, if given.
        checkpoint: the training checkpoint whose weights were measured, if any (else the card's weights).
        written: the card as :func:`evaluate_card` recorded the results on it (``write=True``), else None.
        settings: ``{metric: {setting: value}}`` the metrics ran with over the card's ``eval_settings``, if any
            (:attr:`card` holds them merged).
        failed: ``{metric: why}``, one line each, for the metrics that raised: they are not in :attr:`results`
            (nor written), and the others were measured all the same (``"card sections"`` for
            :attr:`sections`).
        sections: the plugin card sections the model measures of itself (:meth:`vaezoo.model.VAE.card_sections`,
            e.g. JointVAE's ``[labels]``), measured for a full evaluation that is written, as a finished run
            records them; :meth:`write` records them too.
        named: the folder the card was named by (a run's), which the commands recorded with it name too.
    """

    card: Card
    results: dict[str, float]
    metrics: list[str] | None = None
    data_root: str | os.PathLike[str] | None = None
    checkpoint: Path | None = None
    written: Card | None = None
    settings: dict[str, dict[str, Any]] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    named: Path | None = None

    @property
    def not_finite(self) -> dict[str, str]:
        """The :attr:`results` that are not finite numbers (NaN, inf), each with one line saying which and why
        (:func:`vaezoo.evaluation.measure.why_not_finite`): a card records them as TOML's ``nan`` and ``inf``, JSON as
        null, so the commands say them beside."""
        registered = set(self.metrics if self.metrics is not None else self.card.eval_metrics)
        return {name: why_not_finite(name, value, name in registered) for name, value in self.results.items()
                if not math.isfinite(value)}

    @property
    def checked(self) -> dict[str, Metric]:
        """The card's metrics a check compares: all of them, or those of :attr:`metrics` the card records."""
        if self.metrics is None:
            return dict(self.card.metrics)
        return {k: v for k, v in self.card.metrics.items() if k in self.results}

    def check(self, tolerance: float = DEFAULT_TOLERANCE) -> list[Comparison]:
        """Compare the measured values with the card's (:func:`compare`), each registered metric allowed at least
        its float-rounding spread (:func:`vaezoo.assemble.metric_rounding`).

        Raises:
            CardError: the card records no metrics, or none of the :attr:`metrics` measured.
            MetricError: ``tolerance`` is not a finite number of at least 0.
        """
        refuse_unchecked(self.card, self.metrics, self.named, self.data_root)
        checked = self.checked
        return compare(checked, self.results, tolerance, metric_rounding(checked))

    def unlike_card(self) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """The metrics measured with other settings than those the card records beside their values, as
        ``{metric: (the card's settings, the settings measured with)}``: their values differ for that reason too."""
        measured = as_metrics(self.card, self.results, self.data_root, self.metrics)
        recorded = {name: entry.parameters for name, entry in self.card.metrics.items()}
        return {name: (recorded[name], entry.parameters) for name, entry in measured.items()
                if recorded.get(name) is not None and entry.parameters is not None
                and recorded[name] != entry.parameters}

    def write(self, path: str | Path | None = None) -> Card:
        """Record the measured metrics, each with the command that measures it again, and the :attr:`sections`
        measured on the card's file.

        The file is updated under its lock: a metric another writer recorded meanwhile is kept, and so are the note
        and the spread over seeds recorded meanwhile on a metric measured (``seeds --write``). The metrics asked
        for (:attr:`metrics`) join the card's ``eval_metrics``, and the :attr:`settings` they ran with its
        ``eval_settings`` (each metric written with the settings it was measured with, over any that another command
        recorded for it meanwhile), so that the command recorded beside each value measures it again as it was
        measured.

        Args:
            path: the card file; default the file the card was read from.

        Returns:
            The card written.

        Raises:
            CardError: the report is of a checkpoint's weights, not the card's; the card has no local file
                (:func:`vaezoo.entries.entry.check_writable`); or its file names other weights than those
                measured (another run was published there meanwhile).
        """
        if self.checkpoint is not None:
            raise CardError(f"the metrics of checkpoint {self.checkpoint} are not those of card '{self.card.name}'; "
                            f"measure the card's own weights to record them")
        path = Path(path) if path is not None else check_writable(self.card)
        measured = as_metrics(self.card, self.results, self.data_root, self.metrics,
                              ref=card_reference(self.card, self.named or path))

        def record(now: Card) -> Card:  # the card as it is on disk now
            if now.weights != self.card.weights:  # a run published again meanwhile: these are not its numbers
                raise CardError(f"card '{now.name}' at {path} names other weights than those measured: it was "
                                f"written again meanwhile; measure it again")
            measured_now = [n for n in self.metrics or () if n in self.results]  # a metric that failed stays off
            eval_metrics = now.eval_metrics + [n for n in measured_now if n not in now.eval_metrics]
            # a note or a spread over seeds recorded meanwhile ('seeds --write') is kept as a sequential run keeps it
            kept = {name: entry.model_copy(update={"note": now.metrics[name].note, "seeds": now.metrics[name].seeds})
                    for name, entry in measured.items() if name in now.metrics}
            metrics = {**now.metrics, **measured, **kept}
            # each metric written runs again with the settings it was measured with, not those another command
            # recorded for it meanwhile, which its value does not follow
            settings = {**now.with_settings(self.settings or {}).eval_settings,
                        **{name: self.card.settings_of(name) for name, entry in measured.items()
                           if entry.parameters is not None}}
            return now.model_copy(update={
                "metrics": metrics, "eval_metrics": eval_metrics, "sections": {**now.sections, **self.sections},
                "eval_settings": {name: given for name, given in settings.items() if given},
                "headline": now.headline if now.headline in metrics else None})  # a headline names a number held

        return update_card(path, record)


def refuse_unchecked(card: Card, metrics: Sequence[str] | None, named: Path | None = None,
                     data_root: str | os.PathLike[str] | None = None) -> None:
    """Refuse to check ``card``'s ``metrics`` (default its own) where it records none of them, saying how to record
    them, or why they cannot be recorded on it (a Hub card, an installed package's).

    Raises:
        CardError: the card records no metrics, or none of ``metrics``.
    """
    if not card.metrics:
        lacks = "no metrics"
    elif metrics is not None and not any(name in card.metrics for name in metrics):
        lacks = f"none of {', '.join(metrics)}"
    else:
        return
    try:
        check_writable(card)
    except VaezooError as exc:  # OutputError too: something in the place of the card's lock file
        raise CardError(f"card '{card.name}' has {lacks} to check against, and cannot record them: {exc}") from None
    record = eval_command(card_reference(card, named), data_root, metrics)
    raise CardError(f"card '{card.name}' has {lacks} to check against; record them first with {record} --write")


def eval_command(ref: str, data_root=None, metrics: Sequence[str] | None = None, *, for_terminal: bool = True) -> str:
    """The ``vaezoo eval`` command that measures ``metrics`` (default: the card's) of the card ``ref`` names,
    shell-quoted, so that it runs as written (``ref``: see :func:`vaezoo.entries.catalog.card_reference`), printed
    or, with ``for_terminal`` False, recorded (:func:`vaezoo.terminal.shell_quote`)."""
    words = ["vaezoo", "eval", ref] + (["--data-root", str(data_root)] if data_root else []) + (
        ["--metrics", ",".join(metrics)] if metrics else [])
    return shell_join(words, for_terminal=for_terminal)


def as_metrics(card: Card, results: dict[str, float], data_root=None,
               measured: Sequence[str] | None = None, ref: str | None = None) -> dict[str, Metric]:
    """``results`` as a card's metrics, each with the ``vaezoo eval`` command that reproduces it.

    A note and a spread over seeds the card already holds on a metric are kept (a run's new card holds none:
    :func:`vaezoo.training.publish.publish` starts it empty). A registered metric (one of the card's ``eval_metrics``,
    or of ``measured``: those ``vaezoo eval --metrics`` computed) also records its direction (its spec's
    ``higher_is_better``), the settings it ran with (its defaults,
    updated with the card's ``eval_settings``; ``{}`` where all are None, unset), the recipe's
    dataset options (e.g. a binarisation) and the versions of the libraries behind it
    (:mod:`vaezoo.metrics.provenance`).

    Args:
        card: the card the results are of.
        results: ``{metric: value}``.
        data_root: the ``--data-root`` they were measured with, if any.
        measured: the metrics ``--metrics`` asked for, if any.
        ref: how the command names the card (default its name; see :func:`vaezoo.entries.catalog.card_reference`).
    """
    command = eval_command(ref or card.name, data_root, measured, for_terminal=False)
    notes = {name: entry.note for name, entry in card.metrics.items()}
    seeds = {name: entry.seeds for name, entry in card.metrics.items()}
    libraries = library_versions()

    def entry(name: str, value: float) -> Metric:
        # a registered metric has settings, data and libraries; a loss has not
        spec = metric(name) if name in card.eval_metrics or name in (measured or ()) else None
        registered = spec is not None
        # {} where every setting ran at a default of None: a card cannot hold None, and none at all compares with
        # nothing; a metric that takes no setting records none
        settings = metric_parameters(spec, **card.settings_of(name)) if registered and spec.takes_settings else None
        return Metric(value=recorded(value), command=command, vaezoo_version=__version__, note=notes.get(name),
                      higher_is_better=spec.higher_is_better if registered else None, parameters=settings,
                      data=(card.train.data.options or None) if registered else None,
                      libraries=libraries if registered else None, seeds=seeds.get(name))

    return {name: entry(name, value) for name, value in results.items()}


def _given_settings(card: Card, metrics: Sequence[str] | None,
                    settings: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]] | None:
    """``settings`` as :func:`evaluate_card` takes them over ``card``'s (None for none), each checked to name a
    metric the evaluation measures."""
    if settings is not None and not (isinstance(settings, Mapping)
                                     and all(isinstance(given, Mapping) for given in settings.values())):
        raise TypeError(f"settings takes {{metric: {{setting: value}}}}, e.g. "
                        f"{{'importance_log_likelihood': {{'samples': 200}}}}, got {settings!r}")
    measured = list(metrics) if metrics is not None else ["the losses", *card.eval_metrics]
    checked = {}
    for name, given in (settings or {}).items():
        if name not in measured:
            metric(name)  # a misspelt name is named as such
            raise MetricError.about("settings were given for metric '{name}', which this evaluation does not "
                                    "measure ({measured}); name it in {metrics}", name=name,
                                    measured=", ".join(measured))
        try:
            checked[name] = metric(name).check_settings(given, f"metric '{name}'")
        except ValueError as exc:
            raise MetricError.about("{settings}: {why}", why=str(exc)) from None
    return checked or None


def evaluate_card(card: Card | str | os.PathLike, *, checkpoint: str | os.PathLike | None = None,
                  data_root: str | os.PathLike | None = None, device: str | torch.device | None = None,
                  metrics: Sequence[str] | None = None, settings: Mapping[str, Mapping[str, Any]] | None = None,
                  write: bool = False, check: bool = False, jobs: int | None = None,
                  dataset: ImageDataset | None = None) -> EvalReport:
    """Measure a card's model on its dataset's test split.

    Args:
        card: the card, or what names one (a zoo name, a card file, a folder holding one, ``hf-hub:OWNER/REPO``:
            :func:`vaezoo.entries.catalog.get_card`); its weights are measured unless ``checkpoint`` is given.
        checkpoint: a training checkpoint (``OUT/checkpoint.pt`` of ``vaezoo train``) of the card's model, measured
            at its step instead of the card's weights.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        device: where to run (``"auto"`` too: :func:`vaezoo.devices.usable_device`); default cpu.
        metrics: measure only these registered metrics, not the losses (:func:`vaezoo.evaluation.measure.evaluate`).
        settings: ``{metric: {setting: value}}``: run these metrics with these settings, over the card's
            ``eval_settings`` (e.g. ``{"importance_log_likelihood": {"samples": 200}}``); checked before anything
            is measured.
        write: also record the measured metrics on the card's file (:meth:`EvalReport.write`), and, without
            ``metrics``, the model's card sections (:attr:`EvalReport.sections`); a card that cannot be written is
            refused before anything is measured.
        check: the values will be checked against the card's (:meth:`EvalReport.check`): a card that records
            none of them is refused before anything is measured.
        jobs: worker processes of the metrics' scikit-learn fits (:func:`vaezoo.metrics.parallel.jobs`); default:
            ``VAEZOO_JOBS``, else the cores the process may use. The numbers do not depend on it.
        dataset: the card's test split, already read (:func:`vaezoo.assemble.card_dataset`); default: read it.

    Returns:
        The report; with ``write``, its :attr:`~EvalReport.written` is the card as written. A metric that raises
        is named in its :attr:`~EvalReport.failed`, and the others are measured (and written) all the same.

    Raises:
        CardError: ``write`` with a ``checkpoint``, or of a card without a local file.
        MetricError: ``settings`` for a metric not measured, or a seed among them out of range; ``VAEZOO_JOBS``
            (without ``jobs``) is not a whole number of at least 1.
        TypeError: ``metrics`` is a string, ``settings`` is not a mapping of mappings, ``write`` is not a bool,
            ``jobs`` is not a whole number of at least 1, or ``checkpoint`` or ``data_root`` is not a path.
        TrainingError: ``checkpoint`` is not a checkpoint of the card's model.
        WeightsError, UnknownNameError, MetricError: as :func:`vaezoo.assemble.load_model` and
            :func:`vaezoo.evaluation.measure.evaluate` raise them.
    """
    device, metrics = _checked(device, metrics, checkpoint=checkpoint, data_root=data_root, write=write, check=check,
                               jobs=jobs)
    return _evaluate(card if isinstance(card, Card) else get_card(card), _run_folder(card), checkpoint=checkpoint,
                     data_root=data_root, device=device, metrics=metrics, settings=settings, write=write, check=check,
                     jobs=jobs, dataset=dataset)


def _checked(device, metrics: Sequence[str] | None, *, checkpoint, data_root, write, check, jobs,
             force: bool = False) -> tuple[torch.device, list[str] | None]:
    """The options :func:`evaluate_card` takes, checked before anything is read: the device it names and
    ``metrics`` as a list (None for the card's)."""
    device = usable_device(device)
    if isinstance(metrics, str):
        raise TypeError(f"metrics takes a list of metric names, e.g. [{metrics!r}], not a string")
    if metrics is not None and not (metrics := list(metrics)):
        raise MetricError.about("{metrics} is empty: name at least one metric, or leave it out for the card's")
    try:  # write="no" would write
        check_arguments(evaluate_cards, {"checkpoint": checkpoint, "data_root": data_root, "write": write,
                                         "check": check, "force": force, "jobs": jobs}, "evaluate")
    except ValueError as exc:
        raise TypeError(str(exc)) from None
    check_data_root(data_root)
    if jobs is not None and jobs < 1:
        raise TypeError(f"jobs takes a whole number of processes >= 1, e.g. 2, got {jobs!r}")
    if jobs is None:
        try:
            parallel.get_jobs()  # VAEZOO_JOBS, said before the metrics' fits meet it
        except ValueError as exc:
            raise MetricError(str(exc)) from None
    return device, metrics


def _run_folder(given: Card | str | os.PathLike) -> Path | None:
    """The folder ``given`` names (a run's), which the commands recorded on its card name too; else None."""
    return Path(given) if isinstance(given, str | os.PathLike) and os.path.isdir(given) else None


def _evaluate(card: Card, named: Path | None, *, checkpoint: str | os.PathLike[str] | None,
              data_root: str | os.PathLike[str] | None,
              device: torch.device, metrics: list[str] | None, settings: Mapping[str, Mapping[str, Any]] | None,
              write: bool, check: bool, jobs: int | None, dataset: ImageDataset | None) -> EvalReport:
    """:func:`evaluate_card` of a card read already, named by the folder ``named`` if by one, with its
    ``device`` and ``metrics`` checked."""
    settings = _given_settings(card, metrics, settings)
    try:
        card = card.with_settings(settings or {})
    except ValueError as exc:  # a seed out of range
        raise MetricError(f"card '{card.name}': {exc}") from None
    if write and checkpoint is not None:
        raise CardError.about("{write} records the card's own weights' metrics, not a checkpoint's: use it without "
                              "{checkpoint}")
    if write:
        path = check_writable(card)  # before the evaluation, not after it
    if check:
        refuse_unchecked(card, metrics, named, data_root)
    found = None
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        found = read_checkpoint(checkpoint, fix="pass OUT/checkpoint.pt of a 'vaezoo train' run", card=card)
    model = load_model(card, device, state_dict=found.model if found else None, source=f"checkpoint {checkpoint}")
    card = model.card.with_settings(settings or {})  # the card of the weights loaded (a new one if published again)
    if found is not None:
        card = card.model_copy(update={"train": card.train.model_copy(update={"steps": found.step})})
    failed: dict[str, str] = {}
    with parallel.jobs(jobs) if jobs is not None else nullcontext(), parallel.worker_pool():
        results = evaluate(model, card, data_root, device, metrics=metrics,
                           on_error=lambda name, exc: failed.__setitem__(name, failure(name, exc)), dataset=dataset)
    sections = {}
    if write and metrics is None:  # a full evaluation records what a finished run's card holds
        try:
            sections = model.card_sections(card, card_reference(card, named or path), data_root, device)
        except Exception as exc:  # noqa: BLE001 - the metrics measured are written whatever a plugin's model raises
            failed["card sections"] = f"measuring the model's card sections raised {type(exc).__name__}: {exc}"
    report = EvalReport(card, results, metrics, data_root, checkpoint,
                        settings=settings, failed=failed, sections=sections, named=named)
    return replace(report, written=report.write()) if write else report


@dataclass(frozen=True)
class RunReport:
    """One run of :func:`evaluate_cards`.

    Attributes:
        ref: the card as it was given (a path, a folder, a zoo name).
        report: what was measured; None when the run was skipped or could not be measured.
        name: the card's name; None when the card could not be read.
        skipped: its card already held the metrics (a resumed batch), so nothing was measured.
        error: one line saying why it could not be measured (its card unreadable, a metric its model cannot
            serve, ...); None when it was.
    """

    ref: str
    report: EvalReport | None = None
    skipped: bool = False
    error: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class BatchReport:
    """What :func:`evaluate_cards` did with each run, in the order given.

    Attributes:
        runs: one :class:`RunReport` per card given.
    """

    runs: list[RunReport]

    @property
    def metrics(self) -> list[str]:
        """Every metric measured on some run, in the order first measured."""
        return list(dict.fromkeys(name for run in self.runs if run.report for name in run.report.results))

    def check(self, tolerance: float = DEFAULT_TOLERANCE) -> dict[str, list[Comparison]]:
        """:meth:`EvalReport.check` of each run measured, by its :attr:`RunReport.ref`.

        Raises:
            CardError: a run's card records none of the metrics measured.
            MetricError: ``tolerance`` is not a finite number of at least 0.
        """
        return {run.ref: run.report.check(tolerance) for run in self.runs if run.report is not None}


def holds_metrics(card: Card, metrics: Sequence[str] | None = None) -> bool:
    """Whether ``card`` already records what evaluating it measures: each of ``metrics`` (default its
    ``eval_metrics``) and, for a full evaluation, the losses."""
    names = list(metrics) if metrics is not None else [*card.eval_metrics, "reconstruction"]
    return all(name in card.metrics for name in names)


def evaluate_cards(cards: Sequence[Card | str | os.PathLike], *, checkpoint: str | os.PathLike | None = None,
                   data_root: str | os.PathLike | None = None, device: str | torch.device | None = None,
                   metrics: Sequence[str] | None = None, settings: Mapping[str, Mapping[str, Any]] | None = None,
                   write: bool = False, check: bool = False, force: bool = False,
                   jobs: int | None = None) -> BatchReport:
    """Measure several runs' cards, one after another, reading each dataset once (``vaezoo eval RUN [RUN ...]``).

    One card is :func:`evaluate_card` (its errors raised). With several, each is measured as :func:`evaluate_card`
    measures it, with the test split read once for every card of the same dataset and options. A card that
    cannot be read or measured (a metric its model cannot serve, weights that do not verify) is named in its
    :attr:`RunReport.error` and the others are measured all the same. With ``write``, each card is written as soon
    as it is measured, so that an interrupted batch keeps what it finished; run again, it skips every card that
    already holds the metrics (:func:`holds_metrics`) unless ``force``.

    Args:
        cards: what names each card (as :func:`evaluate_card` takes it).
        checkpoint, data_root, device, metrics, settings, write, check, jobs: as :func:`evaluate_card` takes
            them (``checkpoint`` for one card only); with several cards, one that ``check`` refuses is named in its
            :attr:`RunReport.error`.
        force: with several cards and ``write``, measure a card that already holds the metrics too.

    Returns:
        The :class:`BatchReport`, one run per card, in order.

    Raises:
        CardError: no card given, one card given twice (a folder and its card, say), or a ``checkpoint`` with
            several.
        TypeError: ``cards`` is one name, not a list of them; ``force`` is not a bool; or as
            :func:`evaluate_card` raises it, before any card is read.
        VaezooError: with one card, as :func:`evaluate_card` raises.
    """
    if isinstance(cards, str | os.PathLike | Card) or not isinstance(cards, Iterable):
        raise TypeError(f"cards takes a list of cards, e.g. [{str(cards)!r}], not {type(cards).__name__}")
    cards = list(cards)
    if not cards:
        raise CardError("name at least one card to evaluate")
    several = len(cards) > 1
    if several and checkpoint is not None:
        raise CardError.about("{checkpoint} is a checkpoint of one card's model: give one card with it")
    device, metrics = _checked(device, metrics, checkpoint=checkpoint, data_root=data_root, write=write, check=check,
                               jobs=jobs, force=force)  # once, before any card is read
    refs = [str(given.name if several and isinstance(given, Card) else given) for given in cards]
    read = read_cards(cards)  # all read before any is measured: one given twice is refused first
    _refuse_twice(refs, read)
    datasets: dict[tuple, ImageDataset] = {}
    runs: list[RunReport] = []
    # the fits of every card on one pool; the command each written card records named after one read of the zoo
    with parallel.worker_pool(), _saying_what_was_written(refs, runs, several and write), one_scan():
        for given, ref, card in zip(cards, refs, read, strict=True):
            if isinstance(card, VaezooError):
                runs.append(RunReport(ref, error=str(card)))
                continue
            try:
                dataset = None
                if several:  # its dataset read once for all the cards of the same one
                    if write and not force and holds_metrics(card, metrics):
                        runs.append(RunReport(ref, skipped=True, name=card.name))
                        continue
                    key = (card.train.data.model_dump_json(), str(data_root))
                    if key not in datasets:
                        datasets[key] = card_dataset(card, data_root, "test")
                    dataset = datasets[key]
                report = _evaluate(card, _run_folder(given), checkpoint=checkpoint, data_root=data_root, device=device,
                                   metrics=metrics, settings=settings, write=write, check=check, jobs=jobs,
                                   dataset=dataset)
            except VaezooError as exc:
                if not several:
                    raise
                runs.append(RunReport(ref, error=str(exc), name=card.name))
                continue
            runs.append(RunReport(ref, report, name=card.name))
    return BatchReport(runs)


@contextmanager
def _saying_what_was_written(refs: list[str], runs: list[RunReport], writing: bool) -> Iterator[None]:
    """Say on stderr, when a batch writing its cards is interrupted (Ctrl-C, a stop signal), which cards it wrote
    and which it did not reach, so that the user knows what running it again measures."""
    try:
        yield
    except KeyboardInterrupt:
        if writing:
            written = [run.ref for run in runs if run.report is not None]
            left = refs[len(runs):]  # the one being measured, and those after it
            note(f"interrupted: {len(written)} of {len(refs)} runs written ({', '.join(written) or 'none'}); not "
                 f"written: {', '.join(left)}; run the command again to measure those (the written ones are skipped)")
        raise


def _refuse_twice(refs: list[str], read: list[Card | VaezooError]) -> None:
    """Refuse a batch naming one card file twice (one path twice, or a folder and its card), as ``vaezoo seeds``
    refuses a run given twice: it would be measured twice."""
    first: dict[Path, int] = {}
    for i, (ref, card) in enumerate(zip(refs, read, strict=True)):
        if isinstance(card, VaezooError) or card.path is None:
            continue
        earlier = first.setdefault(card.path.resolve(), i)
        if earlier != i:
            also = "" if refs[earlier] == ref else f" (as {refs[earlier]})"
            raise CardError(f"{ref} is the same card given twice{also}; give each card once")
