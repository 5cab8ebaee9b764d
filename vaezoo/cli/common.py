"""Helpers shared by the CLI commands."""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from vaezoo.errors import SharedChange, VaezooError
from vaezoo.store.paths import home_path
from vaezoo.terminal import printable  # noqa: F401  (commands import it from here)

_FLAGS = {"settings": "--set", "owner": "--all", "architecture": "--arch"}
"""The keywords whose flag is not ``--KEYWORD`` (the options' ``dest``)."""


def flag_spelling(keyword: str, value: str) -> str:
    """An argument a library message names (:class:`vaezoo.errors.Phrase`) as the command line spells it: the
    keyword ``max_steps`` as ``--max-steps``, ``resume=True`` as ``--resume``, ``compile=False`` as ``--no-compile``,
    ``epochs=12`` as ``--epochs 12``, ``settings`` as ``--set``."""
    flag = _FLAGS.get(keyword, "--" + keyword.replace("_", "-"))
    if value == "False":  # a flag that goes both ways, such as --compile and --no-compile
        return "--no-" + flag.removeprefix("--")
    return flag if value in ("", "True") else f"{flag} {value}"


def path_arg(value: str) -> str:
    """argparse type of a path given to an option: any text but an empty one, which would mean the current
    folder without saying so (``--out ""`` from an unset shell variable). A leading ``~`` is the home folder, as
    a card's path reads it: the shell leaves it as it is in ``--out=~/runs/x`` and in quotes."""
    import argparse

    if not value.strip():
        raise argparse.ArgumentTypeError("give a path, not an empty string")
    try:
        home_path(value)  # refuses a ~USER of no user
    except VaezooError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return os.path.expanduser(value)


def filter_arg(value: str) -> str:
    """argparse type of what a listing is filtered by (``--dataset``, ``--arch``, ``--latent``): any text but an
    empty one, which would keep every card as if no filter were given (``--dataset "$DATASET"`` of an unset
    variable)."""
    if not value.strip():
        import argparse

        raise argparse.ArgumentTypeError("give a name, not an empty string")
    return value


def whole_arg(value: str) -> int:
    """argparse type of a whole number (a count, a step); what range it must be in, the command says."""
    try:
        return int(value)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"give a whole number, e.g. 10, got '{value}'") from None


def nonnegative_arg(value: str) -> float:
    """argparse type of a finite number >= 0 (a tolerance, a KL in nats)."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 0):
        import argparse

        raise argparse.ArgumentTypeError(f"give a finite number >= 0, e.g. 1e-4, got '{value}'")
    return number


CARD_HELP = ("a zoo name, a card's TOML file, a folder holding one card, PLUGIN:FILE (a card file an installed plugin "
             "ships, such as the recipe methods:recipes/dipvae1-dsprites.toml), or hf-hub:OWNER/REPO[@REVISION]")


def add_card(parser, dest: str = "card", **kwargs) -> None:
    """The positional argument that names a card, spelled and explained alike in every command."""
    parser.add_argument(dest, metavar="CARD", help=CARD_HELP, **kwargs).completer = complete_card


def add_data_root(parser) -> None:
    """``--data-root DIR``, alike in every command that reads a dataset."""
    parser.add_argument("--data-root", type=path_arg, metavar="DIR",
                        help="folder holding the datasets (default: $VAEZOO_DATA, else download)")


def add_device(parser) -> None:
    """``--device``, alike in every command that runs a model."""
    parser.add_argument("--device", type=device_arg,
                        help="cpu, cuda, cuda:1, mps, ... or auto, the first accelerator there is (default: cpu)")


def card_arg(name_or_path: str):
    """A card by zoo name, card file path, folder holding one card, or Hub repository (:func:`vaezoo.get_card`)."""
    from vaezoo.entries.catalog import get_card

    return get_card(name_or_path)


def recorded_path(path: str) -> str:
    """``path`` as a command line recorded on a card names it: relative to the current folder when it is an absolute
    path inside it, as the recorded ``vaezoo train`` part names the card, so that the card records no folder of this
    machine above it (the user's home, a temporary folder), which a copy pushed to the Hub would carry too; a bare
    name as ``./NAME``, which would otherwise name a zoo entry."""
    from pathlib import Path

    if not os.path.isabs(path) or not Path(path).is_relative_to(Path.cwd()):
        return path
    relative = str(Path(path).relative_to(Path.cwd()))
    return relative if os.sep in relative or relative == os.curdir else os.path.join(os.curdir, relative)


def names_arg(value: str) -> list[str]:
    """argparse type of a comma-separated list of names (``--metrics a,b``), each kept once, in order."""
    import argparse

    names = list(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))  # each once
    if not names:
        raise argparse.ArgumentTypeError(f"give names separated by commas, got {value!r}")
    return names


def seed_arg(value: str) -> int:
    """argparse type of ``--seed``: a whole number in [0, 2^63) (:data:`vaezoo.entries.schema.SEED_LIMIT`)."""
    import argparse

    from vaezoo.entries.schema import SEED_LIMIT

    seed = int(value) if value.isascii() and value.isdigit() else -1  # not int()'s "1_000", " 3" or Arabic digits
    if not 0 <= seed < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"give a whole number from 0 to 2^63 - 1 as the seed, got {value!r}")
    return seed


def device_arg(value: str) -> str:
    """argparse type of ``--device``: a device this machine has (:func:`vaezoo.devices.usable_device`), ``auto``
    given as the one it stands for."""
    import argparse

    from vaezoo.devices import usable_device
    from vaezoo.errors import DeviceError

    try:
        device = usable_device(value)
    except DeviceError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return str(device) if value == "auto" else value


def print_data(*values: object, end: str = "\n") -> None:
    """``print`` the command's data on its stdout, where :func:`data_alone_on_stdout` keeps what else prints."""
    print(*values, end=end, file=_data_stdout())


def print_json(data) -> None:
    """Print ``data`` as strict JSON on stdout: a NaN or infinite number (a metric that is not a number) is
    null, as JavaScript's ``JSON.stringify`` writes it, so that every JSON reader takes the output."""
    print_data(json.dumps(_finite_or_null(data), indent=2, allow_nan=False))


def data_alone_on_stdout() -> SharedChange:
    """The change (``with data_alone_on_stdout():``) that runs a command with :func:`print_data` (and
    :func:`print_json`, :func:`print_table`) alone writing to stdout: what else prints there meanwhile (a plugin's
    metric, architecture or converter, a library) goes to stderr, where it stands beside the status lines and no
    script reading the command's data takes it.

    ``sys.stdout`` is the process's: commands run at once in threads, or one inside another, share the change that
    the first made and the last undoes (:class:`~vaezoo.errors.SharedChange`), as a plugin's hooks do.
    """
    from vaezoo.plugins import prints_to_stderr

    return prints_to_stderr


def _data_stdout() -> TextIO:
    """Where the command's data goes: the stdout :func:`data_alone_on_stdout` set aside, else ``sys.stdout``."""
    return data_alone_on_stdout().made or sys.stdout


def _finite_or_null(data):
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite_or_null(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite_or_null(value) for value in data]
    return data


# Off a terminal (a pipe, a file) tables take the width their values need: nothing is cut or wrapped.
UNBOUNDED_WIDTH = 1_000_000_000


def text(value: object, style: str = ""):
    """``value`` as a rich ``Text``, shown as written: escaped (:func:`vaezoo.terminal.printable`), never markup."""
    from rich.text import Text

    return Text(printable(value), style=style)


def print_table(columns: Sequence[str], rows: Iterable[Sequence[object]], title: str | None = None) -> None:
    """Print ``rows`` as a table on stdout, every cell as text (:func:`text`; a rich ``Text`` keeps its style).

    The first column holds what users copy (a name): it is never wrapped or cut. The others wrap between
    words. On a terminal too narrow for the table without breaking a word, each row is printed instead as
    its first cell followed by one ``column  value`` line per other column, or, narrower still, each value on the
    lines below its column's name (on a terminal narrower than a label and one character, lines the terminal
    wraps: no value is cut). Off a terminal (``vaezoo list |
    cat``) the table is as wide as its values, whatever ``COLUMNS`` says, and its title is one line.

    Args:
        columns: the header of each column.
        rows: one value per column for each row.
        title: shown above the table.
    """
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Column, Table
    from rich.text import Text

    cells = [[value if isinstance(value, Text) else text(value) for value in row] for row in rows]
    heading = None if title is None else text(title)
    stdout = _data_stdout()
    # in a Jupyter notebook too the table is text on stdout: rich would put an empty display of its own before it
    console = functools.partial(Console, file=stdout, force_jupyter=False)
    out = console()
    if not (out.is_terminal and stdout.isatty()):  # FORCE_COLOR makes rich take a pipe for one: colours alone
        out = console(width=UNBOUNDED_WIDTH)
        if heading is not None:  # one line however much wider than the table (a checkpoint's path in eval's)
            heading.no_wrap, heading.overflow = True, "ignore"
    else:  # COLUMNS, or the terminal's width where COLUMNS is no width (0); at least a record's label and a character
        label = max(map(len, columns[1:]), default=0)
        out = console(width=max(shutil.get_terminal_size().columns, 2 + label + 2 + 1))
    table = Table(Column(text(columns[0]), no_wrap=True), *(Column(text(c), overflow="fold") for c in columns[1:]),
                  title=heading)
    for row in cells:
        table.add_row(*row)
    with out.capture() as captured:  # printed by Python, so that a closed pipe raises BrokenPipeError
        if Measurement.get(out, out.options.update_width(UNBOUNDED_WIDTH), table).minimum <= out.width:
            out.print(table)
        else:
            _print_records(out, columns, cells, title)
    print_data(captured.get(), end="")


def _print_records(out, columns: Sequence[str], cells: list[list], title: str | None) -> None:
    """Each row as its first cell on a line, then one ``column  value`` line per other column that has a value.

    Where the room beside the labels is narrower than a word of the values (a terminal of 20 or 30 columns), each
    value goes on the lines below its label instead, so that it wraps between words, not a character a line.
    """
    from rich.cells import cell_len
    from rich.padding import Padding
    from rich.table import Column, Table

    if title is not None:
        out.print(text(title))
    records = [[(header, value) for header, value in zip(columns[1:], row[1:]) if value.plain] for row in cells]
    # in the terminal's columns, not characters: a CJK character takes two
    label = max(map(cell_len, columns[1:]), default=0)
    word = max((cell_len(w) for fields in records for _, value in fields for w in value.plain.split()), default=0)
    beside = out.width - (2 + label + 2) >= word
    for n, (row, fields) in enumerate(zip(cells, records, strict=True)):
        if n:
            out.print()
        out.print(row[0], soft_wrap=True)
        if beside:
            grid = Table.grid(Column(no_wrap=True), Column(overflow="fold"), padding=(0, 2))
            for header, value in fields:
                grid.add_row(text(header), value)
            out.print(Padding(grid, (0, 0, 0, 2), expand=False))
            continue
        for header, value in fields:
            out.print(Padding(text(header), (0, 0, 0, 2), expand=False))
            out.print(Padding(value, (0, 0, 0, 4), expand=False))


def complete_card(prefix: str, **_) -> list[str]:
    """The completions of a CARD argument: the zoo names that begin with ``prefix``, then the paths that do of what a
    card may be, folders and ``*.toml`` files (no ``a.png``). The names are those of the card files
    (:func:`vaezoo.entries.catalog.card_file_names`), no card read."""
    from argcomplete.completers import FilesCompleter

    from vaezoo.entries.catalog import card_file_names, natural_key

    names = sorted((name for name in card_file_names() if name.startswith(prefix)), key=natural_key)
    return names + list(FilesCompleter(allowednames=["toml"])(prefix))


def complete_dataset(prefix: str, **_) -> list[str]:
    """The completions of a ``--dataset`` filter: the datasets the card files record that begin with ``prefix`` (a path
    is never one), read off their text (:func:`vaezoo.entries.catalog.card_glances`); a third-party card's dataset
    holding a control character (ESC, a newline) is not sent to the shell."""
    from vaezoo.entries.catalog import card_glances

    return sorted({card.dataset for card in card_glances()
                   if card.dataset is not None and card.dataset.startswith(prefix) and card.dataset.isprintable()})
