"""A card's metrics over several runs of its recipe, one per seed: the spread that ``vaezoo seeds`` writes.

A run is a completed card of the same recipe with another seed (``vaezoo train CARD --seed N --out DIR``
writes one); the card itself is the run of its own seed. The runs must share everything that decides the
result but the seed, and each metric must be measured the same way on every run, so that the spread says
how much the number moves with the seed and nothing else. This module reads cards only; it never imports
torch.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from vaezoo.entries.catalog import card_reference, get_card
from vaezoo.entries.entry import check_writable, update_card
from vaezoo.entries.recipe import (ABSENT, SEEDED, Difference, check_recipe, measured_otherwise, recipe,
                                   trained_otherwise)
from vaezoo.entries.schema import Card, SeedRun, SeedSpread, recorded
from vaezoo.errors import CardError, VaezooError
from vaezoo.terminal import shell_join, shell_quote


@dataclass(frozen=True)
class Run:
    """One run of a card's recipe.

    Attributes:
        label: how messages name it: ``card NAME`` for the card itself, ``run PATH`` for the others.
        card: its completed card (the metrics its weights reached).
        path: the folder or file it was read from, as given; None for the card itself.
    """

    label: str
    card: Card
    path: str | None = None

    leave_out: ClassVar[frozenset[str]] = SEEDED

    @property
    def seed(self) -> int:
        """The seed the run was trained with."""
        return self.card.train.seed

    @property
    def recipe(self) -> dict[str, Any]:
        """The recipe of its card, the seed aside (:func:`vaezoo.entries.recipe.recipe` less :attr:`leave_out`)."""
        return recipe(self.card, self.leave_out)

    def refusal(self, card: Card, found: list[Difference]) -> CardError:
        """The error refusing this run as a run of ``card``'s recipe, naming the first of ``found``."""
        return CardError(f"{self.label}: {said(found[0])}; seeds must share the recipe")


def read_run(path: str | os.PathLike) -> Run:
    """The run in ``path``: a run folder holding one completed card (as ``vaezoo train`` writes it) or a card file.

    Args:
        path: the folder or file; always a path, never a zoo name.

    Returns:
        The run, labelled with ``path`` as given.

    Raises:
        CardError: the file does not parse or validate, or the folder holds no card or several.
    """
    return Run(f"run {os.fspath(path)}", get_card(Path(path)), os.fspath(path))


def collect_runs(card: Card, paths: Iterable[str | os.PathLike]) -> list[Run]:
    """The card's own run followed by the run of each path, checked to be the card's recipe with another seed.

    Args:
        card: the card whose recipe the runs repeat; it counts as the run of its own ``train.seed``.
        paths: run folders or card files (:func:`read_run`).

    Returns:
        The runs, the card's first.

    Raises:
        CardError: a path holds no usable card, a run is given twice, two runs share a seed or their weights or
            made different numbers of steps (one stopped short: the message names both) or trained on different
            kinds of device (``train.machine``, where both record it), or a run's recipe differs from the card's
            (:func:`vaezoo.entries.recipe.check_recipe`).
    """
    runs, named = [Run(f"card {card.name}", card)], [os.fspath(path) for path in paths]  # as the runs name them
    for path in named:
        run = read_run(path)
        twin = next((other for other in runs if _same_card_file(other, run)), None)
        if twin is not None:
            also = "" if twin.path == run.path else f" (as {twin.label})"
            raise CardError(f"{run.label} is the same run given twice{also}; give each run once")
        check_recipe(run, card)  # before its seed: a run of another recipe is no seed of this one, whatever its seed
        same = next((other for other in runs if other.seed == run.seed), None)
        if same is runs[0]:
            raise CardError(f"{run.label} has seed {run.seed}, the seed of card {card.name}, which counts as the run "
                            f"of its own seed; {_instead(card, named, around=run.path)}")
        if same is not None:
            raise CardError(f"{run.label} has seed {run.seed}, as has {same.label}; give each seed once")
        copy = next((other for other in runs if _same_weights(other, run)), None)
        if copy is not None:
            raise CardError(f"{run.label} has the weights of {copy.label} (sha256 {run.card.weights.sha256[:12]}...), "
                            f"so it is a copy of that run, not a run of seed {run.seed}; give runs each trained "
                            f"with its own seed")
        otherwise = next((said for other in runs if (said := trained_otherwise(
            run.card.train, other.card.train, (run.label, other.label), fixed=runs[0].label))), None)
        if otherwise is not None:
            raise CardError(otherwise)
        runs.append(run)
    return runs


def _same_card_file(one: Run, other: Run) -> bool:
    """Whether the two runs were read from one card file (one path given twice, or a folder and its card)."""
    return None not in (one.card.path, other.card.path) and one.card.path.resolve() == other.card.path.resolve()


def _same_weights(a: Run, b: Run) -> bool:
    return a.card.weights is not None and b.card.weights is not None and a.card.weights.sha256 == b.card.weights.sha256


def said(difference: Difference) -> str:
    """``difference`` in words: ``PATH is GOT, the card's is EXPECTED`` (the run's value first)."""
    where, got, expected = difference.where, difference.other, difference.card
    if got is ABSENT:
        return f"{where} is not set, the card's is {_shown(expected)}"
    if expected is ABSENT:
        return f"{where} is {_shown(got)}, the card sets none"
    return f"{where} is {_shown(got)}, the card's is {_shown(expected)}"


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def choose_metrics(card: Card, runs: Sequence[Run],
                   metrics: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """The metrics to spread over ``runs``, and the card's metrics left out because some run lacks them.

    Args:
        card: the card; without ``metrics``, its ``eval_metrics`` are the candidates.
        runs: the runs (:func:`collect_runs`), the card's included.
        metrics: the metrics asked for; each must be on every run.

    Returns:
        ``(metrics, left_out)``: the card's ``eval_metrics`` that every run records as a finite number and
        those some run lacks or records as NaN or infinite, or ``(metrics, [])``.

    Raises:
        CardError: no run records a wanted metric (naming those they record), a run lacks one (naming run
            and metric, and the command that measures it) or records it as NaN or infinite,
            the card lists no ``eval_metrics`` to choose from, or no run records every one of them.
    """
    if metrics is not None:
        for name in metrics:
            if not any(name in run.card.metrics for run in runs):
                recorded = dict.fromkeys(m for run in runs for m in run.card.metrics)
                raise CardError.about("no run records a metric '{name}'; name metrics they record with {metrics}: "
                                      "{recorded}", name=name, recorded=", ".join(recorded) or "none")
            lacking = next((run for run in runs if name not in run.card.metrics), None)
            if lacking is not None:
                raise CardError(f"{lacking.label} records no metric '{name}'; measure it with "
                                f"'vaezoo eval {lacking.card.path or lacking.card.name} --metrics {name} --write'")
            unusable = next((run for run in runs if not _measured(run, name)), None)
            if unusable is not None:
                raise CardError.about("{run} records {metric} = {value}, not a number a spread can use; leave "
                                      "'{metric}' out of {metrics}", run=unusable.label, metric=name,
                                      value=unusable.card.metrics[name].value)
        return list(dict.fromkeys(metrics)), []
    if not card.eval_metrics:
        raise CardError.about("card {card} lists no eval_metrics; name the metrics to spread with {metrics}",
                              card=card.name)
    everywhere = [m for m in card.eval_metrics if all(_measured(run, m) for run in runs)]
    if not everywhere:
        listed = ", ".join(card.eval_metrics)
        if not any(_measured(runs[0], m) for m in card.eval_metrics):  # the card, not a run, lacks them
            paths = [run.path for run in runs[1:] if run.path is not None]
            measured = [run.path for run in runs[1:]
                        if run.path is not None and any(_measured(run, m) for m in card.eval_metrics)]
            if paths and not measured:  # no run to spread around (trained with --no-eval): measure them all first
                own = [] if card.weights is None else [card_reference(card)]
                command = shell_join(["vaezoo", "eval", *own, *paths, "--write"])
                raise CardError(f"card {card.name} records none of its eval_metrics ({listed}), nor does any run "
                                f"given; measure them first: '{command}'")
            measure = "" if card.weights is None else \
                f"; or measure the card with 'vaezoo eval {shell_quote(card_reference(card))} --write'"
            raise CardError(f"card {card.name} records none of its eval_metrics ({listed}), so it is no measured run; "
                            f"{_instead(card, paths, around=measured[0] if measured else None)}{measure}")
        lacking = next((run for run in runs[1:] if not any(m in run.card.metrics for m in card.eval_metrics)), None)
        if lacking is not None:
            raise CardError.about("{run} records none of card {card}'s eval_metrics ({listed}); measure them with "
                                  "'vaezoo eval {path} --write', or name others with {metrics}", run=lacking.label,
                                  card=card.name, listed=listed, path=shell_quote(lacking.path or lacking.card.name))
        why = "; ".join(_unmeasured(runs, m) for m in card.eval_metrics)
        raise CardError.about("none of card {card}'s eval_metrics is a finite number on every run ({why}); measure "
                              "one a run lacks with 'vaezoo eval RUN --write', or name others with {metrics}",
                              card=card.name, why=why)
    return everywhere, [m for m in card.eval_metrics if m not in everywhere]


def _instead(card: Card, paths: Sequence[str], around: str | None) -> str:
    """What to type instead of ``vaezoo seeds CARD PATHS``: the runs spread around the card of the run ``around``,
    which records its own metrics (``vaezoo train --seeds`` leaves every seed such a run), and, where the card
    records its metrics, the runs without ``around``."""
    others = [path for path in paths if path != around]
    said = []
    if around is not None:
        more = "" if others else " RUN..."  # a spread needs the other seeds' runs
        said.append(f"spread the runs around one run's card, which records its metrics: "
                    f"'{shell_join(['vaezoo', 'seeds', around, *others])}{more}'")
    if others and any(name in card.metrics for name in card.eval_metrics):
        said.append(f"leave that run out: '{shell_join(['vaezoo', 'seeds', card_reference(card), *others])}'")
    return "; or ".join(said) or "give runs of the card's recipe with other seeds"


def _unmeasured(runs: Sequence[Run], name: str) -> str:
    """Why the metric ``name`` is not spread over ``runs``: the first run that lacks it, or records it as NaN or
    infinite (a run that measures it again gets that again)."""
    run = next(run for run in runs if not _measured(run, name))
    if name not in run.card.metrics:
        return f"{name}: {run.label} records none"
    return f"{name}: {run.label} records {run.card.metrics[name].value}"


def _measured(run: Run, name: str) -> bool:
    """Whether ``run`` records ``name`` as a finite number (a metric can be NaN, e.g. on a constant code)."""
    return name in run.card.metrics and math.isfinite(run.card.metrics[name].value)


def check_measured_alike(card: Card, runs: Sequence[Run], metrics: Sequence[str]) -> None:
    """Check that every run's metric was measured with the card's settings (its ``parameters``).

    Raises:
        CardError: naming the run, the metric and the first setting that differs.
    """
    for run in runs:
        for name in metrics:
            otherwise = measured_otherwise(name, run.card.metrics[name].parameters or {},
                                           card.metrics[name].parameters or {}, (run.label, f"card {card.name}"))
            if otherwise is not None:
                raise CardError(otherwise)


def seed_runs(runs: Sequence[Run], metric: str) -> list[SeedRun]:
    """Each run's value of ``metric``, by increasing seed."""
    return sorted((SeedRun(seed=run.seed, value=run.card.metrics[metric].value) for run in runs),
                  key=lambda r: r.seed)


def spread(runs: Sequence[SeedRun], shipped: int, selection: str, command: str) -> SeedSpread:
    """A :class:`~vaezoo.entries.schema.SeedSpread` of ``runs``: their number, median, minimum and maximum.

    Args:
        runs: one value per seed.
        shipped: the seed whose weights the card ships (one of the runs).
        selection: how the shipped seed was chosen.
        command: how each run was made and measured.

    Returns:
        The spread, validated.
    """
    values = [run.value for run in runs]
    # cards record values to 6 digits, so the mean of the middle two is exact at 7 (no float noise: 0.3000000001)
    median = recorded(statistics.median(values), 7)
    return SeedSpread(runs=list(runs), n=len(values), median=median, min=min(values),
                      max=max(values), shipped=shipped, selection=selection, command=command)


def spreads(card: Card, runs: Sequence[Run], metrics: Sequence[str], selection: str,
            command: str) -> dict[str, SeedSpread]:
    """Each metric's spread over ``runs``, shipping ``card``'s seed.

    Args:
        card: the card; its ``train.seed`` is the shipped seed.
        runs: the runs (:func:`collect_runs`), the card's included.
        metrics: the metrics (:func:`choose_metrics`).
        selection: how the shipped seed was chosen.
        command: how each run was made and measured.

    Returns:
        ``{metric: spread}`` in the order of ``metrics``.

    Raises:
        CardError: a run's metric was measured with other settings than the card's (:func:`check_measured_alike`).
    """
    check_measured_alike(card, runs, metrics)
    return {m: spread(seed_runs(runs, m), card.train.seed, selection, command) for m in metrics}


def with_spreads(card: Card, found: dict[str, SeedSpread]) -> Card:
    """``card`` with ``found`` as the ``seeds`` of its metrics; every other field as it was."""
    metrics = {name: metric.model_copy(update={"seeds": found[name]}) if name in found else metric
               for name, metric in card.metrics.items()}
    return card.model_copy(update={"metrics": metrics})


DEFAULT_SELECTION = "the recipe's seed, fixed before any run; not chosen by its score"
"""How the card's seed was chosen, as :func:`seed_report` records it by default."""


@dataclass(frozen=True)
class SeedReport:
    """What :func:`seed_report` found.

    Attributes:
        card: the card, the run of its own seed.
        runs: every run, the card's included.
        metrics: the metrics spread.
        left_out: the card's ``eval_metrics`` left out because some run lacks them or records NaN or infinity.
        spreads: ``{metric: spread}``, in the order of ``metrics``.
        written: the card as the spreads were recorded on its file (``write=True``), else None.
    """

    card: Card
    runs: list[Run]
    metrics: list[str]
    left_out: list[str]
    spreads: dict[str, SeedSpread]
    written: Card | None = None


def recorded_spreads(card: Card | str | os.PathLike,
                     metrics: Sequence[str] | None = None) -> tuple[Card, dict[str, SeedSpread]]:
    """The spreads over seeds that a card records (as :func:`seed_report` wrote them), without any run.

    Args:
        card: the card, or what names one (:func:`vaezoo.entries.catalog.get_card`).
        metrics: only these metrics (default every metric with a spread), in this order.

    Returns:
        The card and ``{metric: spread}``.

    Raises:
        CardError: the card records no spread, or none for a metric of ``metrics``.
    """
    card = card if isinstance(card, Card) else get_card(card)
    found = {name: metric.seeds for name, metric in card.metrics.items() if metric.seeds is not None}
    if not found:
        raise CardError(f"card '{card.name}' records no spread over seeds; give runs of its recipe with other "
                        f"seeds (vaezoo train {shell_quote(card_reference(card))} --seed N --out DIR makes one)")
    if metrics is not None:
        missing = [name for name in metrics if name not in found]
        if missing:
            raise CardError(f"card '{card.name}' records no spread over seeds of {', '.join(missing)}; it records "
                            f"one of {', '.join(found)}")
        found = {name: found[name] for name in metrics}
    return card, found


def seed_report(card: Card | str | os.PathLike, runs: Iterable[str | os.PathLike],
                metrics: Sequence[str] | None = None, selection: str = DEFAULT_SELECTION,
                measured_by: str = "", write: bool = False) -> SeedReport:
    """A card's metrics spread over runs of its recipe with other seeds, recorded on the card with ``write``.

    Args:
        card: the card, or what names one (:func:`vaezoo.entries.catalog.get_card`).
        runs: the other runs' folders or card files (:func:`collect_runs`); none gives the spreads the card
            records (:func:`recorded_spreads`), with no run.
        metrics: the metrics to spread (:func:`choose_metrics`; default the card's ``eval_metrics`` on every run).
        selection: how the card's seed was chosen.
        measured_by: the command that gathers the runs (``vaezoo seeds ...``), recorded after the ``vaezoo train``
            pattern that makes each run.
        write: record the spreads on the card's file, under its lock (another writer's update meanwhile kept).

    Raises:
        VaezooError: ``selection`` is empty.
        CardError: ``write`` on a card that is not a local file vaezoo may change
            (:func:`vaezoo.entries.entry.check_writable`), or as :func:`collect_runs`, :func:`choose_metrics` and
            :func:`spreads` raise.
        TypeError: ``runs`` or ``metrics`` is one string or path, not a list of them.
    """
    for argument, given in (("runs", runs), ("metrics", metrics)):
        if isinstance(given, str | os.PathLike):
            raise TypeError(f"{argument} takes a list, e.g. [{os.fspath(given)!r}], not a {type(given).__name__}")
    runs = list(runs)
    if not runs:
        if write or selection != DEFAULT_SELECTION:
            raise VaezooError.about("{write} and {selection} record the spread over RUN folders; give the runs "
                                    "(vaezoo seeds CARD RUN... --write)")
        card, found = recorded_spreads(card, metrics)
        return SeedReport(card, [], list(found), [], found)
    card = card if isinstance(card, Card) else get_card(card)
    if not selection.strip():
        raise VaezooError.about("{selection} is empty; say how the card's seed was chosen")
    if write:
        check_writable(card)
    found_runs = collect_runs(card, runs)
    chosen, left_out = choose_metrics(card, found_runs, metrics)
    inside = card.source is None and card.path is not None and card.path.is_relative_to(Path.cwd())
    ref = str(card.path.relative_to(Path.cwd())) if inside else card_reference(card)
    command = f"vaezoo train {shell_quote(ref, for_terminal=False)} --seed N --out DIR for each run" + (
        f", then {measured_by}" if measured_by else "")
    found = spreads(card, found_runs, chosen, selection, command)
    written = update_card(card.path, lambda now: with_spreads(_as_read(card, now, chosen), found)) if write else None
    return SeedReport(card, found_runs, chosen, left_out, found, written)


def _as_read(card: Card, now: Card, metrics: Sequence[str]) -> Card:
    """``now``, the card file as it is under its lock, when it still states the weights and the values of
    ``metrics`` that ``card`` stated when the spreads were made (``eval --write`` or ``train --resume`` may have
    written it meanwhile: the spreads, whose run of the card's seed is ``card``'s, would then not be its).

    Raises:
        CardError: naming what changed.
    """
    changed = [f"{name} is now {_value(now, name)}, not {_value(card, name)}" for name in metrics
               if _value(now, name) != _value(card, name)]
    if now.weights != card.weights:
        changed.insert(0, "it names other weights")
    if changed:
        raise CardError(f"card '{card.name}' at {card.path} was written again while the runs were read "
                        f"({'; '.join(changed)}); run the command again to spread what it holds now")
    return now


def _value(card: Card, name: str) -> float | None:
    """The value ``card`` records for the metric ``name``; None where it records none."""
    return card.metrics[name].value if name in card.metrics else None
