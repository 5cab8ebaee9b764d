"""The zoo's entries side by side on chosen metrics, as measured and recorded on their cards."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from vaezoo.entries.catalog import list_cards, natural_key
from vaezoo.entries.schema import Card
from vaezoo.errors import UnknownNameError, VaezooError
from vaezoo.registry import closest


@dataclass(frozen=True)
class Row:
    """One card's values of the chosen metrics (None where its card records none)."""

    name: str
    dataset: str
    values: tuple[float | None, ...]


LOSSES = ("reconstruction", "objective")
"""The losses ``vaezoo eval`` records beside the registered metrics (and ``kl_<part>``): lower is better."""


def higher_is_better(metric: str, cards: Iterable[Card] = ()) -> bool:
    """The direction ``metric`` ranks in: lower first for the losses (:data:`LOSSES`, ``kl_<part>``); the direction
    ``cards`` record beside it when every one of them that has it records the same (``vaezoo eval`` records the
    spec's), read without loading the metric's code (and torch); else its spec's for a registered metric
    (:attr:`MetricSpec.higher_is_better`); higher first for a name nothing registers."""
    if metric in LOSSES or metric.startswith("kl_"):
        return False
    recorded = {card.metrics[metric].higher_is_better for card in cards if metric in card.metrics}
    if len(recorded) == 1 and None not in recorded:
        return recorded.pop()
    from vaezoo.assemble import metric as spec

    try:
        return spec(metric).higher_is_better
    except UnknownNameError:
        return True


def leaderboard(cards: Iterable[Card], metrics: Sequence[str]) -> list[Row]:
    """The cards that record at least one of ``metrics``, best first on the first metric they record.

    Rows are sorted by each metric in turn, best first in the metric's direction (:func:`higher_is_better`: the
    one the cards record, else its spec's), a card without a value, or with one that is not a finite number, after
    those with one (an infinity is no score a model reached: a degenerate result, or a hand-edited card); ties in the
    order of their names (``x-2`` before ``x-10``).

    Args:
        cards: the cards to rank, e.g. :func:`vaezoo.entries.catalog.list_cards`.
        metrics: metric names, as on the cards (``mig_chen``, ``dci_disentanglement``, ``cluster_accuracy``).

    Returns:
        One :class:`Row` per card that records any of them.
    """
    cards = list(cards)
    signs = [1.0 if higher_is_better(m, cards) else -1.0 for m in metrics]
    rows = []
    for card in cards:
        values = tuple(card.metrics[m].value if m in card.metrics else None for m in metrics)
        if any(v is not None for v in values):
            rows.append(Row(card.name, card.dataset, values))
    return sorted(rows, key=lambda row: [*(_rank(v, sign) for v, sign in zip(row.values, signs)),
                                         natural_key(row.name)])


def _rank(value: float | None, sign: float) -> tuple[bool, float]:
    missing = value is None or not math.isfinite(value)
    return missing, 0.0 if missing else -sign * value


def shared_metrics(cards: Iterable[Card], at_least: int = 2) -> list[str]:
    """The metrics recorded on at least ``at_least`` of ``cards``: those a table can compare, in name order."""
    counts: dict[str, int] = {}
    for card in cards:
        for name in card.metrics:
            counts[name] = counts.get(name, 0) + 1
    return sorted(name for name, count in counts.items() if count >= at_least)


def zoo_leaderboard(metrics: Sequence[str], dataset: str | None = None) -> list[Row]:
    """:func:`leaderboard` of the zoo's cards (:func:`vaezoo.entries.catalog.list_cards`), those of ``dataset`` only
    when it is given.

    Raises:
        VaezooError: no card is of ``dataset``, or one of ``metrics`` is recorded by none of them (a mistyped name
            would be a blank column), naming the recorded metrics closest to it; one line saying what to do.
    """
    cards = list_cards()
    if not cards:  # there is no dataset or metric to suggest
        from vaezoo.plugins import get_plugins

        left_out = get_plugins().left_out
        raise VaezooError("no card found" + (f": VAEZOO_LOAD_PLUGINS leaves out the installed plugins "
                                             f"{', '.join(left_out)}; add those whose cards you want, or unset it"
                                             if left_out else "; 'vaezoo list --skipped' says why any was skipped"))
    chosen = [c for c in cards if dataset in (None, c.dataset)]
    if not chosen:
        known = sorted({c.dataset for c in cards})
        close = _closest(dataset, known)
        hint = f" (did you mean {close}?)" if close else ""
        raise VaezooError(f"no card is of dataset '{dataset}'{hint}; the zoo's datasets: {', '.join(known)}")
    recorded = sorted({name for card in chosen for name in card.metrics})
    missing = [metric for metric in metrics if metric not in recorded]
    if missing:
        of = f" of dataset '{dataset}'" if dataset is not None else ""
        raise VaezooError(f"no card{of} records {', '.join(_with_close_match(m, recorded) for m in missing)}; "
                          f"'vaezoo info NAME' lists a card's metrics")
    return leaderboard(chosen, metrics)


def _with_close_match(metric: str, recorded: list[str]) -> str:
    """``metric``, followed by the recorded metric closest to it if one is close: ``mig_dlb (did you mean
    mig_dlib?)``."""
    close = _closest(metric, recorded)
    return f"{metric} (did you mean {close}?)" if close else metric


def _closest(name: str, known: list[str]) -> str | None:
    """The name of ``known`` closest to ``name``, case aside (``MNIST`` is ``mnist``), if one is close; else None."""
    return next(iter(closest(name, known)), None)
