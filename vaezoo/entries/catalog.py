"""The catalog of zoo cards: finding them, listing them and resolving a name or a path to one.

Cards live in directories contributed by plugins (``vaezoo_card_dirs``) and in any directory listed in
``VAEZOO_CARDS_PATH`` (``os.pathsep``-separated). A card that cannot be used (it does not parse or validate,
or its name is taken) is skipped with a :class:`CardWarning`, like a broken plugin; the others keep working.
So is an entry of ``VAEZOO_CARDS_PATH`` that is not a folder (once per process).
A name ``hf-hub:OWNER/REPO[@REVISION]`` (:data:`~vaezoo.entries.schema.HUB_PREFIX`) names the card of a Hugging
Face Hub repository, which :func:`get_card` has :mod:`vaezoo.entries.huggingface` download. This module never imports
torch: ``vaezoo list`` reads cards only.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import tomllib
import typing
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, RootModel, ValidationError

from vaezoo.entries.schema import HUB_PREFIX, MAX_NAME, NAME_PATTERN, Card
from vaezoo.errors import CardError, UnknownNameError, VaezooError
from vaezoo.registry import close_matches, closest
from vaezoo.store.files import FILE_KINDS, file_state
from vaezoo.store.limits import MAX_DEPTH, too_deep
from vaezoo.store.paths import home_path
from vaezoo.terminal import counted

MAX_CARD_BYTES = 4 << 20
"""A card file may not be larger: cards are a few kilobytes, and one is read whole."""


class CardWarning(UserWarning):
    """A card was skipped: it does not parse or validate, repeats a name, or is not a regular file; or an entry of
    ``VAEZOO_CARDS_PATH`` was skipped: it is not a folder."""


@dataclass(frozen=True)
class SkippedCard:
    """A card file that discovery left out, and why.

    Attributes:
        path: the file.
        name: the name it declares (its file stem when that cannot be read).
        reason: what is wrong with it, one line.
    """

    path: Path
    name: str
    reason: str


@dataclass(frozen=True)
class Discovery:
    """What :func:`scan` found: the usable cards by name, the files it skipped, and which names are built-in.

    Attributes:
        cards: the usable cards by name.
        skipped: the cards left out, in search order.
        builtin: names of the built-in zoo's entries (cards from plugins of the ``vaezoo`` distribution).
    """

    cards: dict[str, Card]
    skipped: list[SkippedCard]
    builtin: frozenset[str]


class _Unfit(Exception):
    """Why one card file cannot be used (the message, without the file's path)."""


def _read(path: Path) -> dict[str, Any]:
    """The TOML table in ``path``, which must be a regular file: a FIFO or a device is never opened."""
    return _parse(_read_text(path))


def _read_text(path: Path) -> str:
    """The text of the card file ``path``, which must be a regular file: a FIFO or a device is never opened."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: a link to a FIFO is a FIFO
        if not stat.S_ISREG(mode):
            raise _Unfit(f"is {FILE_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a card file")
        # O_NONBLOCK: should the file be swapped for a FIFO after the check, opening it still returns at once
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise _Unfit("is not a regular file, not a card file")
            data = file.read(MAX_CARD_BYTES + 1)  # the file may grow after fstat
    except OSError as exc:
        raise _Unfit(f"cannot read card ({exc.strerror or exc})") from None
    if data[8:10] == b'{"':  # a safetensors file: its header's length, then its JSON header
        raise _Unfit(f"is a safetensors weights file, not a card; give its card ({path.with_suffix('.toml').name}) "
                     f"or the folder holding both")
    if data[:4] == b"PK\x03\x04" or data[:1] == b"\x80":  # torch.save's zip, or a pickle
        raise _Unfit("is a torch.save or pickle file, not a card (TOML); measure a 'vaezoo train' checkpoint with "
                     "'vaezoo eval CARD --checkpoint PATH', and load a whole pickled model with torch.load")
    if not data.strip():  # a card half made by hand, or a file truncated by a full disk: no field is the matter
        raise _Unfit("is an empty file, not a card; write the card's TOML in it ('vaezoo info NAME' prints a zoo "
                     "card's), or give another file")
    if max(info.st_size, len(data)) > MAX_CARD_BYTES:
        raise _Unfit(f"is {max(info.st_size, len(data)):,} bytes, more than the {MAX_CARD_BYTES:,} a card may "
                     f"have; it is not a card file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # an image, an archive: a card is TOML, which is text
        raise _Unfit(f"is not text (its byte {exc.start} is no UTF-8), not a card (TOML); give the card's .toml file "
                     f"or the folder holding it") from None


def _parse(text: str) -> dict[str, Any]:
    """The TOML table of a card file's ``text``, which may start with a byte-order mark (read as 'utf-8-sig' does)."""
    deep = _Unfit(f"nests tables or arrays deeper than {MAX_DEPTH} levels; it is not a card file")
    try:
        raw = tomllib.loads(text.removeprefix("\ufeff"))  # a byte-order mark, as Windows editors write one
    except tomllib.TOMLDecodeError as exc:
        raise _Unfit(f"not valid TOML ({exc})") from None
    except RecursionError:  # tomllib parses nested inline tables and arrays recursively
        raise deep from None
    if too_deep(raw):
        raise deep
    return raw


def _validate(raw: dict[str, Any], path: Path, source: str | None = None) -> Card:
    from vaezoo.plugins import get_plugins

    try:
        card = Card.model_validate(raw, context={"sections": get_plugins().registry("card section"),
                                                 "validate_section": _isolated_section})
    except ValidationError as exc:
        # a misspelt key is also a required one missing: the misspelling, said first, says what to correct
        errors = sorted(exc.errors(), key=lambda err: err["type"] != "extra_forbidden")
        more = f" (and {counted(len(errors) - 1, 'more problem')})" if len(errors) > 1 else ""
        newer = _newer_writer(raw)
        raise _Unfit(f"{_problem(errors[0], bool(newer))}{more}{newer}") from None
    # a download cache may link the file elsewhere: a downloaded card stays where its weights are looked for
    card._path = path.resolve() if source is None else path.absolute()
    card._source = source
    return card


def _problem(err: Any, newer: bool) -> str:
    """One of pydantic's errors of a card, said as a card's author reads it: the field by its dotted name (as a
    repr: keys may hold newlines), an unknown key as no field of its table with the nearest known one (``newer``:
    the card is a newer vaezoo's, whose fields this one need not know), and a validator's words without
    pydantic's ``Value error,`` before them."""
    loc = [str(part) for part in err["loc"]]
    field = ".".join(loc)
    if err["type"] == "extra_forbidden":
        table = f"[{'.'.join(loc[:-1])}]" if len(loc) > 1 else "a card"
        if newer:
            return f"{field!r} is no field of {table} to this vaezoo"
        near = closest(loc[-1], _known_keys(loc[:-1]))
        return (f"{field!r} is no field of {table}" + (f" (did you mean {near[0]!r}?)" if near else "")
                + "; remove it or correct its name")
    message = err["msg"].removeprefix("Value error, ")
    return f"field {field!r}: {message}" if field else message


def _known_keys(loc: list[str]) -> list[str]:
    """The field names of the card's table at ``loc`` (``["metrics", "mig_dlib"]``), a plugin section's too;
    none where no model says."""
    from vaezoo.plugins import get_plugins

    sections = get_plugins().registry("card section")
    model: Any = Card
    if loc and loc[0] not in Card.model_fields and loc[0] in sections:
        model, loc = sections[loc[0]], loc[1:]
    for key in loc:
        if _is_model(model) and issubclass(model, RootModel):  # a table of named tables, as [labels] is
            model = model.model_fields["root"].annotation
        if typing.get_origin(model) in (dict, list):  # the key is a name or a place, as a metric's or a part's
            model = typing.get_args(model)[-1]
            continue
        field = model.model_fields.get(key) if _is_model(model) else None
        if field is None:
            return []
        model = next((a for a in (field.annotation, *typing.get_args(field.annotation))
                      if _is_model(a) or typing.get_origin(a) in (dict, list)), None)
    return list(model.model_fields) if _is_model(model) else []


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _isolated_section(name: str, model: type[BaseModel], value: Any) -> Any:
    """The card section ``name`` of a card, validated by its plugin's ``model`` under the isolation plugin code
    runs in (:meth:`vaezoo.plugins.Plugins.guarded`): a model that raises anything but a validation error, or calls
    ``sys.exit``, marks its plugin failed and makes the card holding the section unusable, naming both; the other
    cards are read as before. A validation error is the card's own, named by its field.

    Raises:
        ValueError: the section is wrong (pydantic's ``ValidationError``), or its model failed.
    """
    from vaezoo.plugins import get_plugins

    plugins = get_plugins()
    plugin = plugins.registry("card section").plugin_of(name)

    def validate() -> Any:
        try:
            return model.model_validate(value)
        except ValidationError as exc:  # the card's content, not the plugin's code
            return exc

    done, result = plugins.guarded(plugin, f"card section {name!r}", validate)
    if not done:
        raise ValueError(f"the card section [{name}] cannot be read: its plugin {plugin!r} failed reading it "
                         f"('vaezoo plugins' says why); fix or update that plugin, or leave it out with "
                         f"VAEZOO_LOAD_PLUGINS")
    if isinstance(result, ValidationError):
        raise result
    return result


def _newer_writer(raw: dict[str, Any]) -> str:
    """Where the card's ``vaezoo_version`` is newer than this vaezoo, the words saying so: a field this version
    does not know is likely one the newer version added."""
    from vaezoo.version import __version__

    written = raw.get("vaezoo_version")
    if newer_release(written):
        return f"; the card was written by vaezoo {written}, newer than this vaezoo {__version__}: upgrade vaezoo"
    return ""


def newer_release(written: object) -> bool:
    """Whether ``written``, the ``vaezoo_version`` a card or a checkpoint records, is a later release than this
    vaezoo (their first three numbers compared); False for anything but such a text."""
    from vaezoo.version import __version__

    def release(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", version.partition("+")[0])[:3])

    return isinstance(written, str) and release(written) > release(__version__)


def parse_card(path: Path, source: str | None = None) -> Card:
    """Read and validate one card file.

    Args:
        path: a TOML file; anything but a regular file (a FIFO, a device) is refused unread.
        source: where a downloaded card file comes from (``hf-hub:OWNER/REPO@COMMIT``); its path is then kept
            as given, not resolved.

    Returns:
        The card, with ``card.path`` set to the resolved file.

    Raises:
        CardError: naming the file and the field.
    """
    return read_card(path, source)[0]


def read_card(path: Path, source: str | None = None) -> tuple[Card, str]:
    """The card in the file ``path`` and the file's text, read once: :func:`parse_card`'s card, with the text
    an update that keeps the file's comments and layout edits.

    Raises:
        CardError: as :func:`parse_card` raises it.
    """
    try:
        text = _read_text(path)
        return _validate(_parse(text), path, source), text
    except _Unfit as exc:
        raise CardError(f"{path}: {exc}") from None


def card_from_text(text: str, path: Path) -> Card:
    """The card that the TOML ``text`` holds, as :func:`parse_card` would read it from a file ``path`` holding it.

    Raises:
        CardError: ``text`` is no valid card.
    """
    try:
        return _validate(_parse(text), path)
    except _Unfit as exc:
        raise CardError(f"{path}: {exc}") from None


def check_card(card: Card) -> None:
    """Refuse ``card`` unless its TOML would load back as it is: a card changed with ``model_copy``, which
    pydantic does not validate, may hold a name that is no card name (``../x``) or a field out of range.

    Raises:
        CardError: naming the card and the field.
    """
    checked_toml(card)


def checked_toml(card: Card) -> str:
    """``card``'s TOML (:meth:`~vaezoo.entries.schema.Card.toml`), checked to load back as ``card``: every card file
    vaezoo writes goes through it (or is checked as :func:`vaezoo.entries.entry.updated_card_text` checks its edit).

    Raises:
        CardError: the text would not load, or would load as another card (a plugin's section whose model does not
            read back what it writes), naming the card and the field.
    """
    try:
        text = card.toml()
    except (TypeError, ValueError) as exc:  # a value TOML has no type for
        raise CardError(f"card {card.name!r} cannot be written as TOML ({exc}); a plugin's card section may hold "
                        f"a value of a type TOML does not have") from None
    try:
        back = _validate(tomllib.loads(text), Path(f"{card.name}.toml"))
    except _Unfit as exc:
        hint = ("a plugin's card section does not read back what it writes; update that plugin" if
                str(exc).startswith("field 'sections") or any(f"field '{name}" in str(exc) for name in card.sections)
                else "change it with Card.model_validate(card.model_dump() | changes), which checks it")
        raise CardError(f"card {card.name!r} would not load back, {exc}; {hint}") from None
    if differs := differences(card, back):
        raise CardError(f"card {card.name!r} would not load back as it is: {', '.join(differs)} would read "
                        f"differently; a plugin's card section may not read back what it writes (update that "
                        f"plugin)")
    return text


def differences(card: Card, back: Card) -> list[str]:
    """The top-level keys of ``card`` that ``back`` (``card`` written and read back) holds otherwise: TOML data as
    :func:`vaezoo.entries.toml_update.same` compares it, a plugin's section as its model compares it too (a set is
    written in the order it iterates in, which the set read back need not keep)."""
    from vaezoo.entries.toml_update import same

    written, read = card.model_dump(exclude_none=True), back.model_dump(exclude_none=True)
    return sorted(key for key in written.keys() | read.keys()
                  if not same(written.get(key), read.get(key))
                  and not (key in card.sections and card.sections[key] == back.sections.get(key)))


def _sources() -> list[tuple[Path, bool]]:
    """Card folders in search order, each once, with whether it is built-in.

    Built-in plugins' folders come first, then other plugins', then ``VAEZOO_CARDS_PATH``'s (those that are
    folders: any other entry is skipped with a :class:`CardWarning`). A folder met
    again under another spelling (a trailing slash, a symlink) is the same folder and is skipped.
    """
    from vaezoo.plugins import get_plugins

    plugins = get_plugins()
    plugin_dirs = [(d, plugins.info[owner].builtin) for owner, d in plugins.card_dirs() if _is_plugin_folder(owner, d)]
    found = sorted(plugin_dirs, key=lambda source: not source[1])  # stable: plugins' order within each group
    found += [(Path(os.path.expanduser(p)), False) for p in os.environ.get("VAEZOO_CARDS_PATH", "").split(os.pathsep)
              if p and _is_folder_entry(p)]
    seen: set[str] = set()
    out = []
    for directory, is_builtin in found:
        key = os.path.normcase(os.path.realpath(directory))
        if key not in seen:
            seen.add(key)
            out.append((directory, is_builtin))
    return out


_warned_entries: set[tuple[str, str]] = set()  # (entry, why): said once per process, not at every lookup


def _is_folder_entry(entry: str) -> bool:
    """Whether the ``VAEZOO_CARDS_PATH`` entry ``entry`` is a folder; if not, a :class:`CardWarning` says why it is
    skipped, the first time only. Checked at each lookup: a folder made later (a run's ``--out``) is then found.
    A leading ``~`` is the home folder, as VAEZOO_HOME and VAEZOO_DATA read it (a shell leaves it in quotes, and a
    ``.env`` file or ``docker run -e`` never expands it); a ``~USER`` of no user is no such folder."""
    folder = os.path.expanduser(entry)
    try:
        mode = os.stat(folder).st_mode
        if stat.S_ISDIR(mode):
            with os.scandir(folder):  # a folder that may not be listed would seem to hold no card
                return True
    except (FileNotFoundError, NotADirectoryError):
        why = f"no such folder; VAEZOO_CARDS_PATH lists folders of cards, separated by '{os.pathsep}'"
    except OSError as exc:
        why = f"it cannot be read ({exc.strerror or exc}); VAEZOO_CARDS_PATH lists folders of cards"
    else:
        if stat.S_ISREG(mode) and entry.endswith(".toml"):
            why = (f"it is a card file, not a folder of cards; list its folder, {Path(folder).parent}, or give the "
                   f"card by its path")
        else:
            kind = "a file" if stat.S_ISREG(mode) else FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")
            why = f"it is {kind}, not a folder of cards; list the folder that holds the cards"
    if (entry, why) not in _warned_entries:
        _warned_entries.add((entry, why))
        warnings.warn(f"VAEZOO_CARDS_PATH entry {entry} skipped: {why}", CardWarning, stacklevel=4)
    return False


def _is_plugin_folder(plugin: str, directory: Path) -> bool:
    """Whether the card folder ``directory`` that ``plugin`` gave (``vaezoo_card_dirs``) is a folder; if not, a
    :class:`CardWarning` says so, the first time only: a package built without its cards (no ``package-data``), or
    a misspelt path, left the plugin's cards out of every listing without a word."""
    if directory.is_dir():
        return True
    why = (f"card folder {directory} of plugin '{plugin}' (vaezoo_card_dirs) skipped: "
           f"{'it is not a folder' if directory.exists() else 'no such folder'}; its cards are not listed: ship the "
           f"folder in the plugin's package (its package-data) or return the folder that holds them")
    if (str(directory), why) not in _warned_entries:
        _warned_entries.add((str(directory), why))
        warnings.warn(why, CardWarning, stacklevel=4)
    return False


def card_dirs() -> list[Path]:
    """Folders searched for cards, each once: built-in plugins', other plugins', then ``VAEZOO_CARDS_PATH``."""
    return [directory for directory, _ in _sources()]


_held_scan: ContextVar[list[Discovery] | None] = ContextVar("vaezoo_one_scan", default=None)
"""The open :func:`one_scan` block's scan, once made; per thread, so that another thread's lookups stay fresh."""


@contextmanager
def one_scan() -> Iterator[None]:
    """Within the block, every :func:`scan` (each lookup of a zoo name, each command recorded on a card) answers with
    what the first one in it found: a command given many names, or writing many runs' cards, reads the card folders
    once, not once per name, which grows as the names times the cards. A card written in the block is not seen by a
    lookup in it; a block inside another is served by the outer one's scan."""
    if _held_scan.get() is not None:
        yield
        return
    token = _held_scan.set([])
    try:
        yield
    finally:
        _held_scan.reset(token)


def scan() -> Discovery:
    """Read every card of every card folder, keeping the usable ones and listing the others; never raises for a card.

    A card is skipped when it cannot be read, parsed or validated, or when an earlier card in search order
    holds its name: a card outside the built-in zoo never shadows a built-in entry. Inside a :func:`one_scan`
    block, the block's first scan.
    """
    held = _held_scan.get()
    if held is None:
        return _scan()
    if not held:
        held.append(_scan())
    return held[0]


def _scan() -> Discovery:
    """:func:`scan`, reading the card folders now."""
    from vaezoo.plugins import get_plugins

    global _scanned
    sections = get_plugins().registry("card section")
    cards: dict[str, Card] = {}
    builtin: set[str] = set()
    skipped: list[SkippedCard] = []
    seen: dict[str, _Scanned] = {}
    for directory, is_builtin in _sources():
        for path in _card_files(directory):
            card = _scan_one(path, sections, seen)
            if isinstance(card, SkippedCard):
                skipped.append(card)
                continue
            if card.name in cards:
                kept = "the built-in zoo entry" if card.name in builtin else "the card found first"
                skipped.append(SkippedCard(Path(path), card.name, f"name '{card.name}' is already taken by "
                                                            f"{cards[card.name].path}; {kept} is kept"))
                continue
            cards[card.name] = card
            if is_builtin:
                builtin.add(card.name)
    _scanned = seen
    return Discovery(cards, skipped, frozenset(builtin))


def _card_files(directory: Path) -> list[str]:
    """The paths of the ``*.toml`` entries of ``directory`` in name order, as ``sorted(directory.glob("*.toml"))``
    lists them (none where it cannot be listed), but as text: a lookup by name lists every card folder, and making
    and sorting a ``Path`` for each of thousands of unchanged cards cost more than looking at the files."""
    try:
        with os.scandir(directory) as entries:
            names = [entry.name for entry in entries if entry.name.endswith(".toml")]
    except OSError:
        return []
    return [os.path.join(directory, name) for name in sorted(names, key=os.path.normcase)]


def card_file_names() -> set[str]:
    """The names the card files of every card folder bear (``NAME.toml`` gives ``NAME``), none of them read: what a
    shell's Tab offers as zoo names, at once however many cards there are (reading and validating each took the
    time of a whole ``vaezoo list`` at every Tab). A card bears its own name wherever vaezoo writes one; a file
    that holds no usable card, or a card named otherwise, is offered by its file's name all the same."""
    return {name for directory in card_dirs() for path in _card_files(directory)
            if re.fullmatch(NAME_PATTERN, name := os.path.basename(path).removesuffix(".toml"))}


_DATASET_LINE = re.compile(r"""^dataset[ \t]*=[ \t]*(?:"([^"\\\n]*)"|'([^'\n]*)')[ \t]*(?:#.*)?$""", re.MULTILINE)
"""A card's ``dataset = "NAME"`` (or ``'NAME'``), as vaezoo writes it: a string without escapes, on its own line."""
_METRIC_TABLE = re.compile(r"^[ \t]*\[[ \t]*metrics[ \t]*\.[ \t]*([A-Za-z0-9_-]+)[ \t]*[.\]]", re.MULTILINE)
"""The header of a card's ``[metrics.NAME]`` table (or of one inside it), its NAME a bare key."""
_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)


class Glance(NamedTuple):
    """What a card file records of its dataset and metrics, read off its text (:func:`card_glances`)."""

    dataset: str | None
    metrics: frozenset[str]


def card_glances() -> Iterator[Glance]:
    """The dataset and metrics each card file of every card folder records, read off its text as vaezoo lays a card
    out (``dataset = "NAME"`` before the first table, a ``[metrics.NAME]`` table for each metric), neither parsed
    as TOML nor validated: what a shell's Tab offers of them, in a fraction of the time parsing thousands of cards
    takes. A card laid out otherwise (its metrics an inline table, a name written with an escape) shows nothing of
    it; a file that is no card may show what it seems to record (the command given it then says why it is none)."""
    for directory in card_dirs():
        for path in _card_files(directory):
            try:
                text = _read_text(Path(path))
            except _Unfit:
                continue
            top = _TABLE.split(text, maxsplit=1)[0]  # the top-level keys stand before the first table
            dataset = _DATASET_LINE.search(top)
            yield Glance(None if dataset is None else dataset[1] if dataset[1] is not None else dataset[2],
                         frozenset(_METRIC_TABLE.findall(text)))


class _Scanned(NamedTuple):
    """A card file as the last scan read it: its ``os.stat`` then, the card sections it was validated with,
    and the card, or why it was skipped."""

    stat: tuple[int, ...]
    sections: object
    card: Card | SkippedCard


_scanned: dict[str, _Scanned] = {}  # a lookup by name scans every folder; an unchanged file is not read again


def _scan_one(path: str, sections: object, seen: dict[str, _Scanned]) -> Card | SkippedCard:
    """The card in ``path``, or why it is skipped: read again only where the file changed since the last scan
    (its device, inode, size, modification or change time) or the plugins' card sections did."""
    try:
        info = os.stat(path)
        now = file_state(info)
    except OSError:
        info = now = None
    last = _scanned.get(path)
    if last is not None and last.stat == now and last.sections is sections:
        seen[path] = last
        return last.card
    file = Path(path)
    name = file.stem
    try:
        raw = _read(file)
        if isinstance(raw.get("name"), str):
            name = raw["name"]
        card: Card | SkippedCard = _validate(raw, file)
    except _Unfit as exc:
        card = SkippedCard(file, name, str(exc))
    if info is not None and stat.S_ISREG(info.st_mode):
        seen[path] = _Scanned(now, sections, card)
    return card


MAX_SKIPPED_SAID = 3
"""Skipped cards warned of one by one; more are one warning, which ``vaezoo list --skipped`` details."""


def _warn(skipped: Iterable[SkippedCard]) -> None:
    """A :class:`CardWarning` for each skipped card, or one for them all where there are more than
    :data:`MAX_SKIPPED_SAID`; attributed to the caller of the public function."""
    skipped = list(skipped)
    if len(skipped) > MAX_SKIPPED_SAID:
        first = skipped[0]
        warnings.warn(f"{len(skipped)} cards skipped, the first {first.path}: {first.reason}; run 'vaezoo list "
                      f"--skipped' to see why each was", CardWarning, stacklevel=3)
        return
    for item in skipped:
        warnings.warn(f"card {item.path} skipped: {item.reason}", CardWarning, stacklevel=3)


def discover() -> dict[str, Card]:
    """Every usable card of every card folder, by name; each skipped card is a :class:`CardWarning`."""
    found = scan()
    _warn(found.skipped)
    return found.cards


def natural_key(name: str) -> list:
    """Sorts names as people do: ``x-2`` before ``x-10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def list_cards(pattern: str | Sequence[str] | None = "*", dataset: str | None = None, architecture: str | None = None,
               where: dict[str, str] | None = None, latent: str | None = None,
               exclude: str | Sequence[str] | None = None) -> list[Card]:
    """Cards whose name matches the shell-style ``pattern``, naturally sorted, optionally filtered.

    Args:
        pattern: shell wildcard on the name (``"jointvae-*"``).
        dataset: keep cards of this dataset.
        architecture: keep cards of this architecture.
        where: ``{key: value}``; a key matches any ``model``/``train`` field whose dotted path ends with it.
        latent: keep cards whose latent has a part of this family (``"categorical"``).
        exclude: leave out the names this shell wildcard, or any of these, matches (``"*-original-*"``).
    """
    return filter_cards(discover().values(), pattern, dataset, architecture, where, latent, exclude)


@dataclass(frozen=True)
class Listing:
    """What ``vaezoo list`` shows: the cards that match, out of what :func:`scan` found.

    Attributes:
        cards: the matching cards, naturally sorted.
        found: what the scan found: every usable card and the skipped ones.
        left_out: installed plugins that ``VAEZOO_LOAD_PLUGINS`` leaves out (their cards are not found).
    """

    cards: list[Card]
    found: Discovery
    left_out: tuple[str, ...]


def listing(pattern: str | Sequence[str] | None = "*", dataset: str | None = None, architecture: str | None = None,
            where: dict[str, str] | None = None, latent: str | None = None,
            exclude: str | Sequence[str] | None = None) -> Listing:
    """The cards :func:`list_cards` keeps for these filters, with what the scan found and skipped."""
    from vaezoo.plugins import get_plugins

    found = scan()
    cards = filter_cards(found.cards.values(), pattern, dataset, architecture, where, latent, exclude)
    return Listing(cards, found, tuple(get_plugins().left_out))


def filter_cards(cards: Iterable[Card], pattern: str | Sequence[str] | None = "*", dataset: str | None = None,
                 architecture: str | None = None, where: dict[str, str] | None = None,
                 latent: str | None = None, exclude: str | Sequence[str] | None = None) -> list[Card]:
    """The ``cards`` that :func:`list_cards` keeps for these filters, naturally sorted; ``pattern`` None keeps
    every name, and a list of patterns the names any of them matches; ``exclude`` leaves out the names any of
    its patterns matches.

    Raises:
        TypeError: ``pattern`` is not a string, a list of strings or None, ``where`` is not a mapping, or
            ``dataset``, ``architecture`` or ``latent`` is neither a string nor None.
        UnknownNameError: no card is kept, and a filter is one no card could pass (a misspelt dataset,
            architecture, family or field): an empty list would read as "no card has that value".
    """
    cards = list(cards)
    patterns, excluded = _patterns("pattern", pattern, ["*"]), _patterns("exclude", exclude, [])
    if where is not None and not isinstance(where, Mapping):
        raise TypeError(f"where takes {{field: value}}, e.g. {{'beta': '6'}}; got {type(where).__name__}")
    for argument, given, example in (("dataset", dataset, "mnist"), ("architecture", architecture, "jointvae"),
                                     ("latent", latent, "categorical")):
        if given is not None and not isinstance(given, str):
            raise TypeError(f"{argument} takes a name, e.g. '{example}', or None; got {type(given).__name__}")
    out = []
    for card in cards:
        if not any(fnmatch.fnmatchcase(card.name, p) for p in patterns) or any(
                fnmatch.fnmatchcase(card.name, p) for p in excluded):
            continue
        if dataset and card.dataset != dataset or architecture and card.architecture != architecture:
            continue
        if where and not all(_matches(card.flat(), k, v) for k, v in where.items()):
            continue
        if latent and latent.lower() not in card.latent_families:
            continue
        out.append(card)
    if not out:
        _check_filters(cards, dataset, architecture, where or {}, latent)
    return sorted(out, key=lambda c: natural_key(c.name))


def _patterns(argument: str, given: str | Sequence[str] | None, default: list[str]) -> list[str]:
    """``given`` shell patterns as a list (``default`` for None)."""
    patterns = default if given is None else [given] if isinstance(given, str) else given
    if not isinstance(patterns, list | tuple) or not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"{argument} takes a shell pattern such as 'jointvae-*', a list of them, or None; "
                        f"got {type(given).__name__}")
    return list(patterns)


def _check_filters(cards: list[Card], dataset: str | None, architecture: str | None, where: Mapping[str, str],
                   latent: str | None) -> None:
    """Refuse a filter that no card of ``cards`` could pass, naming what the cards have."""
    known = {"dataset": ({c.dataset for c in cards}, dataset),
             "architecture": ({c.architecture for c in cards}, architecture),
             "latent": ({f for c in cards for f in c.latent_families}, latent and latent.lower())}
    for keyword, (values, given) in known.items():
        if given and given not in values:
            close = closest(given, sorted(values))
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UnknownNameError.about(f"{{{keyword}}} {{given}}: no card has it{hint}; the cards have {{values}}",
                                         given=given, values=", ".join(sorted(values)) or "none")
    fields = {path for c in cards for path in c.flat()}
    for key in where:
        if not any(path == key or path.endswith("." + key) for path in fields):
            if key in known:  # a card's own field, which --where (the [model] and [train] fields) never reads
                raise UnknownNameError.about(f"{{where}} reads a card's [model] and [train] fields, and {key} is none "
                                             f"of them; filter by the card's {key} with {{{key}:{{value}}}}",
                                             value=where[key])
            raise UnknownNameError.about("{where} {key}: no card has such a field; name one by the end of its dotted "
                                         "path, e.g. beta or optimizer.lr ('vaezoo info NAME' shows a card's fields)",
                                         key=key)


def _matches(flat: dict[str, Any], key: str, wanted: str) -> bool:
    array = _array(wanted)
    for path, value in flat.items():
        if path == key or path.endswith("." + key):
            toml = str(value).lower() if isinstance(value, bool) else None  # true, as the card spells it
            if wanted in (str(value), toml) or _same_number(value, wanted) or (
                    array is not None and isinstance(value, list | tuple) and list(value) == array):
                return True
    return False


def _array(wanted: str) -> list | None:
    """``wanted`` read as a TOML array, as ``--sweep`` reads its values (``[0.5,0.9]`` without the space that
    ``str`` of the card's list has); None when it is none."""
    try:
        value = tomllib.loads(f"v = {wanted}").get("v")
    except tomllib.TOMLDecodeError:
        return None
    return value if isinstance(value, list) else None


def _same_number(value: Any, wanted: str) -> bool:
    try:
        return float(value) == float(wanted)
    except (TypeError, ValueError):
        return False


def _missing(path: str) -> bool:
    """Whether nothing stands at ``path`` (not: the system cannot tell, a name too long)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _hub_hint(text: str) -> None:
    """Refuse, naming the spelling vaezoo reads, a name that is no path here and that was meant for a Hugging Face
    Hub repository (``OWNER/REPO``, timm's old spelling ``hf_hub:OWNER/REPO``, ``HF-HUB:`` in upper case) or for a
    folder (timm's ``local-dir:FOLDER``)."""
    from vaezoo.entries.huggingface import REPO_ID

    prefix, colon, rest = text.partition(":")
    if colon and prefix.lower() == "local-dir":
        raise CardError(f"{text}: no such file or folder; vaezoo names a folder by its path alone: write {rest}")
    repo = rest if colon and prefix.lower() in ("hf_hub", "hf-hub") else text
    if REPO_ID.fullmatch(repo.partition("@")[0]) is not None:
        raise CardError(f"{text}: no such file or folder; for a Hugging Face Hub repository, write "
                        f"{HUB_PREFIX}{repo}")


PLUGIN_FILE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*):([^:/\\].*)", re.DOTALL)
"""``PLUGIN:FILE``, a file of an installed plugin's package (``methods:recipes/dipvae1-dsprites.toml``)."""


def plugin_file(text: str) -> Path | None:
    """The file ``text`` names as ``PLUGIN:FILE``: FILE, a path inside the package of the installed plugin called
    PLUGIN (as ``vaezoo plugins`` lists it), such as one of the recipes a plugin ships; a pip-installed user has no
    checkout path to them. None when ``text`` is not of that form, is a file or folder here, or its PLUGIN is
    neither a loaded plugin's name nor close to one (a path then).

    Raises:
        CardError: PLUGIN is close to a loaded plugin's name but none's, FILE leaves its package, or the package
            holds no such file (the message lists its recipes).
    """
    match = PLUGIN_FILE.fullmatch(text)
    if match is None or os.path.lexists(text):
        return None
    from vaezoo.plugins import get_plugins

    name, file = match.groups()
    plugins = {n: info for n, info in get_plugins().info.items() if info.status == "ok"}
    if name not in plugins:
        if not close_matches(name, list(plugins)):
            return None  # a path, or another library's spelling (hf_hub:, local-dir:) that the path's error names
        raise CardError(f"'{text}' names a file of plugin '{name}', and no plugin loaded is called that; the plugins "
                        f"are {', '.join(sorted(plugins))} (run 'vaezoo plugins')")
    from importlib.util import find_spec

    spec = find_spec(plugins[name].package)
    root = Path(next(iter(spec.submodule_search_locations or ()), "")) if spec else None
    if root is None or not root.is_dir():
        raise CardError(f"plugin '{name}' is no package with files of its own, so '{text}' names none")
    path = root / file
    if Path(file).is_absolute() or ".." in Path(file).parts:
        raise CardError(f"'{file}' is not a path inside plugin '{name}'; give one such as recipes/NAME.toml")
    if not path.is_file():
        recipes = sorted(f"{name}:recipes/{p.name}" for p in (root / "recipes").glob("*.toml"))
        held = f"; its recipes: {', '.join(recipes)}" if recipes else "; it ships no recipes"
        raise CardError(f"plugin '{name}' has no file {file}{held}")
    return path


def looks_like_path(text: str) -> bool:
    """Whether ``text``, as given for a card, is a path: it holds a path separator or ends in ``.toml``."""
    separators = [os.sep] + ([os.altsep] if os.altsep else [])
    return any(s in text for s in separators) or text.endswith(".toml")


def as_path_text(path: str | os.PathLike) -> str:
    """``path`` written so that :func:`get_card` reads it as a path: ``./NAME`` for a bare ``NAME``."""
    text = os.fspath(path)
    return text if looks_like_path(text) else os.path.join(os.curdir, text)


class AmbiguousNameWarning(UserWarning):
    """A name given for a card is both a zoo entry's and a file's or folder's in the current folder."""


def _is_or_holds(path: Path, card_file: Path | None) -> bool:
    """Whether ``path`` is the card file ``card_file``, or the folder holding it: then a name that means both
    the zoo entry and ``path`` means one card."""
    try:
        return card_file is not None and (path.samefile(card_file) or path.samefile(card_file.parent))
    except OSError:
        return False


def _card_at(path: Path) -> Card:
    return _card_in_folder(path) if os.path.isdir(path) else parse_card(path)  # unreadable: parse_card says why


def _card_in_folder(folder: Path) -> Card:
    """The one card in ``folder``; none or several is an error naming what is there."""
    try:
        with os.scandir(folder) as entries:  # as glob("*.toml") lists them, hidden files left out
            tomls = sorted(Path(e.path) for e in entries if e.name.endswith(".toml") and not e.name.startswith("."))
    except OSError as exc:  # a folder that may not be listed would seem to hold no card
        raise CardError(f"folder {folder} cannot be read ({exc.strerror or exc}); give a folder you may read, or "
                        f"the card file's path") from None
    if len(tomls) != 1:
        raise CardError(_no_single_card(folder, tomls))
    return parse_card(tomls[0])


RUN_DEPTH = 2
"""How deep below a folder without a card its runs are looked for: ``seed-N``, ``KEY=VALUE/seed-N``."""


def _no_single_card(folder: Path, tomls: list[Path]) -> str:
    """Why ``folder``, holding the card files ``tomls``, names no card, and what to give instead: the runs in it
    (the folder of ``vaezoo train --seeds`` or ``--sweep``), or the checkpoint of a run not finished yet."""
    if tomls:
        return (f"folder {folder} must hold exactly one card, found {_first_few(p.name for p in tomls)}; give the "
                f"card file's path, or put the folder on VAEZOO_CARDS_PATH to give its cards by name")
    runs = _runs_in(folder, RUN_DEPTH)
    if runs:
        return (f"folder {folder} holds no card of its own but {len(runs)} folder(s) holding one (as 'vaezoo train "
                f"--seeds' or '--sweep' writes its runs): {_first_few(str(folder / run) for run in runs)}; give those")
    if (folder / "checkpoint.pt").is_file():  # vaezoo.entries.checkpoints.CHECKPOINT (this module imports no torch)
        return (f"folder {folder} holds no card yet, only the checkpoint of a run that has not finished: finish it "
                f"with 'vaezoo train CARD --out {folder} --resume', or measure the checkpoint with 'vaezoo eval CARD "
                f"--checkpoint {folder / 'checkpoint.pt'}'")
    return f"folder {folder} must hold exactly one card, found no *.toml file; give the card file's path"


NAMED_FILES = 3
"""Files or folders an error names; a folder of thousands is said to hold that many more, not listed whole."""


def _first_few(names: Iterable[str]) -> str:
    """The first :data:`NAMED_FILES` of ``names`` joined by commas, and how many more there are."""
    names = list(names)
    more = len(names) - NAMED_FILES
    return ", ".join(names[:NAMED_FILES]) + (f" and {more:,} more" if more > 0 else "")


def _runs_in(folder: Path, depth: int) -> list[Path]:
    """The folders below ``folder`` (``depth`` levels at most) that hold a card or a checkpoint, relative to it, in
    natural order; none where the folder cannot be listed."""
    found = []
    try:
        with os.scandir(folder) as entries:
            subfolders = sorted((Path(e.name) for e in entries if not e.name.startswith(".")
                                 and e.is_dir(follow_symlinks=False)), key=lambda p: natural_key(str(p)))
    except OSError:
        return []
    for sub in subfolders:
        inside = folder / sub
        if any(inside.glob("*.toml")) or (inside / "checkpoint.pt").is_file():
            found.append(sub)
        elif depth > 1:
            found += [sub / run for run in _runs_in(inside, depth - 1)]
    return found


def get_card(name_or_path: str | os.PathLike) -> Card:
    """A card by zoo name, by the path of its TOML file, by a folder holding exactly one card, by ``PLUGIN:FILE``, a
    card file of an installed plugin (a recipe it ships, such as ``methods:recipes/dipvae1-dsprites.toml``; see
    :func:`plugin_file`), or by ``hf-hub:OWNER/REPO[@REVISION]``, the card at the root of a Hugging Face Hub
    repository (needs the ``vaezoo[hub]`` extra; see :func:`vaezoo.entries.huggingface.card_file`).

    A zoo name always means the zoo entry, even where the current folder holds a file or folder of that
    name (an :class:`AmbiguousNameWarning` says so; ``./NAME`` names the file). A path means a path when
    it looks like one (:func:`looks_like_path`: a separator or a ``.toml`` ending) or is a
    :class:`os.PathLike`; any other string that is not a zoo name is read as a path if it exists. The
    card's weights file is then looked for beside it. A card asked for by path is read even if a zoo entry
    holds its name.

    Args:
        name_or_path: ``"jointvae-mnist"``, ``"runs/mine/mine.toml"``, ``"runs/mine"`` (``~`` is the home folder),
            ``"methods:recipes/dipvae1-dsprites.toml"`` or ``"hf-hub:me/mine@v1"``.

    Returns:
        The card, a copy of its own: a change to its dicts (``metrics``, ``model``, ...) reaches no later lookup.

    Raises:
        UnknownNameError: no card holds the name (the message lists close matches).
        CardError: the file does not parse or validate, the folder holds no or several cards, the card with
            that name was skipped (the message says why), the name holds a NUL character, or the Hub
            repository's card cannot be had.
        TypeError: ``name_or_path`` is neither a string nor a path.
    """
    if not isinstance(name_or_path, str | os.PathLike):
        held = "; a model's card is model.card" if isinstance(getattr(name_or_path, "card", None), Card) else ""
        raise TypeError(f"a card is named by a string or a path (e.g. 'jointvae-mnist'), not by "
                        f"{type(name_or_path).__name__}{held}")
    if "\0" in os.fspath(name_or_path):
        raise CardError(f"{os.fspath(name_or_path)!r} holds a NUL character, which no name or path can; "
                        f"run 'vaezoo list' for the zoo's names")
    if isinstance(name_or_path, str) and re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", name_or_path):
        raise CardError(f"'{name_or_path}' is a URL; a card is named by a zoo name, a card file, a folder holding "
                        f"one, or {HUB_PREFIX}OWNER/REPO: download the card and its weights into a folder and give "
                        f"that")
    if isinstance(name_or_path, str) and name_or_path.startswith(HUB_PREFIX):
        from vaezoo.entries.huggingface import card_file

        return parse_card(*card_file(name_or_path, MAX_CARD_BYTES))
    if isinstance(name_or_path, str) and (file := plugin_file(name_or_path)) is not None:
        return parse_card(file)
    if not isinstance(name_or_path, str) or looks_like_path(name_or_path):
        path = home_path(name_or_path, "the card")  # '~/runs/x' in the home folder, as a shell reads it
        if isinstance(name_or_path, str) and not name_or_path.endswith(".toml") and _missing(str(path)):
            _hub_hint(name_or_path)
        return _card_at(path)
    name = name_or_path
    found = scan()
    here = os.path.lexists(name)
    if name not in found.cards and here and not any(s.name == name for s in found.skipped):
        return _card_at(Path(name))  # not a zoo name: the file or folder of that name here
    why = None if name in found.cards else next((s for s in found.skipped if s.name == name), None)
    _warn(s for s in found.skipped if s is not why)  # the error below reports ``why`` itself
    local = f"{'folder' if os.path.isdir(name) else 'file'} {as_path_text(name)}"
    if name in found.cards:
        if here and not _is_or_holds(Path(name), found.cards[name].path):
            warnings.warn(f"'{name}' is the zoo entry of {found.cards[name].path}, not the {local} here; "
                          f"write {as_path_text(name)} to use that", AmbiguousNameWarning, stacklevel=2)
        return found.cards[name].model_copy(deep=True)  # the scan's card is kept for the next lookup
    if why is not None:
        hint = f"; write {as_path_text(name)} for the {local} here" if here else ""
        raise CardError(f"card '{name}' in {why.path} was skipped: {why.reason}{hint}")
    raise UnknownNameError(f"no zoo card named {name!r}.{_spelled_otherwise(name, list(found.cards))} "
                           f"Run 'vaezoo list' to see the zoo{_left_out_hint()}")


def read_cards(given: Sequence[Card | str | os.PathLike]) -> list[Card | VaezooError]:
    """The card each of ``given`` names (:func:`get_card`; a :class:`Card` as it is), every name looked up in one
    read of the card folders: a command given several names reports on each (``vaezoo verify``, ``vaezoo eval``).

    Args:
        given: names, paths or cards.

    Returns:
        One item per item of ``given``, in order: its card, or, with several given, the error that names why it
        names no card (an unknown name, a card file that cannot be read).

    Raises:
        VaezooError: with one given, as :func:`get_card` raises.
    """
    read: list[Card | VaezooError] = []
    with one_scan():
        for item in given:
            try:
                read.append(item if isinstance(item, Card) else get_card(item))
            except VaezooError as exc:
                if len(given) == 1:
                    raise
                read.append(exc)
    return read


def _spelled_otherwise(name: str, names: list[str]) -> str:
    """' Did you mean ...?' for an unknown card ``name``: the one zoo name it is but for upper case or the spaces and
    line ends around it, said so (difflib's close matches miss upper case, and name the very same text); else the
    close matches."""
    meant = name.strip().lower()
    if meant != name and meant in names:
        return f" Did you mean {meant!r}? (a card's name is lower case, with nothing around it)"
    return close_matches(name, names)


def no_card_found(consequence: str) -> CardError:
    """The error of a command over the zoo that found no card at all: ``no card found, so CONSEQUENCE``, and why
    (the installed plugins ``VAEZOO_LOAD_PLUGINS`` leaves out, whose cards the zoo's are) or where cards come from.

    Args:
        consequence: what the command therefore did not do, e.g. ``"there is nothing to draw"``.
    """
    from vaezoo.plugins import get_plugins

    left_out = get_plugins().left_out
    return CardError(f"no card found, so {consequence}" + (
        f": VAEZOO_LOAD_PLUGINS leaves out the installed plugins {', '.join(left_out)}; add those whose cards you "
        f"want, or unset it" if left_out else "; put a folder of cards on VAEZOO_CARDS_PATH"))


def _left_out_hint() -> str:
    """Where an unknown card may come from: the installed plugins ``VAEZOO_LOAD_PLUGINS`` leaves out, if any."""
    from vaezoo.plugins import get_plugins

    left_out = get_plugins().left_out
    if not left_out:
        return ""
    return (f"; VAEZOO_LOAD_PLUGINS leaves out the installed plugin(s) {', '.join(left_out)}: add the one that "
            f"provides the card to it, or unset it")


def card_reference(card: Card, where: str | os.PathLike | None = None) -> str:
    """How a command recorded on ``card`` names it, so that the command runs as written: the card's zoo name
    when the zoo finds this very card by it, else where it is (``where``, or the file it was read from).

    Args:
        card: the card.
        where: its file or folder, for a card not read from a file (one about to be written).

    Returns:
        The name, or the path, written so that it reads as one (``./NAME`` for a bare name).
    """
    path = Path(where) if where is not None else card.path
    if card.source is not None:
        return card.source
    if path is None:
        return card.name
    found = scan().cards.get(card.name)
    if found is not None and found.path is not None and _same_file(found.path, path):
        return card.name
    return as_path_text(path)


def _same_file(card_file: Path, where: Path) -> bool:
    """Whether ``where`` (a card file, or the folder holding it) is ``card_file``."""
    where = where / card_file.name if where.is_dir() else where
    return where.resolve() == card_file.resolve()


def new_card_name(name: str, made: str, given: bool = True) -> str:
    """``name`` if a card that vaezoo makes (``made``: "the run's card", "the converted card") may take it.

    Args:
        name: the name.
        made: the card, in words.
        given: the caller gave ``name``, so a name that cannot be is the call's own mistake
            (:meth:`~vaezoo.errors.VaezooError.of_value`); False for a default made of a card's name (``CARD-run``),
            which a card's long name makes too long.

    Raises:
        CardError: it is not a card name, or it is a built-in zoo entry's (the new card would be skipped
            beside the zoo, and ``vaezoo.load(NAME)`` would give the zoo's model); the message names the
            ``name`` argument.
    """
    if not re.fullmatch(NAME_PATTERN, name):
        raise CardError.of_value("{name} '{given}' is not a card name: use lowercase letters and digits joined by "
                                 "'-', '_' or '.'; give {made} one with {name}", given=name, made=made)
    if len(name) > MAX_NAME:
        raise (CardError.of_value if given else CardError.about)(
            ("{name}" if given else "the default name of {made}") + " has {length} characters, more than "
            "the {most} a card name may have (files are named after it); give {made} a shorter one with {name}",
            length=len(name), most=MAX_NAME, made=made)
    if name in scan().builtin:
        raise CardError.about("{name} '{given}' is the name of a built-in zoo entry; give {made} another name with "
                              "{name}", given=name, made=made)
    return name
