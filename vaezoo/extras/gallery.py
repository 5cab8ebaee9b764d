"""A static HTML page of every card in the zoo, with its traversal and samples, that opens from disk.

``build_gallery(DIR)`` writes ``DIR/index.html`` and, beside it, two PNG files
per card with weights (``NAME.traverse.png`` and ``NAME.sample.png``) and one SVG
per dataset and metric with a spread over seeds (:mod:`vaezoo.extras.seedplot`). The page
references nothing but those files: no server, script or network is needed.
Card text is HTML-escaped by the template engine (Jinja2 with autoescaping). A gallery cut short (an
error, a Ctrl-C) leaves the folder as it was: the files are drawn in a hidden folder there, then moved in,
the page last. A hidden record (:data:`RECORD`) names the files a gallery wrote, so that the next one removes
those it no longer draws (a card that left the zoo): only those, and only while they hold what was written.

The page fits a 1280-pixel window: leaderboards show full metric names and whole numbers, scrolling sideways
when wide, and mark losses measured under different likelihoods or data (not comparable); commands wrap, a
non-finite value carries its card's note, traversals fold their inactive dimensions, and an overview of thumbnails
opens the page.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from vaezoo.assemble import build_aside, card_dataset, load_model
from vaezoo.context import layout_text
from vaezoo.data import check_data_root
from vaezoo.entries.catalog import list_cards, no_card_found, parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import DataError, OutputError, VaezooError
from vaezoo.extras.leaderboard import LOSSES, leaderboard, shared_metrics
from vaezoo.extras.seedplot import (
    SeedPlot,
    drawn_here,
    refuse_foreign_plots,
    seed_plots,
    write_seed_plots,
)
from vaezoo.store.files import RECORD_LIMIT, WrittenRecord, named_in
from vaezoo.terminal import note, printable, progress, shell_quote

if TYPE_CHECKING:
    import torch

TEMPLATE = "gallery.html"
GENERATOR = "vaezoo gallery"  # in the page's <meta name="generator">: a page vaezoo may overwrite
EARLIER_PAGE = re.compile(rb"<title>vaezoo gallery</title>\n.*\n<header>\n  <h1>vaezoo gallery</h1>\n"
                          rb"  <p>\d+ models? in the zoo, drawn with vaezoo [^<]*</p>\n", re.DOTALL)
"""The head of a page an earlier vaezoo gallery wrote, before its pages carried the generator tag."""
RECORD = ".vaezoo-gallery.json"
"""Beside the page: ``{"files": {NAME: [SHA256, ...]}}``, the files galleries wrote there and what each held."""
SAMPLE_COLUMNS = 10


@dataclass(frozen=True)
class Picture:
    """An image of a card's model, saved beside the page.

    Attributes:
        title: what it shows ("Latent traversal", "Samples").
        file: the PNG's file name, relative to the page.
        caption: how it was made, in words.
        command: the ``vaezoo show`` command that draws it again.
        alt: what it shows, for a reader who cannot see it.
    """

    title: str
    file: str
    caption: str
    command: str
    alt: str


@dataclass(frozen=True)
class Cell:
    """A leaderboard value as shown; the number of its note (a non-finite value's, from its card), if any; and, for
    a likelihood's loss on a board whose cards differ in likelihood or data, the mark of the cards it compares
    with (:attr:`Board.marks`)."""

    text: str
    note: int | None = None
    mark: str = ""


@dataclass(frozen=True)
class Board:
    """What the page shows of one dataset: its leaderboard (when several entries share metrics) and every
    seed distribution of its entries.

    Attributes:
        dataset: the dataset.
        columns: the metrics compared, by their full names; empty without a leaderboard.
        rows: ``(card name, cells)``, best first.
        notes: the notes of the non-finite values, numbered from 1 as the cells refer to them.
        marks: ``(mark, likelihood and data)`` when the cards' losses (:data:`LIKELIHOOD_LOSSES`) are measured
            under different likelihoods or data, which makes them incomparable: a loss compares only with those
            of its mark.
        command: the ``vaezoo leaderboard`` command that prints the table.
        plots: the seed distributions of the dataset's metrics.
    """

    dataset: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]
    notes: tuple[str, ...]
    marks: tuple[tuple[str, str], ...]
    command: str
    plots: tuple[SeedPlot, ...]


REFERENCE = "a Gaussian's prior mean, a categorical part's first category"
"""What the captions say the code of a traversal without data holds (each family's
:meth:`~vaezoo.latents.LatentFamily.reference_code`)."""


@dataclass(frozen=True)
class Entry:
    """One card on the page: the card, its latent layout and its pictures (none without weights)."""

    card: Card
    latent: str
    pictures: tuple[Picture, ...]


def build_gallery(directory: str | Path, data_root=None, use_data: bool = True, device=None, seed: int = 0,
                  steps: int = 10, samples: int = 100, scale: int = 2) -> Path:
    """Write the zoo's gallery page and its images into ``directory``.

    Every discovered card is shown. A card with weights gets a latent traversal
    (rows ordered by KL over test images unless ``use_data`` is False) and
    samples from the prior; a card without weights is shown without images.

    Args:
        directory: where ``index.html`` and the PNG files go (created if needed); an ``index.html`` already
            there must be a gallery vaezoo wrote.
        data_root: where the cards' datasets are (see :func:`vaezoo.data.data_root`).
        use_data: order traversal rows by KL over test images; False draws them without any data.
        device: where to run the models (``"auto"`` too: :func:`vaezoo.devices.usable_device`).
        seed: picks the samples and the test images.
        steps: values per traversal row.
        samples: number of samples per card.
        scale: upscaling of each image tile.

    Returns:
        The path of ``index.html``.

    Raises:
        DeviceError: ``device`` is not one this machine has (checked before anything is drawn).
        DataError: ``data_root`` is not a folder (else every card's pictures would say its data is missing).
        VaezooError: ``directory`` holds an ``index.html`` that is not a vaezoo gallery (checked before anything
            is drawn, so that nothing of the user's is overwritten).
        CardError: no card found at all (an empty page said nothing).
    """
    from vaezoo.devices import usable_device
    from vaezoo.store.checksums import sha256_of
    from vaezoo.store.files import atomic_write, remove_temporaries
    from vaezoo.store.locks import run_lock
    from vaezoo.version import __version__

    device = usable_device(device)
    check_data_root(data_root, missing=True)  # else every card's pictures would say its data is missing
    directory = Path(directory)
    path = directory / "index.html"
    zoo = list_cards()
    cards = [card for card in zoo if _nameable_card(card)]
    _refuse_foreign(directory, cards, _files_of_page(path) | set(WRITTEN.read(directory)))  # before the lock (mkdir)
    with run_lock(directory, "output path"):  # the folder said first: it is the user's argument
        if not zoo:  # an empty page said nothing
            raise no_card_found("there is nothing to draw")
        earlier = WRITTEN.read(directory)
        _refuse_foreign(directory, cards, _files_of_page(path) | set(earlier))  # again: no other gallery writes now
        plots = _nameable(seed_plots(cards))
        refuse_foreign_plots(plots, directory)
        pictures = [f"{card.name}.{kind}.png" for card in cards if card.weights is not None for kind in PICTURES]
        # those a gallery killed while moving its files in left
        remove_temporaries(*(directory / name for name in {*earlier, *pictures, *(p.file for p in plots), path.name,
                                                            RECORD}))
        # a gallery cut short leaves the one there as it was
        with _staging(directory) as stage, named_in(directory, stage):
            write_seed_plots(plots, stage)
            painter = _Painter(stage, data_root, use_data, device, seed, steps, samples, scale)
            painter.load_test_images(cards)  # before the cards' bar, whose time left then measures drawing alone
            entries = []
            with progress("gallery", len(cards), unit="cards") as task:
                for card in cards:
                    try:
                        entries.append(painter.entry(card))
                    except OutputError:  # the folder refuses files (full, read-only): no other card fares better
                        raise
                    except VaezooError as exc:  # this card's own problem: the others are drawn
                        note(f"gallery: card {card.name} ({card.path}) skipped: {exc}")
                    task.advance()
            page = _template().render(entries=entries, boards=_boards(cards, plots), generator=GENERATOR,
                                      version=__version__)
            drawn = {file.name: sha256_of(file) for file in sorted(stage.iterdir())}
            moving = {name: [*earlier.get(name, []), digest] for name, digest in drawn.items()}
            WRITTEN.write(directory, {**earlier, **moving})  # before any file moves in: a gallery cut short names them
            for name in drawn:
                _move(stage / name, directory / name)
            atomic_write(path, page.encode("utf-8"))  # last: the page shows the files moved in before it
        left = WRITTEN.remove_stale(directory, {name: d for name, d in earlier.items() if name not in drawn})
        WRITTEN.write(directory, {name: [digest] for name, digest in drawn.items()} | left)
    return path


NAME_MAX = 255
"""The most bytes a file name may have on the file systems vaezoo writes to (Linux, macOS, Windows)."""


def _nameable_card(card: Card) -> bool:
    """Whether the files drawn of ``card`` can have their names; if not, it is skipped, named on stderr."""
    longest = max((f"{card.name}.{kind}.png" for kind in PICTURES), key=len)
    if len(longest.encode()) <= NAME_MAX:
        return True
    note(f"gallery: card {card.name} ({card.path}) skipped: its picture's file name would be longer than the "
         f"{NAME_MAX} bytes a file name can have")
    return False


def _nameable(plots: list[SeedPlot]) -> list[SeedPlot]:
    """``plots`` but those whose file name would be too long (a card's 300-character dataset) or is an earlier
    plot's (metrics ``a/b`` and ``a-b`` both draw ``seeds-DATASET-a-b.svg``), each named on stderr with its cards:
    one card's field never stops the page, nor overwrites another plot."""
    kept: dict[str, SeedPlot] = {}
    for plot in plots:
        taken = kept.get(plot.file)
        if len(plot.file.encode()) > NAME_MAX:
            why = f"its file name would be longer than the {NAME_MAX} bytes a file name can have"
        elif taken is not None:
            why = (f"its file {plot.file} is that of the seed distribution of {taken.metric} on dataset "
                   f"{taken.dataset!r}")
        else:
            kept[plot.file] = plot
            continue
        names = ", ".join(strip.name for strip in plot.strips)
        note(f"gallery: the seed distribution of {plot.metric} on dataset {plot.dataset!r} (cards {names}) skipped: "
             f"{why}")
    return list(kept.values())


DRAWN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.(traverse|sample)\.png|seeds-[A-Za-z0-9._-]+\.svg")
"""The names of the files a gallery draws: each card's pictures (:data:`PICTURES`) and the seed plots
(:attr:`vaezoo.extras.seedplot.SeedPlot.file`). Nothing else a record names is ever removed (not the page, not
the record, not a user's file)."""


def _drawn_kind(name: str, data: bytes) -> bool:
    """Whether ``data`` is of a kind a gallery draws under ``name``: a PNG, or one of
    :mod:`vaezoo.extras.seedplot`'s SVGs."""
    if name.endswith(".png"):
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    return drawn_here(data)


WRITTEN = WrittenRecord(RECORD, GENERATOR, DRAWN, _drawn_kind)
"""The gallery's :data:`RECORD` of the files it wrote, read, written and pruned as
:class:`vaezoo.store.files.WrittenRecord` does."""


@contextmanager
def _staging(directory: Path) -> Iterator[Path]:
    """A hidden folder in ``directory`` to draw a gallery's files in, removed with what is left in it. Those a
    killed gallery left go first: the caller holds the folder's run lock, so no other gallery uses them."""
    from vaezoo.store.files import temporaries

    for stale in temporaries(directory, ".gallery.", ".tmp"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
    stage = Path(tempfile.mkdtemp(prefix=".gallery.", suffix=".tmp", dir=directory))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _move(drawn: Path, target: Path) -> None:
    """Put the file ``drawn`` at ``target`` as :func:`vaezoo.store.files.atomic_save` writes a file (it refuses a
    folder standing there, and keeps the replaced file's permissions)."""
    from vaezoo.store.files import atomic_save

    atomic_save(target, lambda tmp: os.replace(drawn, tmp))


def build_seed_plots(directory: str | Path) -> list[Path]:
    """Write the seed distribution of every metric with a spread over seeds, one SVG per dataset and metric, into
    ``directory`` (e.g. ``docs/zoo``), from the cards alone: the pictures the gallery shows.

    Returns:
        The SVG files written.

    Raises:
        VaezooError: a file of the same name there is not one vaezoo wrote.
        CardError: no card found at all (nothing was written, and nothing said).
    """
    cards = list_cards()
    if not cards:
        raise no_card_found("there is nothing to draw")
    return write_seed_plots(_nameable(seed_plots(cards)), Path(directory))


PICTURES = ("traverse", "sample")
"""The pictures drawn of each card with weights: ``NAME.KIND.png`` beside the page."""


def _files_of_page(index: Path) -> set[str]:
    """The files the gallery page ``index`` shows (those a gallery wrote); empty when there is no page yet.

    Raises:
        VaezooError: ``index`` exists and is not a page vaezoo gallery wrote.
    """
    try:
        present = index.exists() or index.is_symlink()
    except OSError:  # e.g. a name too long: the page cannot be written there either, and writing names why
        return set()
    if not present:
        return set()
    from vaezoo.store.files import read_beside

    try:
        page = read_beside(index, RECORD_LIMIT) or b""
    except (OSError, VaezooError):  # a link, a FIFO, huge, unreadable: not known to be a gallery
        page = b""
    head = page[:2048]
    if f'<meta name="generator" content="{GENERATOR} '.encode() not in head and not EARLIER_PAGE.search(head):
        raise VaezooError(f"{index} exists and is not a page vaezoo gallery wrote; give a new or empty folder, "
                          f"or move that file away")
    return {unquote(name) for name in re.findall(r'<img src="([^"/]+)"', page.decode("utf-8", "replace"))}


def _refuse_foreign(directory: Path, cards: list[Card], ours: set[str]) -> None:
    """Refuse to draw over a file in ``directory`` that the gallery page there does not show (the user's own)."""
    planned = [f"{card.name}.{kind}.png" for card in cards if card.weights is not None for kind in PICTURES]
    foreign = [name for name in planned if name not in ours and os.path.lexists(directory / name)]
    if foreign:
        raise VaezooError(f"{directory} already holds {', '.join(foreign)}, which vaezoo gallery did not write; "
                          f"give a new or empty folder, or move them away")


def _refuse_a_run(directory: Path) -> None:
    """Refuse a folder holding a card or a checkpoint: a run's or a zoo's, whose files the gallery's would join (a
    TOML file that is no card, such as a project's pyproject.toml, is not one)."""
    try:
        with os.scandir(directory) as entries:
            held = sorted(e.name for e in entries if e.name == "checkpoint.pt"
                          or (e.name.endswith(".toml") and not e.name.startswith(".") and _is_card(Path(e.path))))
    except OSError:  # none there yet, or not a folder: writing says why
        return
    if held:
        raise VaezooError(f"{directory} holds {', '.join(held)}, a run's or a zoo's folder; the gallery's page and "
                          f"pictures go in a folder of their own: give a new one, e.g. {directory / 'gallery'}")


def _is_card(path: Path) -> bool:
    try:
        parse_card(path)
    except VaezooError:
        return False
    return True


@dataclass
class _Painter:
    """Draws each card's pictures into ``directory`` with one set of settings, loading each test split once."""

    directory: Path
    data_root: str | Path | None
    use_data: bool
    device: torch.device | None
    seed: int
    steps: int
    samples: int
    scale: int
    test_images: dict[str, torch.Tensor | DataError] = field(default_factory=dict)

    def load_test_images(self, cards: list[Card]) -> None:
        """Load the test images of every card drawn from data (:meth:`_test_images`), before any is drawn. A card
        whose dataset fails otherwise is left for :meth:`entry` to skip, naming it."""
        for card in cards:
            if self.use_data and card.weights is not None:
                with suppress(VaezooError):
                    self._test_images(card)

    def entry(self, card: Card) -> Entry:
        """``card`` as the page shows it, after drawing its pictures if it has weights."""
        from vaezoo.evaluation import viz

        if card.weights is None:
            return Entry(card, card.latent_text or _latent_layout(card), ())
        model = load_model(card, self.device)
        traversal, traversal_picture = self._traversal(card, model)
        sample_picture = Picture(
            "Samples", f"{card.name}.{PICTURES[1]}.png",
            f"{self.samples} images decoded from codes drawn from the prior (seed {self.seed}), each latent part "
            "from its family's prior (a Gaussian part from N(0, I), a categorical part uniformly).",
            f"vaezoo show {card.name} sample -o {card.name}.sample.png --seed {self.seed} --n {self.samples}",
            f"{self.samples} samples of {card.name} from the prior")
        traversal.save(self.directory / traversal_picture.file, scale=self.scale)
        viz.sample(model, self.samples, seed=self.seed, columns=SAMPLE_COLUMNS).save(
            self.directory / sample_picture.file, scale=self.scale)
        return Entry(card, layout_text(model.latent.layout()), (traversal_picture, sample_picture))

    def _traversal(self, card: Card, model):
        """The traversal of ``model`` and its description, with or without test images."""
        from vaezoo.evaluation import viz

        command = f"vaezoo show {card.name} traverse -o {card.name}.traverse.png --n {self.steps}"
        test_images = self._test_images(card) if self.use_data else None
        if isinstance(test_images, DataError):  # the data is on another machine: draw without it, and say so
            traversal = viz.traverse(model, steps=self.steps)
            order = (f"in the latent's order, drawn without data because {card.train.data.name} is not on the "
                     f"machine that drew this page (its metrics are measured by 'vaezoo eval' where it is); the "
                     f"rest of the code stays at each family's reference code ({REFERENCE})")
            command += " --no-data"
        elif test_images is not None:  # as viz.traverse_dataset draws from the whole split
            traversal, folded = viz.fold_inactive(
                viz.traverse(model, test_images, reference=test_images[0], steps=self.steps), viz.INACTIVE_KL)
            order = (f"ordered by KL averaged over {len(test_images)} test images "
                     f"(seed {self.seed}); the other dimensions stay at the code of the first of them")
            if folded:
                order += (f". {len(folded)} inactive dimension{'s' if len(folded) > 1 else ''} (KL below "
                          f"{viz.INACTIVE_KL:g} nats) folded away: {', '.join(row.label for row in folded)}")
            command += f" --seed {self.seed} --fold-below {viz.INACTIVE_KL:g}"
            if self.data_root is not None:  # the command draws from the data this page was drawn from
                command += f" --data-root {shell_quote(os.fspath(self.data_root), for_terminal=False)}"
        else:
            traversal = viz.traverse(model, steps=self.steps)
            order = f"in the latent's order (drawn without data); the rest of the code stays at each family's " \
                    f"reference code ({REFERENCE})"
            command += " --no-data"
        low, high = viz.DEFAULT_SPAN
        caption = (f"One row per sweep of the latent's families (a Gaussian dimension from {low:g} to {high:g} prior "
                   f"standard deviations around the prior mean, a categorical part through each category, a "
                   f"plugin's family as it defines), labelled with its KL, {order}.")
        return traversal, Picture("Latent traversal", f"{card.name}.{PICTURES[0]}.png", caption, command,
                                  f"latent traversal of {card.name}: {len(traversal.labels)} rows, "
                                  f"{', '.join(traversal.labels)}")

    def _test_images(self, card: Card) -> torch.Tensor | DataError:
        """The test images the card's traversal averages its KL over (:func:`vaezoo.evaluation.viz.data_sample` of
        the card's test split, :data:`~vaezoo.evaluation.viz.KL_IMAGES` of them, drawn with the gallery's seed);
        once per dataset and run, and across runs from :func:`test_images_cache` (a second gallery loads no
        dataset); the error, kept too, when the data is not here."""
        key = _test_images_key(card, self.data_root, self.seed)
        if key not in self.test_images:
            self.test_images[key] = _cached_test_images(card, self.data_root, self.seed, key)
        return self.test_images[key]


def test_images_cache() -> Path:
    """Where galleries keep the test images they drew, between runs: ``test-images`` beside the weights cache
    (:func:`vaezoo.store.downloads.cache_dir`: ``VAEZOO_HOME`` or the user's cache folder)."""
    from vaezoo.store.downloads import cache_dir

    return cache_dir().parent / "test-images"


def _test_images_key(card: Card, data_root, seed: int) -> str:
    """What names a card's test images: its dataset and options, the data folder they are read from, the seed, how
    many and vaezoo's version (a renderer or loader that changes with it)."""
    import hashlib

    from vaezoo.data import data_root as resolved
    from vaezoo.evaluation.viz import KL_IMAGES
    from vaezoo.version import __version__

    folder = os.path.abspath(resolved(data_root).path)
    text = json.dumps([card.train.data.name, card.train.data.options, folder, seed, KL_IMAGES, __version__],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _cached_test_images(card: Card, data_root, seed: int, key: str) -> torch.Tensor | DataError:
    """The test images named ``key``: read from :func:`test_images_cache`, else drawn from the card's test split and
    kept there (an unreadable cached file is drawn again; a cache that cannot be written is said, and the page is
    drawn all the same)."""
    from vaezoo.evaluation.viz import KL_IMAGES, data_sample
    from vaezoo.store.files import atomic_save, folder_problem
    from vaezoo.store.weights import read_safetensors, safetensors_writer

    path = test_images_cache() / f"{key}.safetensors"
    with suppress(VaezooError, KeyError):
        if path.is_file() and not path.is_symlink():
            return read_safetensors(path)["images"]
    try:
        images = data_sample(card_dataset(card, data_root), KL_IMAGES, seed)
    except DataError as exc:
        return exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_save(path, safetensors_writer({"images": images}))
    except (OSError, VaezooError) as exc:  # the system's words, with the folder they are about
        why = (f"cannot write in {path.parent}: {folder_problem(path.parent, exc)}; set VAEZOO_HOME to a folder you "
               f"can write to") if isinstance(exc, OSError) else exc
        note(f"gallery: the test images of {card.train.data.name} are not kept for the next run: {why}")
    return images


LIKELIHOOD_LOSSES = (*LOSSES, "elbo", "importance_log_likelihood")
"""The metrics that are a likelihood of the card's data (with the objective's regularizers): comparable only
between cards of one likelihood on the same data (image size, binarization)."""


def _boards(cards: list[Card], plots: list[SeedPlot]) -> list[Board]:
    """Per dataset: the leaderboard of the metrics its entries share (when it has several) and its seed plots."""
    by_dataset: dict[str, list[Card]] = {}
    for card in cards:
        by_dataset.setdefault(card.dataset, []).append(card)
    boards = []
    for dataset, members in sorted(by_dataset.items()):
        metrics = shared_metrics(members) if len(members) > 1 else []
        its_plots = tuple(plot for plot in plots if plot.dataset == dataset)
        if not metrics and not its_plots:
            continue
        named = {card.name: card for card in members}
        ranked = leaderboard(members, metrics) if metrics else []
        marks = _loss_marks([named[row.name] for row in ranked])
        notes: list[str] = []
        rows = []
        for row in ranked:
            cells = []
            for metric, value in zip(metrics, row.values):
                mark = marks.get(row.name, "") if metric in LIKELIHOOD_LOSSES and value is not None else ""
                note = named[row.name].metrics[metric].note if value is not None else None
                if value is not None and not math.isfinite(value):
                    notes.append(f"{row.name}, {metric} = {value}: {note or 'its card gives no note'}")
                    cells.append(Cell(str(value), len(notes), mark))
                else:
                    cells.append(Cell("" if value is None else f"{value:.4g}", mark=mark))
            rows.append((row.name, tuple(cells)))
        command = f"vaezoo leaderboard {','.join(metrics)} --dataset {dataset}" if metrics else ""
        legend = tuple((mark, measure) for measure, mark in _measures(named[row.name] for row in ranked).items())
        boards.append(Board(dataset, tuple(metrics), tuple(rows), tuple(notes), legend if marks else (), command,
                            its_plots))
    return boards


def _measure(card: Card) -> str:
    """What ``card``'s losses are measured under: its likelihood and its data (name and options)."""
    import inspect

    from vaezoo.model import build_vae

    likelihood = card.model.get("likelihood", inspect.signature(build_vae).parameters["likelihood"].default)
    if isinstance(likelihood, dict):
        likelihood = json.dumps(likelihood, sort_keys=True)
    options = json.dumps(card.train.data.options, sort_keys=True) if card.train.data.options else "no options"
    return f"{likelihood} likelihood on {card.train.data.name} ({options})"


def _measures(cards) -> dict[str, str]:
    """Each distinct :func:`_measure` of ``cards``, in their order, with its mark (a, b, ...)."""
    measures: dict[str, str] = {}
    for card in cards:
        measures.setdefault(_measure(card), chr(ord("a") + len(measures) % 26) * (1 + len(measures) // 26))
    return measures


def _loss_marks(cards: list[Card]) -> dict[str, str]:
    """Each card's mark when ``cards`` are measured under more than one likelihood or data; empty when their
    losses compare."""
    measures = _measures(cards)
    if len(measures) < 2:
        return {}
    return {card.name: measures[_measure(card)] for card in cards}


def _latent_layout(card: Card) -> str:
    """The latent layout of the model ``card`` describes, from a freshly built (untrained) model."""
    return layout_text(build_aside(card).latent.layout())


def _shown(value: object) -> object:
    """A value as the page shows it: text (from a card, a plugin, a path) with its control characters written as
    escapes (:func:`~vaezoo.terminal.printable`), which HTML does not allow; then the template escapes it."""
    return printable(value) if isinstance(value, str) else value


def _template():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("vaezoo.extras", "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, finalize=_shown)
    return env.get_template(TEMPLATE)


def gallery(directory: str | Path, only_seeds: bool = False, data_root=None, use_data: bool = True, device=None,
            seed: int = 0) -> list[Path]:
    """What ``vaezoo gallery DIR`` writes: the page (:func:`build_gallery`), or with ``only_seeds`` the seed
    distributions alone (:func:`build_seed_plots`), from the cards, with no model run.

    Args:
        directory: where the files go.
        only_seeds: write only the seed distributions.
        data_root, use_data, device, seed: as :func:`build_gallery` takes them (``device`` ``"auto"`` too:
            :func:`vaezoo.devices.usable_device`).

    Returns:
        The files to name: the page's ``index.html``, or the seed plots written.
    """
    _refuse_a_run(Path(directory))
    if only_seeds:
        return build_seed_plots(directory)
    return [build_gallery(directory, data_root=data_root, use_data=use_data, device=device, seed=seed)]
