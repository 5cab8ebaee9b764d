"""The dSprites study: every run's metrics in one table, drawn and read as Locatello et al. (2019) and Chen et al.
(2018) read theirs.

The table (one CSV row per run: method, the method's swept value, seed, steps, precision and every metric) is built
from cards: a zoo entry whose metrics record a spread over seeds (``vaezoo seeds --write``) gives one row per seed,
and a run folder's completed card (``vaezoo train --out DIR``, or a sweep's ``DIR/KEY=VALUE/seed-N``) gives its own
row, so the next span's runs join the table the way today's do. Everything else is computed from the CSV read back:

- the distribution of each metric per method and value (a point per seed, a bar for the median) and MIG against
  beta per method, as SVG drawn by :mod:`vaezoo.extras.seedplot`'s hand-written SVG (no plotting library);
- the share of each metric's variance that the method, the value within a method and the seed explain;
- where a released model falls among the seeds of its retrained recipe;
- which metric moves least with the seed, and whether the shipped seeds follow the selection rule;
- the grid's commands, span by span, and the size of its weights.

``vaezoo study DIR`` writes the CSV and the figures into ``DIR`` and, with ``--doc``, the numbers into the marked
sections of a Markdown page (docs/study.md). Everything is checked before the first file is written (a table or
figure there that vaezoo did not write, the page and its blocks), then written under the folder's lock; the figures
an earlier study drew there and this one does not are removed. This module reads cards only; it never imports torch.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from vaezoo.entries.schema import Card
from vaezoo.errors import VaezooError
from vaezoo.store.files import WrittenRecord
from vaezoo.terminal import counted

__all__ = ["Method", "Study", "DSPRITES", "StudyRow", "StudyTable", "Shares", "Placement", "Span", "StudyResult",
           "study_table", "table_text", "write_table", "read_table", "parse_table", "variance_shares",
           "place_among_seeds", "seed_robustness", "median_seed", "selection_check", "distribution_plots",
           "mig_figure", "grid_spans", "render_sections", "page_blocks", "fill_doc", "build_study"]

FIXED = ("card", "method", "key", "value", "seed", "shipped", "steps", "precision")
"""The table's first columns; a column per metric follows them."""
GRID_DEPENDENT = ("mig_chen",)
"""Metrics whose value moves with the density of the estimator's grid (Chen et al.'s sampling estimator over the
factors' grid: a model with very sharp posteriors drops from 0.20 to 0.08 on a thinned grid), never a selection
rule's metric."""
LATENT_STATISTICS = ("total_correlation", "gaussian_total_correlation", "mutual_info_score")
"""Metrics of the latent's own dependence, not of its match to the factors: their scale follows the latent's
structure (a joint model's total correlation is about 25 nats, a Gaussian one's about 1), so their variance between
methods is partly a difference in what is measured; never a selection rule's metric."""
SEEDS = (0, 1, 2, 3, 4)
"""The study's seeds: five per cell."""
MiB = 1 << 20


class StudyError(VaezooError):
    """A card or table the study cannot read, or a page it cannot fill."""


@dataclass(frozen=True)
class Method:
    """A method of the study: its recipe, the card field its grid sweeps, and the value its zoo entry takes.

    Attributes:
        name: the method's name in the table: its cards are named ``NAME-DATASET`` (the zoo entry) or
            ``NAME-DATASET-*`` (a run, ``vaezoo train`` names it ``...-run``).
        label: how figures name it.
        param: the swept hyperparameter's name (``beta``).
        key: its card field, a dotted path into ``model`` (list items by index).
        recipe: the recipe the grid trains, as an installed plugin's file (``PLUGIN:recipes/FILE``), which
            ``vaezoo train`` reads from a pip install as from a checkout.
        grid: the values the grid trains; empty for a method trained at its recipe's value only.
        paper_value: the value the method's paper uses on the dataset, where known; the entry's value.
        paper: where ``paper_value`` comes from.
        released: a model released by its authors and converted, not trained here: its seed is unknown.
    """

    name: str
    label: str
    param: str
    key: str
    recipe: str = ""
    grid: tuple[float, ...] = ()
    paper_value: float | None = None
    paper: str = ""
    released: bool = False

    def entry_value(self) -> tuple[float, str]:
        """The value of the method's zoo entry, fixed before the results: its paper's, else the grid's middle (the
        upper of the two middle values of an even grid); with the rule that chose it."""
        if self.paper_value is not None:
            return self.paper_value, f"the paper's ({self.paper})"
        return self.grid[len(self.grid) // 2], "the grid's middle"


@dataclass(frozen=True)
class Study:
    """A study: a dataset and its methods, in the order the tables and figures show them."""

    dataset: str
    methods: tuple[Method, ...]
    original: str = ""  # a released method's name, compared with ``retrained``'s seeds
    retrained: str = ""
    published: tuple[str, ...] = ()  # the methods whose zoo entries were trained at the published budget

    def published_methods(self) -> list[Method]:
        """The methods whose zoo entries were trained at the published budget, in order."""
        return [m for m in self.methods if m.name in self.published]

    def method_of(self, card: Card) -> Method:
        """The method ``card`` is an entry or a run of, by its name.

        Raises:
            StudyError: the card is of another dataset or of no method of the study.
        """
        for method in self.methods:
            entry = f"{method.name}-{self.dataset}"
            if card.dataset == self.dataset and (card.name == entry or card.name.startswith(entry + "-")):
                return method
        names = ", ".join(f"{m.name}-{self.dataset}" for m in self.methods)
        raise StudyError(f"card {card.name} ({card.dataset}) is no run of the study's recipes ({names}); give a card "
                         f"named after its recipe (vaezoo train names a run RECIPE-run)")

    def method(self, name: str) -> Method:
        """The method named ``name``."""
        return next(m for m in self.methods if m.name == name)

    def names(self) -> list[str]:
        """The names of the zoo entries of the study's methods, in the methods' order."""
        return [f"{m.name}-{self.dataset}" for m in self.methods]

    def entries(self) -> list[str]:
        """The zoo entries of the study's methods that the zoo holds, in the methods' order."""
        from vaezoo.entries.catalog import discover

        zoo = discover()
        return [name for name in self.names() if name in zoo]


DSPRITES = Study(
    dataset="dsprites",
    original="jointvae-original",
    retrained="jointvae",
    published=("betavae", "betatcvae", "jointvae", "betatcvae-joint"),
    methods=(
        Method("betavae", "beta-VAE", "beta", "model.beta", "betatcvae:recipes/betavae-dsprites.toml",
               (1, 2, 4, 6, 8, 16), 4, "Higgins et al., 2017, on dSprites"),
        Method("betatcvae", "beta-TCVAE", "beta", "model.beta",
               "betatcvae:recipes/betatcvae-dsprites.toml", (1, 2, 4, 6, 8, 10), 6,
               "Chen et al., 2018, on dSprites"),
        Method("factorvae", "FactorVAE", "gamma", "model.regularizers.0.gamma",
               "methods:recipes/factorvae-dsprites.toml", (10, 20, 30, 40, 50, 100)),
        Method("dipvae1", "DIP-VAE-I", "lambda_od", "model.regularizers.0.lambda_od",
               "methods:recipes/dipvae1-dsprites.toml", (1, 2, 5, 10, 20, 50)),
        Method("dipvae2", "DIP-VAE-II", "lambda_od", "model.regularizers.0.lambda_od",
               "methods:recipes/dipvae2-dsprites.toml", (1, 2, 5, 10, 20, 50)),
        Method("annealedvae", "AnnealedVAE", "c_max", "model.regularizers.0.groups.0.max",
               "methods:recipes/annealedvae-dsprites.toml", (5, 10, 25, 50, 75, 100), 25,
               "Burgess et al., 2018, on dSprites"),
        Method("jointvae", "JointVAE", "c_max", "model.capacity.continuous.1",
               "jointvae:recipes/jointvae-dsprites.toml"),
        Method("betatcvae-joint", "beta-TCVAE joint", "beta", "model.regularizers.0.beta",
               "betatcvae:recipes/betatcvae-joint-dsprites.toml"),
        Method("jointvae-original", "JointVAE (Dupont's release)", "c_max", "model.capacity.continuous.1",
               released=True),
    ),
)
"""The dSprites study: Locatello et al.'s six methods at their Table 2 grids, the joint models, Dupont's release."""


@dataclass(frozen=True)
class StudyRow:
    """One run: where it came from, its cell (method, value), its seed and its metrics (absent: not measured)."""

    card: str
    method: str
    key: str
    value: float
    seed: int | None
    shipped: bool
    steps: int | None
    precision: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    devices: tuple[str, ...] = ()  # the kinds of device it trained on, where its card records them; not in the CSV


@dataclass(frozen=True)
class StudyTable:
    """The study's rows and its metric columns, in order."""

    rows: tuple[StudyRow, ...]
    metrics: tuple[str, ...]

    def trained(self) -> list[StudyRow]:
        """The rows of known seed: runs of a recipe trained here."""
        return [r for r in self.rows if r.seed is not None]

    def cells(self, rows: Iterable[StudyRow] | None = None) -> dict[tuple[str, float], list[StudyRow]]:
        """The rows by cell (method, value), in table order."""
        out: dict[tuple[str, float], list[StudyRow]] = {}
        for row in self.trained() if rows is None else rows:
            out.setdefault((row.method, row.value), []).append(row)
        return out


def _field(card: Card, key: str) -> float:
    node: Any = {"model": card.model, "train": card.train.model_dump()}
    try:
        for part in key.split("."):
            node = node[int(part)] if isinstance(node, list) else node[part]
        return float(node)
    except (KeyError, IndexError, ValueError, TypeError):
        raise StudyError(f"card {card.name} has no number at {key}; give a card of its method's recipe") from None


def card_rows(card: Card, method: Method, dataset: str) -> list[StudyRow]:
    """The rows of one card: a zoo entry's (a card named as the method's entry, ``METHOD-DATASET``) one per seed of
    its recorded spreads, a run's (``METHOD-DATASET-*``) its own row alone.

    A metric without a spread is the card's own seed's value, so it fills that seed's row only. A run's spread
    (``vaezoo seeds RUN... --write`` on a run folder's card) is left out: its other seeds are run folders of their
    own, which give their rows. A released model's row has no seed. A row is ``shipped`` when its weights are a zoo
    entry's: the entry's own seed.
    """
    metrics = [m for m in card.eval_metrics if m in card.metrics]
    entry = card.name == f"{method.name}-{dataset}"
    runs: dict[int, dict[str, float]] = {}
    for name in metrics if entry else ():
        spread = card.metrics[name].seeds
        for run in spread.runs if spread else ():
            runs.setdefault(run.seed, {})[name] = run.value
    own = card.train.seed
    runs.setdefault(own, {})
    for name in metrics:
        runs[own].setdefault(name, card.metrics[name].value)
    value = _field(card, method.key)
    return [StudyRow(card.name, method.name, method.key, value, None if method.released else seed,
                     entry and seed == own,
                     card.train.steps, card.train.precision, {m: found[m] for m in metrics if m in found},
                     card.train.devices if seed == own else ())
            for seed, found in sorted(runs.items())]


def study_table(cards: Iterable[Card], study: Study = DSPRITES) -> StudyTable:
    """The study's table from cards: zoo entries with their spreads over seeds, and run folders' cards.

    Rows are sorted by the study's method order, value and seed; metric columns are the cards' evaluated metrics in
    the order they first appear.

    Raises:
        StudyError: a card of no method; two cards giving the same method, value and seed (one card file given
            twice, or two runs of one seed: every run of a method has one name, so they are named by their files);
            the runs of a cell trained for different numbers of steps, in different precisions or on different
            kinds of device; a metric measured with other settings on two cards.
    """
    rows, metrics, seen, measured = [], [], {}, {}
    order = {m.name: i for i, m in enumerate(study.methods)}
    for card in cards:
        method = study.method_of(card)
        _check_measured_alike(card, measured)
        for row in card_rows(card, method, study.dataset):
            cell = (row.method, row.value, row.seed)
            if cell in seen:
                other = seen[cell]
                where = f"{method.name} {method.param}={row.value:g} seed {row.seed}"
                if other.name != card.name:
                    raise StudyError(f"{where} comes from both card {other.name} and card {card.name}; give one of "
                                     f"them")
                if None in (other.path, card.path) or other.path.resolve() == card.path.resolve():
                    raise StudyError(f"card {card.name} is given twice; give each card once")
                raise StudyError(f"{where} comes from both {other.path} and {card.path}, two cards named "
                                 f"{card.name}; give one of them")
            seen[cell] = card
            rows.append(row)
            metrics += [m for m in row.metrics if m not in metrics]
    rows.sort(key=lambda r: (order[r.method], r.value, -1 if r.seed is None else r.seed))
    table = StudyTable(tuple(rows), tuple(metrics))
    for (name, value), cell in table.cells().items():
        _check_alike(study.method(name), value, cell, {r.seed: _source(seen[name, value, r.seed]) for r in cell})
    return table


def _check_measured_alike(card: Card, measured: dict[str, Card]) -> None:
    """Refuse ``card`` if it measured one of its evaluated metrics with other settings than the first card of
    ``measured`` that records it (``vaezoo eval --set``): the study compares every run on each metric, as measured
    alike. ``measured`` gains the card's metrics that it does not hold yet.

    Raises:
        StudyError: naming both cards, the metric and the first setting that differs.
    """
    from vaezoo.entries.recipe import measured_otherwise

    for name in card.eval_metrics:
        if name not in card.metrics:
            continue
        first = measured.setdefault(name, card)
        otherwise = measured_otherwise(name, card.metrics[name].parameters or {}, first.metrics[name].parameters or {},
                                       (_source(card), _source(first)))
        if otherwise is not None:
            raise StudyError(otherwise)


def _source(card: Card) -> str:
    """How a message names the card a row came from: its file (the runs of a method share one name)."""
    return f"card {card.name}" if card.path is None else str(card.path)


def _check_alike(method: Method, value: float, cell: Sequence[StudyRow], sources: Mapping[int, str]) -> None:
    """Refuse a cell whose runs made different numbers of steps, or trained in different precisions or on different
    kinds of device (where their cards record it: a GPU computes a recipe otherwise than the CPU): a cell is one
    recipe and its budget over seeds, so its spread would mix a stopped or another training with the seed's effect.

    Raises:
        StudyError: naming the two runs and what differs.
    """
    from vaezoo.entries.recipe import trained_otherwise

    for i, row in enumerate(cell):
        for other in cell[:i]:
            otherwise = trained_otherwise(other, row, (f"seed {other.seed} ({sources[other.seed]})",
                                                       f"seed {row.seed} ({sources[row.seed]})"))
            if otherwise is not None:
                raise StudyError(f"{method.name} {method.param}={value:g}: {otherwise}")


def _number(value: float) -> str:
    return repr(float(value))


def table_text(table: StudyTable) -> str:
    """``table`` as CSV text (numbers written so that they read back exactly; an empty cell: not measured)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((*FIXED, *table.metrics))
    for r in table.rows:
        writer.writerow((r.card, r.method, r.key, _number(r.value), "" if r.seed is None else r.seed,
                         str(r.shipped).lower(), "" if r.steps is None else r.steps, r.precision,
                         *(_number(r.metrics[m]) if m in r.metrics else "" for m in table.metrics)))
    return out.getvalue()


def write_table(table: StudyTable, path: Path) -> None:
    """Write ``table`` as CSV (:func:`table_text`)."""
    from vaezoo.store.files import atomic_write

    atomic_write(path, table_text(table).encode("utf-8"))


def read_table(path: Path) -> StudyTable:
    """The table a :func:`write_table` wrote.

    Raises:
        StudyError: the file is missing, lacks the fixed columns or holds a cell that is not a number.
    """
    try:
        with open(path, newline="", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise StudyError(f"cannot read the study table {path}: {e.strerror}; write it with vaezoo study DIR") from None
    return parse_table(text, path)


def parse_table(text: str, path: str | os.PathLike = "the table") -> StudyTable:
    """The table whose CSV text (:func:`table_text`) is ``text``, read from ``path`` (as messages name it).

    Raises:
        StudyError: as :func:`read_table` raises it.
    """
    lines = list(csv.reader(io.StringIO(text, newline="")))
    if not lines or tuple(lines[0][:len(FIXED)]) != FIXED:
        raise StudyError(f"{path} is no study table: its first columns must be {','.join(FIXED)}; write it with "
                         f"vaezoo study DIR")
    metrics = tuple(lines[0][len(FIXED):])
    rows = []
    for number, line in enumerate(lines[1:], 2):
        try:
            card, method, key, value, seed, shipped, steps, precision, *values = line
            rows.append(StudyRow(card, method, key, float(value), int(seed) if seed else None, shipped == "true",
                                 int(steps) if steps else None, precision,
                                 {m: float(v) for m, v in zip(metrics, values) if v}))
        except ValueError:
            raise StudyError(f"{path} line {number} is not a study row (a column missing or a cell that is not a "
                             f"number); write the table again with vaezoo study DIR") from None
    return StudyTable(tuple(rows), metrics)


@dataclass(frozen=True)
class Shares:
    """The shares of one metric's variance over the table (a nested decomposition, they add to 1).

    Attributes:
        metric: the metric.
        method: between methods (each method's mean against the grand mean).
        value: between the values of a method (each cell's mean against its method's).
        seed: within a cell: the seeds.
        runs, methods, cells: what the decomposition counted.
    """

    metric: str
    method: float
    value: float
    seed: float
    runs: int
    methods: int
    cells: int


def variance_shares(table: StudyTable, metric: str) -> Shares | None:
    """The shares of ``metric``'s variance that method, value and seed explain, over the runs of known seed with a
    finite value.

    The decomposition is nested, not crossed: seed 0 of one method shares nothing with seed 0 of another, so seeds
    are the residual within a cell (method, value), values vary within a method, and methods between them. The sums
    of squares add exactly, with cells of any size. None when the runs do not vary (or there are none).
    """
    rows = [r for r in table.trained() if math.isfinite(r.metrics.get(metric, math.nan))]
    if not rows:
        return None
    grand = statistics.fmean(r.metrics[metric] for r in rows)
    by_method: dict[str, list[StudyRow]] = {}
    for row in rows:
        by_method.setdefault(row.method, []).append(row)
    ss_method = ss_value = ss_seed = 0.0
    cells = table.cells(rows)
    for method_rows in by_method.values():
        method_mean = statistics.fmean(r.metrics[metric] for r in method_rows)
        ss_method += len(method_rows) * (method_mean - grand) ** 2
    for (method, _), cell in cells.items():
        method_mean = statistics.fmean(r.metrics[metric] for r in by_method[method])
        cell_mean = statistics.fmean(r.metrics[metric] for r in cell)
        ss_value += len(cell) * (cell_mean - method_mean) ** 2
        ss_seed += sum((r.metrics[metric] - cell_mean) ** 2 for r in cell)
    total = ss_method + ss_value + ss_seed
    if total <= 0:
        return None
    return Shares(metric, ss_method / total, ss_value / total, ss_seed / total, len(rows), len(by_method), len(cells))


@dataclass(frozen=True)
class Placement:
    """Where one model's value falls among the seeds of a recipe, on one metric.

    Attributes:
        metric, value: the metric and the model's value.
        seeds: the seeds' values, by seed.
        higher_is_better: the metric's direction.
        beats: how many seeds the model is better than.
        rank: its rank among the seeds and itself, 1 the best.
        position: ``below``, ``inside`` or ``above`` the seeds' range (in value, whatever the direction).
    """

    metric: str
    value: float
    seeds: tuple[tuple[int, float], ...]
    higher_is_better: bool
    beats: int
    rank: int
    position: str


def place_among_seeds(table: StudyTable, model: str, method: str,
                      higher_is_better: Mapping[str, bool]) -> list[Placement]:
    """For each metric that ``model``'s row and ``method``'s seeds both record finite, where the model falls among
    the seeds (a released model against its recipe retrained, as a distribution).

    Args:
        table: the study's table.
        model: the method name of the model's row (the first row of that method).
        method: the method whose runs of known seed are the distribution.
        higher_is_better: each metric's direction.
    """
    found = [r for r in table.rows if r.method == model]
    seeds = [r for r in table.trained() if r.method == method]
    if not found or not seeds:
        return []
    out = []
    for metric in table.metrics:
        value = found[0].metrics.get(metric, math.nan)
        runs = tuple((r.seed, r.metrics[metric]) for r in seeds if math.isfinite(r.metrics.get(metric, math.nan)))
        if not math.isfinite(value) or not runs:
            continue
        higher = higher_is_better.get(metric, True)
        beats = sum(value > v if higher else value < v for _, v in runs)
        worse_than = sum(v > value if higher else v < value for _, v in runs)
        values = [v for _, v in runs]
        position = "below" if value < min(values) else "above" if value > max(values) else "inside"
        out.append(Placement(metric, value, runs, higher, beats, worse_than + 1, position))
    return out


def median_seed(runs: Sequence[tuple[int, float]]) -> int:
    """The seed of the median run (for an even count the lower of the two middle values; ties to the lower seed)."""
    ordered = sorted(runs, key=lambda run: (run[1], run[0]))
    return ordered[(len(ordered) - 1) // 2][0]


def seed_robustness(table: StudyTable) -> list[Shares]:
    """The metrics every run of known seed records finite, by their seed share (least moved by the seed first):
    the candidates of a selection rule's metric, whose differences between models outweigh their seeds' noise."""
    trained = table.trained()
    found = [variance_shares(table, m) for m in table.metrics
             if trained and all(math.isfinite(r.metrics.get(m, math.nan)) for r in trained)]
    return sorted((s for s in found if s is not None), key=lambda s: (s.seed, s.metric))


def rule_metric(table: StudyTable) -> str | None:
    """The selection rule's metric: the most robust across seeds (:func:`seed_robustness`) of the scores of the
    latent's match to the factors that do not depend on the grid's density (neither :data:`GRID_DEPENDENT` nor
    :data:`LATENT_STATISTICS`); None when no such score is recorded finite on every run of known seed."""
    return next((s.metric for s in seed_robustness(table) if not _excluded(s.metric)), None)


def _excluded(metric: str) -> str:
    """Why ``metric`` cannot be a selection rule's, or an empty string."""
    if metric in GRID_DEPENDENT:
        return "depends on the grid's density"
    return "a statistic of the latent alone" if metric in LATENT_STATISTICS else ""


def selection_check(table: StudyTable, metrics: Sequence[str]) -> list[tuple[str, int, dict[str, int]]]:
    """For each card that ships one of the table's cells: the card, its shipped seed and, for each of ``metrics``,
    the cell's median seed on it (:func:`median_seed`) over the runs that record it finite (a NaN sorts nowhere)."""
    out = []
    for cell in table.cells().values():
        shipped = [r for r in cell if r.shipped]
        if shipped and len(cell) > 1:
            finite = {m: [(r.seed, r.metrics[m]) for r in cell if math.isfinite(r.metrics.get(m, math.nan))]
                      for m in metrics}
            medians = {m: median_seed(runs) for m, runs in finite.items() if runs}
            out.append((shipped[0].card, shipped[0].seed, medians))
    return out


def distribution_plots(table: StudyTable, study: Study = DSPRITES) -> list:
    """One :class:`vaezoo.extras.seedplot.SeedPlot` per metric: a row per cell (method, value) that measured it, its
    seeds as points and its median as a bar, the shipped seed ringed (Locatello et al.'s figures); the row's label
    counts its runs that record the metric as NaN or infinite, or do not record it, which it does not draw."""
    from vaezoo.extras.seedplot import SeedPlot, Strip

    plots = []
    for metric in table.metrics:
        strips = []
        for (name, value), cell in table.cells().items():
            measured = [r for r in cell if metric in r.metrics]
            finite = tuple((r.seed, r.metrics[metric]) for r in measured if math.isfinite(r.metrics[metric]))
            if measured:
                method = study.method(name)
                shipped = next((r.seed for r in cell if r.shipped), -1)
                median = statistics.median(v for _, v in finite) if finite else math.nan
                strips.append(Strip(f"{method.label} {method.param}={value:g}", finite, median, shipped,
                                    len(measured) - len(finite), len(cell) - len(measured)))
        if strips:
            plots.append(SeedPlot(study.dataset, metric, tuple(strips)))
    return plots


COLOURS = ("#2c7fb8", "#d95f0e", "#31a354", "#756bb1", "#e7298a", "#666666")


def mig_figure(table: StudyTable, metric: str, study: Study = DSPRITES, param: str = "beta") -> str:
    """Chen et al.'s figure: ``metric`` against the methods' ``param`` (log axis), one colour per method: each seed a
    point, each value's median a bar joined across values, its range a line. With one value per method the
    figure says so: no trend can be read from it. A line under the axis names the runs it does not draw: those that
    record the metric as NaN or infinite or do not record it, and those at a value a log axis has no place for (0)."""
    from vaezoo.extras.seedplot import MARK, _ticks

    methods = [m for m in study.methods if m.param == param and not m.released
               and any(r.method == m.name and metric in r.metrics for r in table.trained())]
    labels = {m.name: m.label for m in methods}
    cells, left_out = {}, []
    for (name, value), cell in table.cells().items():
        if name not in labels:
            continue
        finite = [r for r in cell if math.isfinite(r.metrics.get(metric, math.nan))]
        measured = sum(metric in r.metrics for r in cell)
        why = [f"{count} {what}" for count, what in ((measured - len(finite), "non-finite"),
                                                     (len(cell) - measured, "not measured")) if count]
        if value <= 0 and finite:
            why.append(f"{len(finite)} off the log axis")
        elif finite:
            cells[name, value] = finite
        if why:
            left_out.append(f"{labels[name]} {param} {value:g} ({', '.join(why)})")
    xs = sorted({v for m in methods for v in m.grid} | {v for _, v in cells})
    ys = [r.metrics[metric] for cell in cells.values() for r in cell] or [0.0, 1.0]
    width, height, left, right, top, bottom = 640, 360, 60, 620, 60, 300
    low, high = min(ys), max(ys)
    pad = (high - low) * 0.08 or 0.05
    low, high = low - pad, high + pad
    lx = [math.log(v) for v in xs] or [0.0]
    span = (max(lx) - min(lx)) or 1.0

    def x(value: float, shift: float = 0.0) -> float:
        return left + 20 + (math.log(value) - min(lx)) / span * (right - left - 40) + shift

    def y(value: float) -> float:
        return bottom - (value - low) / (high - low) * (bottom - top)

    title = f"{metric} against {param} on {study.dataset}"
    one = all(len({v for (n, v) in cells if n == m.name}) == 1 for m in methods)
    note = ("one value per method so far: no trend can be read; the grid's values are on the axis"
            if one else "points: seeds; bar: median; line: range")
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} '
           f'{height}" role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="13">',
           f"<!-- {MARK} -->", f"<title>{escape(title)}</title>",
           f'<text x="4" y="18" font-weight="bold">{escape(title)}</text>',
           f'<text x="4" y="36" fill="#555">{escape(note)}</text>',
           f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>']
    for value in xs:
        out.append(f'<text x="{x(value):.1f}" y="{bottom + 18}" text-anchor="middle">{value:g}</text>')
    out.append(f'<text x="{(left + right) / 2}" y="{bottom + 38}" text-anchor="middle">{escape(param)} '
               f'(log scale)</text>')
    for tick in _ticks(low, high):
        out.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.3g}</text>')
        out.append(f'<line x1="{left}" y1="{y(tick):.1f}" x2="{right}" y2="{y(tick):.1f}" stroke="#eee"/>')
    for i, method in enumerate(methods):
        colour, shift = COLOURS[i % len(COLOURS)], (i - (len(methods) - 1) / 2) * 10
        mine = sorted((v, cell) for (n, v), cell in cells.items() if n == method.name)
        medians = [(v, statistics.median(r.metrics[metric] for r in cell)) for v, cell in mine]
        if len(medians) > 1:
            points = " ".join(f"{x(v, shift):.1f},{y(m):.1f}" for v, m in medians)
            out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for (v, cell), (_, med) in zip(mine, medians):
            values = [r.metrics[metric] for r in cell]
            out.append(f'<line x1="{x(v, shift):.1f}" y1="{y(min(values)):.1f}" x2="{x(v, shift):.1f}" '
                       f'y2="{y(max(values)):.1f}" stroke="{colour}"/>')
            out.append(f'<line x1="{x(v, shift) - 6:.1f}" y1="{y(med):.1f}" x2="{x(v, shift) + 6:.1f}" '
                       f'y2="{y(med):.1f}" stroke="{colour}" stroke-width="3"><title>{escape(method.label)} '
                       f'{param} {v:g}: median {med:.4g} of {len(values)} seeds</title></line>')
            for r in cell:
                out.append(f'<circle cx="{x(v, shift):.1f}" cy="{y(r.metrics[metric]):.1f}" r="3.5" fill="{colour}" '
                           f'fill-opacity="0.6"><title>{escape(method.label)} {param} {v:g} seed {r.seed}: '
                           f'{r.metrics[metric]:.4g}</title></circle>')
        out.append(f'<rect x="{left + 10 + 160 * i}" y="{top - 14}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{left + 24 + 160 * i}" y="{top - 5}">{escape(method.label)}</text>')
    if left_out:
        out.append(f'<text x="4" y="{height - 4}" fill="#555">not drawn: {escape("; ".join(left_out))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Span:
    """A GPU span of the study: what it trains and the commands, in order."""

    title: str
    commands: tuple[str, ...]


def _values(values: Iterable[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


def grid_spans(study: Study = DSPRITES, out: str = "runs/study", device: str = "cuda") -> list[Span]:
    """The study's spans in priority order: the two extra seeds of the published-budget recipes, then beta-VAE
    and beta-TCVAE across beta (Chen et al.'s comparison), then the other methods' grids.

    Each grid is one ``vaezoo train`` of five seeds and a sweep, trained without its evaluation (the span's GPU
    time goes to training), then measured by one ``vaezoo eval RUN... --write`` of its runs.
    """
    seeds = ",".join(map(str, SEEDS))
    extra = ",".join(map(str, SEEDS[3:]))

    def measure(folder: str) -> str:  # every run at once: the data read once, a run already measured skipped
        return f"vaezoo eval {folder} --write --device {device}"

    first = []
    for m in study.published_methods():
        folder = f"{out}/seeds/{m.name}"
        first += [f"vaezoo train {m.recipe} --seeds {extra} --no-eval --device {device} --out {folder}",
                  measure(f"{folder}/seed-*")]

    def sweep(m: Method) -> list[str]:
        folder = f"{out}/{m.name}"
        return [f"vaezoo train {m.recipe} --seeds {seeds} --sweep {m.key}={_values(m.grid)} --no-eval "
                f"--device {device} --out {folder}", measure(f"{folder}/*/seed-*")]

    chen = [c for m in study.methods if m.name in ("betavae", "betatcvae") for c in sweep(m)]
    rest = [c for m in study.methods if m.grid and m.name not in ("betavae", "betatcvae") for c in sweep(m)]
    return [Span("1. the two extra seeds (3 and 4) of the published-budget recipes", tuple(first)),
            Span("2. beta-VAE and beta-TCVAE across beta (Chen et al.'s comparison)", tuple(chen)),
            Span("3. FactorVAE, DIP-VAE-I, DIP-VAE-II and AnnealedVAE across their grids", tuple(rest))]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _g(x: float) -> str:
    return f"{x:.4g}"


def _md_table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_sections(table: StudyTable, cards: Sequence[Card], table_file: str, figures: Mapping[str, str],
                    study: Study = DSPRITES) -> dict[str, str]:
    """The numbers of the study's page, by section name: ``table``, ``figures``, ``variance``, ``original``,
    ``rule``, ``entries``, ``grid``, ``weights``.

    Args:
        table: the table read back from its CSV.
        cards: the cards it was built from (the metrics' directions, the weights' sizes).
        table_file: the CSV's path as the page links it.
        figures: each figure's caption by its path as the page links it.
    """
    from vaezoo.extras.leaderboard import higher_is_better

    trained = table.trained()
    cells = table.cells()
    counts = sorted({len(c) for c in cells.values()})
    sections = {"table": (
        f"[{table_file}]({table_file}): {len(table.rows)} rows, {len(trained)} of them runs of known seed in "
        f"{len(cells)} cells (method, value) of {'/'.join(map(str, counts))} seeds each, {len(table.metrics)} "
        f"metrics; steps {', '.join(map(str, sorted({r.steps for r in table.rows if r.steps})))}; precision "
        f"{', '.join(sorted({r.precision for r in table.rows}))}.\n\n"
        + _md_table(("cell", "card", "seeds (shipped)", "steps"),
                    ((f"{study.method(n).label} {study.method(n).param}={v:g}", c[0].card,
                      ", ".join(f"**{r.seed}**" if r.shipped else str(r.seed) for r in c), c[0].steps or "")
                     for (n, v), c in cells.items())))}
    sections["figures"] = "\n".join(f"- [{caption}]({path})" for path, caption in figures.items())

    shares = [s for s in (variance_shares(table, m) for m in table.metrics) if s is not None]
    several = any(len({v for (n, v) in cells if n == name}) > 1 for name, _ in cells)
    sections["variance"] = (
        ("" if several else "Each method has one value so far: the value column is 0 by construction, and the "
                            "method column is method and value together.\n\n")
        + _md_table(("metric", "method", "value", "seed", "runs", "methods", "cells"),
                    ((s.metric, _pct(s.method), _pct(s.value), _pct(s.seed), s.runs, s.methods, s.cells)
                     for s in shares))
        + f"\n\nThe seed explains more of the variance than the method and the value together on "
          f"{sum(s.seed > s.method + s.value for s in shares)} of {len(shares)} metrics: "
          f"{', '.join(s.metric for s in shares if s.seed > s.method + s.value) or 'none'}.")

    directions = {m: higher_is_better(m, cards) for m in table.metrics}
    placed = place_among_seeds(table, study.original, study.retrained, directions)
    n = max((len(p.seeds) for p in placed), default=0)
    releases = sum(r.method == study.original for r in table.rows)
    seeds = sum(r.method == study.retrained for r in trained)
    sections["original"] = (
        f"Nothing to place: the table holds {counted(releases, 'row')} of "
        f"{study.method(study.original).label} and {counted(seeds, 'run')} of known seed of "
        f"{study.retrained}-{study.dataset}, and no metric that both record finite." if not placed else
        f"{study.method(study.original).label} against the {n} seeds of {study.retrained}-{study.dataset}, metric "
        f"by metric (rank 1 is the best of the {n + 1}).\n\n"
        + _md_table(("metric", "better", "original", "seeds (by seed)", "rank", "beats", "range"),
                    ((p.metric, "higher" if p.higher_is_better else "lower", _g(p.value),
                      ", ".join(f"{s}: {_g(v)}" for s, v in p.seeds), f"{p.rank} of {len(p.seeds) + 1}",
                      f"{p.beats} of {len(p.seeds)}", p.position) for p in placed))
        + f"\n\nThe original is better than the median seed on {sum(2 * p.beats > len(p.seeds) for p in placed)} "
          f"of {len(placed)} metrics, better than every seed on {sum(p.beats == len(p.seeds) for p in placed)}, "
          f"and outside the seeds' range on {sum(p.position != 'inside' for p in placed)}.")

    robust = seed_robustness(table)
    chosen = rule_metric(table)
    sections["rule"] = (
        f"Metrics recorded finite on all {len(trained)} runs of known seed, least moved by the seed first (the seed "
        f"share of the decomposition above):\n\n"
        + _md_table(("metric", "seed share", "excluded"), ((s.metric, _pct(s.seed), _excluded(s.metric) or "")
                                                           for s in robust)))
    if chosen is None:
        sections["rule"] += (
            "\n\n**No rule's metric**: no score of the latent's match to the factors that does not depend on the "
            "grid's density is recorded finite on every run of known seed: a run that lacks one (measure it with "
            "'vaezoo eval RUN --write'), or records it as NaN or infinite, leaves it out.")
    else:
        checked = selection_check(table, [chosen, "mig_dlib", "mig_chen"])
        sections["rule"] += (
            f"\n\n**Rule: ship the median seed on {chosen}**, the score least moved by the seed among those of the "
            f"latent's match to the factors that do not depend on the grid's density.\n\n"
            + _md_table(("card", "shipped", f"median on {chosen}", "median on mig_dlib", "median on mig_chen",
                         "follows the rule"),
                        ((card, seed, med.get(chosen, ""), med.get("mig_dlib", ""), med.get("mig_chen", ""),
                          "yes" if med.get(chosen) == seed else "no")
                         for card, seed, med in checked)))

    from vaezoo.entries.catalog import discover

    zoo = discover()  # the entries the zoo holds, whether or not the study was given them (a span's runs instead)
    entries = []
    for m in study.methods:
        if m.grid:
            value, why = m.entry_value()
            entry = zoo.get(f"{m.name}-{study.dataset}")
            today = _g(_field(entry, m.key)) if entry else "(no entry yet)"
            entries.append((m.label, m.param, _values(m.grid), f"{value:g}", why, today))
    sections["entries"] = _md_table(("method", "parameter", "grid", "entry value", "rule", "zoo entry today"), entries)

    sections["grid"] = "\n\n".join(f"{span.title}:\n\n<!-- no-run: a GPU span -->\n```bash\n"
                                   + "\n".join(span.commands) + "\n```" for span in grid_spans(study))

    sizes = [c.weights.size for c in cards if c.weights and not study.method_of(c).released]
    size = int(statistics.median(sizes)) if sizes else 0
    runs = sum(len(m.grid) * len(SEEDS) for m in study.methods) + len(SEEDS[3:]) * len(study.published_methods())
    new_entries = sum(1 for m in study.methods if m.grid and f"{m.name}-{study.dataset}" not in zoo)
    weights = [c.weights.size for c in zoo.values() if c.weights and c.weights.file]
    sections["weights"] = _md_table(("quantity", "value"), (
        (f"the zoo's weights today ({len(weights)} entries)", f"{sum(weights) / MiB:.1f} MiB"),
        ("one model's weights (median of the study's cards)", f"{size / MiB:.2f} MiB ({size:,} bytes)"),
        ("runs the three spans train", runs),
        ("all their weights", f"{runs * size / MiB:,.0f} MiB"),
        ("new zoo entries (one per new method)", f"{new_entries}: {new_entries * size / MiB:.1f} MiB"),
        ("the study table", f"{len(table.rows)} rows"),
    ))
    return sections


OPENER = re.compile(r"<!-- study:(?P<name>[a-z]+) -->")
CLOSER = re.compile(r"<!-- /study:(?P<name>[a-z]+) -->")
"""The lines that open and close a page's study block (each on a line of its own)."""


def page_blocks(text: str, page: str = "the page") -> dict[str, tuple[int, int]]:
    """The study blocks of ``text`` by name: the numbers of each one's opening and closing lines (from 1).

    Raises:
        StudyError: a block opened and never closed (or closed under another name), opened twice, closed without
            being opened, or given twice, naming it and its line in ``page``.
    """
    blocks: dict[str, tuple[int, int]] = {}
    opened: tuple[str, int] | None = None
    for number, line in enumerate(text.split("\n"), 1):
        start, end = OPENER.fullmatch(line.strip()), CLOSER.fullmatch(line.strip())
        if start and opened and start["name"] == opened[0]:
            raise StudyError(f"block '{opened[0]}' opened at line {opened[1]} of {page} is opened again at line "
                             f"{number}; remove one of the two <!-- study:{opened[0]} --> lines")
        if opened and (start or end and end["name"] != opened[0]):
            raise StudyError(f"block '{opened[0]}' opened at line {opened[1]} of {page} is never closed; add "
                             f"<!-- /study:{opened[0]} --> before line {number}")
        if end and not opened:
            raise StudyError(f"line {number} of {page} closes block '{end['name']}', which is not open; add "
                             f"<!-- study:{end['name']} --> above it, or remove that line")
        if start:
            opened = start["name"], number
        elif end:
            name, first = opened
            if name in blocks:
                raise StudyError(f"block '{name}' is in {page} twice (lines {blocks[name][0]} and {first}); keep "
                                 f"one of them")
            blocks[name], opened = (first, number), None
    if opened:
        raise StudyError(f"block '{opened[0]}' opened at line {opened[1]} of {page} is never closed; add "
                         f"<!-- /study:{opened[0]} -->")
    return blocks


def fill_doc(text: str, sections: Mapping[str, str], page: str = "the page") -> str:
    """``text`` with each ``<!-- study:NAME -->...<!-- /study:NAME -->`` block's content replaced by ``sections``
    (each marker on a line of its own; a block of another name is left as it is).

    Raises:
        StudyError: a section has no block in ``text``, or a block is malformed (:func:`page_blocks`), naming
            ``page``.
    """
    blocks = page_blocks(text, page)
    missing = [name for name in sections if name not in blocks]
    if missing:
        raise StudyError(f"{page} has no block for {', '.join(missing)}; add <!-- study:NAME --> and "
                         f"<!-- /study:NAME --> lines around where each goes")
    lines = text.split("\n")
    for name, (start, end) in sorted(blocks.items(), key=lambda item: -item[1][0]):
        if name in sections:
            lines[start:end - 1] = sections[name].rstrip("\n").split("\n")
    return "\n".join(lines)


@dataclass(frozen=True)
class StudyResult:
    """What :func:`build_study` wrote: the table, the figures and the page it filled (or None)."""

    table: Path
    figures: tuple[Path, ...]
    doc: Path | None


def _cards_of(source: str | os.PathLike) -> list[Card]:
    from vaezoo.entries.catalog import discover, get_card

    path = Path(source)
    if isinstance(source, str) and source in discover():
        return [get_card(source)]
    if path.is_dir() and not any(path.glob("*.toml")):
        found = sorted(path.rglob("*.toml"))
        if not found:
            raise StudyError(f"{path} holds no card; give run folders that vaezoo train finished")
        return [get_card(p) for p in found]
    return [get_card(path)]


RECORD = ".vaezoo-study.json"
"""Beside the table: the figures studies wrote there and what each held, so that a study removes those it no longer
draws (:data:`WRITTEN`)."""
FIGURES = re.compile(r"(distribution|mig)-[A-Za-z0-9._-]+\.svg")
"""The names of the figures a study draws: nothing else its record names is ever removed."""


def _figure_kind(name: str, data: bytes) -> bool:
    """Whether ``data`` is an SVG drawn here (:func:`vaezoo.extras.seedplot.drawn_here`)."""
    from vaezoo.extras.seedplot import drawn_here

    return drawn_here(data)


WRITTEN = WrittenRecord(RECORD, "vaezoo study", FIGURES, _figure_kind)
"""The study's :data:`RECORD`, read, written and pruned as :class:`vaezoo.store.files.WrittenRecord` does."""


def _refuse_foreign(directory: Path, table: Path, figures: Iterable[str]) -> None:
    """Refuse ``directory`` if a file there has the table's name and is no study table (its first columns are not
    :data:`FIXED`), or a figure's name and is no figure vaezoo drew: nothing of the user's is overwritten.

    Raises:
        VaezooError: naming the files that are someone else's.
    """
    from types import SimpleNamespace

    from vaezoo.extras.seedplot import refuse_foreign_plots
    from vaezoo.store.files import read_beside

    data = read_beside(table, SMALL_TABLE)  # a link, a FIFO, a folder or a huge file there is refused
    if data is not None and next(csv.reader([data.decode("utf-8", "replace").split("\n", 1)[0]]),
                                 [])[:len(FIXED)] != list(FIXED):
        raise StudyError(f"{directory} already holds {table.name}, which vaezoo did not write; give another folder, "
                         f"or move it away")
    refuse_foreign_plots([SimpleNamespace(file=name) for name in figures], directory)


SMALL_TABLE = 64 << 20
"""The most bytes of a study table found in the study's folder that are read (a table of a million runs)."""


def _read_page(page: Path) -> str:
    """The text of the Markdown page ``page``, which the study fills: refused, before anything is written, when it
    cannot be read or is read-only.

    Raises:
        StudyError: naming the page, the problem and the fix.
    """
    import stat

    from vaezoo.store.files import FILE_KINDS

    try:
        info = os.stat(page)
        kind = FILE_KINDS.get(stat.S_IFMT(info.st_mode))
        if kind:
            raise StudyError(f"cannot read {page}: it is {kind}; give a Markdown page with study blocks")
        text = page.read_text(encoding="utf-8")
    except OSError as e:
        raise StudyError(f"cannot read {page}: {e.strerror}; give a Markdown page with study blocks") from None
    except UnicodeDecodeError as e:
        raise StudyError(f"cannot read {page}: byte {e.start} is not UTF-8 text; give a Markdown page with study "
                         f"blocks") from None
    if not info.st_mode & 0o222:  # a rename over it would pass the owner's protection
        raise StudyError(f"page {page} is read-only; make it writable (chmod u+w) to fill its study blocks, or give "
                         f"the path of a copy")
    return text


def build_study(directory: str | os.PathLike, sources: Sequence[str | os.PathLike] = (),
                doc: str | os.PathLike | None = None, study: Study = DSPRITES) -> StudyResult:
    """Build the study: its table from cards, written as ``DIRECTORY/DATASET.csv`` and read back; its figures from
    that table, ``distribution-METRIC.svg`` and ``mig-METRIC.svg``; and, with ``doc``, its numbers in the page's
    marked sections (:func:`render_sections`, :func:`fill_doc`), links relative to the page.

    Everything is computed and checked before the first file is written, then written under the folder's run lock
    (:func:`vaezoo.store.locks.run_lock`; a second study into it is refused), each file through a temporary one
    beside it, the files renamed into place back to back; the temporary files a study killed there left are
    removed first. The figures an earlier study drew there and this one does
    not are removed, as long as they hold what it wrote (:data:`RECORD`).

    Args:
        directory: where the table and figures go.
        sources: zoo names, card files, run folders or folders of runs (searched for cards); none: the study's
            zoo entries.
        doc: a Markdown page with ``<!-- study:NAME -->`` blocks.

    Raises:
        StudyError: see :func:`study_table`, :func:`fill_doc`; a page that cannot be read or is read-only; a table
            there that is no study table; no source given, and the zoo holds none of the study's entries.
        VaezooError: a figure there that vaezoo did not write; another process writes the folder.
        OutputError: the folder or the page's folder takes no file.
    """
    from vaezoo.entries.catalog import one_scan
    from vaezoo.signals import Interrupted, StopSignals
    from vaezoo.store.files import commit, remove_temporaries
    from vaezoo.store.locks import run_lock

    directory = Path(directory)
    page = None if doc is None else Path(doc)
    text = None if page is None else _read_page(page)
    with one_scan():  # each source looked up in one read of the card folders, not one per run folder given
        cards = [c for source in (sources or study.entries()) for c in _cards_of(source)]
    if not cards:  # no source given, and the zoo holds none of the study's entries: an empty table said nothing
        from vaezoo.plugins import get_plugins

        left_out = get_plugins().left_out
        raise StudyError(f"the zoo holds none of the study's entries ({', '.join(study.names())}), so there is no "
                         f"run to gather; give the runs as SOURCE" + (
                             f", or add the plugins whose cards you want: VAEZOO_LOAD_PLUGINS leaves out the "
                             f"installed plugins {', '.join(left_out)}" if left_out else ""))
    path = directory / f"{study.dataset}.csv"
    data = table_text(study_table(cards, study))
    table = parse_table(data, path)
    drawn = {f"distribution-{p.metric}.svg": (p.svg(), f"{p.metric}: distribution over seeds per method and value")
             for p in distribution_plots(table, study)}
    for metric in ("mig_dlib", "mig_chen"):
        if metric in table.metrics:
            drawn[f"mig-{metric}.svg"] = (mig_figure(table, metric, study), f"{metric} against beta per method")
    files = {path: data.encode("utf-8"), **{directory / name: svg.encode("utf-8") for name, (svg, _) in drawn.items()}}
    staged: list[tuple[Path, Path]] = []  # (temporary file, target): the table and the figures
    ahead: list[tuple[Path, Path]] = []  # the page's, staged before the folder is touched, moved in last
    try:
        if page is not None:
            where = os.path.relpath(directory, page.parent)
            link = f"{where}/{path.name}".removeprefix("./")
            figures = {f"{where}/{name}".removeprefix("./"): caption for name, (_, caption) in
                       sorted(drawn.items(), key=lambda item: (not item[0].startswith("mig-"), item[0]))}
            filled = fill_doc(text, render_sections(table, cards, link, figures, study), f"page {page}")
            ahead.append((_stage(page, filled.encode("utf-8"), "make its folder writable, or give a copy of the page "
                                 "in a folder you can write"), page))
        _refuse_foreign(directory, path, drawn)  # before the lock, which makes the folder
        with run_lock(directory, "output path"):
            _refuse_foreign(directory, path, drawn)  # again: no other study writes there now
            earlier = WRITTEN.read(directory)
            # those a study killed while writing left: no other study writes here now
            remove_temporaries(*files, *(directory / name for name in earlier), directory / RECORD)
            with StopSignals(defer=True) as held:  # a Ctrl-C between a file's staging and its listing left it there
                for target, content in files.items():
                    staged.append((_stage(target, content), target))
            if held.received is not None:
                raise Interrupted(held.received)
            digests = {name: hashlib.sha256(files[directory / name]).hexdigest() for name in drawn}
            WRITTEN.write(directory, {**earlier, **{name: [*earlier.get(name, []), digest]  # a study cut short
                                                   for name, digest in digests.items()}})  # names them
            commit(staged + ahead)
            left = WRITTEN.remove_stale(directory, {name: d for name, d in earlier.items() if name not in drawn})
            WRITTEN.write(directory, {name: [digest] for name, digest in digests.items()} | left)
    finally:
        for tmp, _ in staged + ahead:  # none once committed
            tmp.unlink(missing_ok=True)
    return StudyResult(path, tuple(directory / name for name in drawn), page)


def _stage(path: Path, data: bytes, fix: str = "choose another output path") -> Path:
    from vaezoo.store.files import stage

    return stage(path, lambda tmp: tmp.write_bytes(data), fix)
