"""Seed distributions drawn: for each metric with a spread over seeds, each entry's seeds as points with the median
marked, beside the other entries of its dataset (Locatello et al., 2019, compare models this way).

The pictures are small SVG files made from the cards alone (no torch, no data); :mod:`vaezoo.extras.gallery` shows them,
and ``vaezoo gallery DIR --only-seeds`` writes them alone (into ``docs/zoo``, for instance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

from vaezoo.entries.schema import Card
from vaezoo.errors import VaezooError
from vaezoo.terminal import printable

MARK = "vaezoo seed distribution"  # in every SVG written here: a file vaezoo may overwrite
WIDTH, LABEL_WIDTH, ROW, TOP, BOTTOM = 640, 210, 26, 30, 34


@dataclass(frozen=True)
class Strip:
    """One entry's runs of a metric: the finite values by seed, their median (NaN when none is finite), and the seed
    it ships."""

    name: str
    values: tuple[tuple[int, float], ...]
    median: float
    shipped: int
    dropped: int  # runs with a non-finite value, not drawn
    missing: int = 0  # runs that do not record the metric, not drawn

    @property
    def label(self) -> str:
        """The row's name, with the runs it does not draw: ``beta-VAE beta=6 (1 non-finite, 2 not measured)``."""
        left = [f"{count} {why}" for count, why in ((self.dropped, "non-finite"), (self.missing, "not measured"))
                if count]
        return self.name + (f" ({', '.join(left)})" if left else "")


@dataclass(frozen=True)
class SeedPlot:
    """The seed distribution of one metric over the entries of one dataset."""

    dataset: str
    metric: str
    strips: tuple[Strip, ...]

    @property
    def file(self) -> str:
        """The SVG's file name: ``seeds-DATASET-METRIC.svg``."""
        return f"seeds-{_slug(self.dataset)}-{_slug(self.metric)}.svg"

    @property
    def alt(self) -> str:
        """What the picture shows, in words: ``seed distribution of mig_dlib on dsprites``."""
        return f"seed distribution of {self.metric} on {self.dataset}"

    def svg(self) -> str:
        """The picture: one row per entry, its seeds as points, its median as a bar, on a shared axis."""
        values = [v for strip in self.strips for _, v in strip.values] or [0.0]  # rows of non-finite runs alone
        low, high = min(values), max(values)
        if high == low:
            low, high = low - 0.5 * (abs(low) or 1), high + 0.5 * (abs(high) or 1)
        pad = (high - low) * 0.05
        low, high = low - pad, high + pad
        right = WIDTH - 20

        def x(value: float) -> float:
            return LABEL_WIDTH + (value - low) / (high - low) * (right - LABEL_WIDTH)

        height = TOP + ROW * len(self.strips) + BOTTOM
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
               f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{_text(self.alt)}" '
               f'font-family="sans-serif" font-size="13">',
               f"<!-- {MARK} -->", f"<title>{_text(self.alt)}</title>",
               f'<text x="4" y="18" font-weight="bold">{_text(self.metric)} on {_text(self.dataset)}</text>',
               f'<text x="{right}" y="18" text-anchor="end" fill="#555">points: seeds; bar: median; '
               f'ringed: shipped</text>']
        for row, strip in enumerate(self.strips):
            y = TOP + ROW * row + ROW / 2
            out.append(f'<text x="4" y="{y + 4:.1f}">{_text(strip.label)}</text>')
            out.append(f'<line x1="{LABEL_WIDTH}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#ddd"/>')
            if not strip.values:
                continue
            out.append(f'<line x1="{x(strip.median):.1f}" y1="{y - 9:.1f}" x2="{x(strip.median):.1f}" '
                       f'y2="{y + 9:.1f}" stroke="#c0392b" stroke-width="3"><title>median {strip.median:.4g}'
                       f'</title></line>')
            for seed, value in strip.values:
                ring = ' stroke="#000" stroke-width="2"' if seed == strip.shipped else ""
                out.append(f'<circle cx="{x(value):.1f}" cy="{y:.1f}" r="4.5" fill="#2c7fb8" fill-opacity="0.8"'
                           f'{ring}><title>seed {seed}: {value:.4g}</title></circle>')
        axis = TOP + ROW * len(self.strips) + 6
        out.append(f'<line x1="{LABEL_WIDTH}" y1="{axis}" x2="{right}" y2="{axis}" stroke="#333"/>')
        for tick in _ticks(low, high):
            out.append(f'<line x1="{x(tick):.1f}" y1="{axis}" x2="{x(tick):.1f}" y2="{axis + 5}" stroke="#333"/>')
            out.append(f'<text x="{x(tick):.1f}" y="{axis + 19}" text-anchor="middle">{tick:.3g}</text>')
        out.append("</svg>")
        return "\n".join(out) + "\n"


def seed_plots(cards: list[Card]) -> list[SeedPlot]:
    """One :class:`SeedPlot` per dataset and metric that at least one card records a seed spread of, in order.

    Args:
        cards: the cards, e.g. :func:`vaezoo.entries.catalog.list_cards`; each entry keeps their order within a plot.

    Returns:
        The plots, by dataset then metric name; an entry whose runs are all non-finite is left out.
    """
    found: dict[tuple[str, str], list[Strip]] = {}
    for card in cards:
        for metric, recorded in card.metrics.items():
            if recorded.seeds is None:
                continue
            finite = tuple((run.seed, run.value) for run in recorded.seeds.runs if math.isfinite(run.value))
            if finite:
                strip = Strip(card.name, finite, recorded.seeds.median, recorded.seeds.shipped,
                              len(recorded.seeds.runs) - len(finite))
                found.setdefault((card.dataset, metric), []).append(strip)
    return [SeedPlot(dataset, metric, tuple(strips)) for (dataset, metric), strips in sorted(found.items())]


def write_seed_plots(plots: list[SeedPlot], directory: Path) -> list[Path]:
    """Write each plot's SVG into ``directory`` (created if needed); a file of that name that this module did not
    write is refused before anything is written.

    Raises:
        VaezooError: naming the files that are someone else's.
    """
    from vaezoo.store.files import atomic_write

    refuse_foreign_plots(plots, directory)
    paths = []
    for plot in plots:
        atomic_write(directory / plot.file, plot.svg().encode("utf-8"))
        paths.append(directory / plot.file)
    return paths


def refuse_foreign_plots(plots: list[SeedPlot], directory: Path) -> None:
    """Refuse ``directory`` if a file there has the name of one of ``plots`` and is not one this module wrote.

    Raises:
        VaezooError: naming the files that are someone else's.
    """
    foreign = [plot.file for plot in plots if _foreign(directory / plot.file)]
    if foreign:
        raise VaezooError(f"{directory} already holds {', '.join(foreign)}, which vaezoo did not write; give "
                          f"another folder, or move them away")


def _foreign(path: Path) -> bool:
    try:
        return path.exists() and not drawn_here(path.read_bytes())
    except OSError:
        return True


def drawn_here(data: bytes) -> bool:
    """Whether ``data`` is an SVG vaezoo drew (:data:`MARK` near its start): one it may overwrite or remove."""
    return f"<!-- {MARK} -->".encode() in data[:2048]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values between ``low`` and ``high``, about ``count`` of them."""
    step = 10 ** math.floor(math.log10((high - low) / count))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= count:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _text(value: str) -> str:
    """Text of a card or a plugin (a metric named after a plugin's latent part) as the SVG holds it: its control
    characters written as escapes (:func:`~vaezoo.terminal.printable`), which XML does not allow (a browser shows
    no picture of a file holding one), then escaped."""
    return escape(printable(value))


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
