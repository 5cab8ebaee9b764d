"""What vaezoo writes to a terminal: text that came from a card, a plugin, a path or an error, made safe to
show (:func:`printable`); status lines that never stop the work they report (:class:`StatusStream`, :func:`note`);
and the progress of long work on stderr (:func:`progress`): a rich bar on a terminal, a plain line every
:data:`PLAIN_INTERVAL` seconds elsewhere, nothing with ``VAEZOO_PROGRESS=0``. stdout carries a command's data and
never gets progress.
"""

from __future__ import annotations

import errno
import re
import shlex
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO

from vaezoo.errors import OutputError, printable, setting_on


_SHELL_ESCAPES = {"\a": r"\a", "\b": r"\b", "\t": r"\t", "\n": r"\n", "\v": r"\v", "\f": r"\f", "\r": r"\r",
                  "\x1b": r"\e", "\\": "\\\\", "'": r"\x27"}
r"""How bash's ``$'...'`` writes a character; ``'`` as ``\x27``, so that the word holds no quote that Python's
:mod:`shlex` would read as the end of its quoting."""


def shell_quote(word: str, *, for_terminal: bool = True) -> str:
    r"""``word`` quoted for a POSIX shell as :func:`shlex.quote` does; a word holding a control character (ESC, a
    newline, a carriage return, BEL) or another non-printable one, as bash's ``$'...'`` with escapes (``\e``,
    ``\n``, ``\x27``), each non-printable character beyond ASCII as its UTF-8 bytes (``\xe2\x80\xae``).

    A command vaezoo prints for a user to run is then plain text, carries no terminal control sequence, and pasted
    into bash gives the program ``word`` exactly; an undecodable byte of a path (a lone surrogate, as
    :func:`os.fsdecode` reads it) is that byte again. For a terminal, a character that stdout's or stderr's encoding
    cannot hold (``PYTHONIOENCODING=ascii``, a latin-1 terminal) is written as its bytes too: the stream would show
    ``é`` as ``\xe9``, which inside ``'...'`` bash reads as four characters.

    Args:
        word: one word of the command, e.g. a path.
        for_terminal: whether the command is printed in this process (escape what its streams cannot hold), rather
            than recorded in a file (a card's command), whose text must not depend on the terminal it was
            written from.

    Returns:
        The word as the shell reads it back.
    """
    shown = _shown if for_terminal else str.isprintable
    if shown(word):
        return shlex.quote(word)
    return "$'" + "".join(_SHELL_ESCAPES.get(c) or (c if shown(c) else _bytes_escaped(c)) for c in word) + "'"


def _shown(text: str) -> bool:
    """Whether ``text`` is printable and both stdout's and stderr's encodings hold it."""
    if not text.isprintable():
        return False
    for stream in (sys.stdout, sys.stderr):
        try:
            text.encode(getattr(stream, "encoding", None) or "utf-8")
        except (UnicodeEncodeError, LookupError):
            return False
    return True


def _bytes_escaped(character: str) -> str:
    r"""``character`` as ``$'...'`` writes its bytes: ``\xHH`` each."""
    try:
        data = character.encode("utf-8", "surrogateescape")  # an undecodable byte of a path is that byte
    except UnicodeEncodeError:  # a lone surrogate no path can hold: its bytes as Python would write them
        data = character.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in data)


def shell_join(words: Iterable[str], *, for_terminal: bool = True) -> str:
    """``words`` as one command line, each :func:`shell_quote`-d (:func:`shlex.join`, control characters escaped),
    for a terminal or for a file as ``for_terminal`` says."""
    return " ".join(shell_quote(word, for_terminal=for_terminal) for word in words)


_MARKDOWN_SPECIAL = set("\\`*_[]<>|&#~")
"""Characters Markdown reads as formatting, a table's cell border, an HTML tag, an entity or a heading."""

_BLOCK_START = re.compile(r"[-+]|\d{1,9}[.)]")
"""What makes a line that begins with it a list item (``- x``, ``+ x``, ``1. x``, ``1) x``) or a thematic break
(``---``): escaped where the text begins, as a card's summary begins a line."""


def markdown_text(value: object) -> str:
    """``value`` as Markdown showing it as written, on one line (:func:`printable`): formatting characters
    escaped, and so is a list marker that begins it; leading spaces, which Markdown drops or reads as a code
    block, are left out."""
    text = "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in printable(value)).lstrip(" ")
    if marker := _BLOCK_START.match(text):
        return f"{text[:marker.end() - 1]}\\{text[marker.end() - 1:]}"
    return text


def printable_lines(text: str) -> str:
    """``text`` with each of its lines made :func:`printable`: its line breaks kept (help, a warning's layout)."""
    return "\n".join(printable(line) for line in text.split("\n"))


_READER_GONE = (errno.EPIPE, errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""The errors of a write to stderr after which :class:`StatusStream` drops the status lines that follow."""


class StatusStream:
    """A stream of status lines (stderr) that goes quiet once nobody reads it, instead of raising.

    A write to a terminal that was closed fails with EIO, to a pipe whose reader ended
    (``vaezoo train ... 2>&1 | head``) with EPIPE, and to a log on a full disk (``2> log``, ``2> /dev/full``) with
    ENOSPC (EDQUOT, EFBIG). Status lines are not the work: a run whose progress cannot be shown any more keeps
    training and writes its checkpoints and card. Other errors still raise.

    Attributes:
        gone: whether a write has found the reader gone (later writes are dropped).
    """

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        self._quietly(self.stream.write, text)
        return len(text)

    def flush(self) -> None:
        self._quietly(self.stream.flush)

    def _quietly(self, call, *args) -> None:
        if self.gone:
            return
        try:
            call(*args)
        except OSError as exc:
            if exc.errno not in _READER_GONE:
                raise
            self.gone = True

    def __getattr__(self, name: str):  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)


class DataStream:
    """A command's data stream (stdout) whose failure to take what is written is said as such.

    A write or a flush that fails (a full disk behind ``> file``, ``> /dev/full``) raises
    :class:`~vaezoo.errors.OutputError` ``cannot write to standard output: REASON``: the system's words alone read
    as if a file the command was given had failed. A reader gone (``| head``, EPIPE) still raises
    :class:`BrokenPipeError`, which :func:`vaezoo.cli.main` ends quietly.
    """

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        return self._said(self.stream.write, text)

    def flush(self) -> None:
        self._said(self.stream.flush)

    @staticmethod
    def _said(call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(f"cannot write to standard output: {exc.strerror or exc}") from exc

    def __getattr__(self, name: str):  # isatty, fileno, encoding, reconfigure...: the stream's own
        return getattr(self.stream, name)


PLAIN_INTERVAL = 10.0
"""Seconds between two plain progress lines when stderr is not a terminal."""


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, singular for one and plural otherwise: ``1 metric``, ``3 metrics``, ``1,200 images``.

    Args:
        count: how many.
        noun: the noun for one.
        plural: the noun for any other count; default ``noun`` with an ``s``.
    """
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def note(line: str) -> None:
    """Say ``line`` on stderr at once: the status of long work (what a run starts, what it waits for).

    Library modules say their status through here, never on stdout; their warnings go through :mod:`warnings`.
    """
    print(printable(line), file=sys.stderr, flush=True)


class Progress:
    """Units of one piece of work done so far; made by :func:`progress`, which shows it.

    Attributes:
        description: what is being done (``"eval jointvae-mnist: losses"``), shown as text, never markup.
        total: the units the work takes, or None when unknown (then a count and a rate are shown).
        unit: what is counted, plural (``"images"``).
        done: units done so far.
    """

    def __init__(self, description: str, total: int | None, unit: str, lines: bool = False) -> None:
        self.description = printable(description)
        self.total = total
        self.unit = unit
        self.done = 0
        self._lines = lines
        self._start = self._last_line = time.monotonic()
        self._row = None  # (rich Progress, task id) on a terminal

    def advance(self, units: int = 1) -> None:
        """Count ``units`` more units done and show the progress if it is time to."""
        self.done += units
        if self._row is not None:
            bar, task = self._row
            bar.update(task, completed=self.done, total=self.total)
        elif self._lines and time.monotonic() - self._last_line >= PLAIN_INTERVAL:
            self._last_line = time.monotonic()
            print(self.line(), file=sys.stderr, flush=True)

    def line(self, finished: bool = False) -> str:
        """The plain progress line: percentage, count and time left, or, ``finished``, the count and time taken
        (only the time when no unit was counted: the work read what earlier work had made)."""
        elapsed = time.monotonic() - self._start
        if finished:
            counted = f"{self.done:,} {self.unit} in " if self.done else "done in "
            return f"{self.description}: {counted}{_duration(elapsed)}"
        if not self.total:
            rate = f", {self.done / elapsed:,.0f} {self.unit}/s" if elapsed > 0 else ""
            return f"{self.description}: {self.done:,} {self.unit}{rate}"
        left = f", {_duration(elapsed * (self.total - self.done) / self.done)} left" if self.done else ""
        done = f"{self.done:,}/{self.total:,} {self.unit}"
        return f"{self.description}: {100 * self.done / self.total:.0f}% ({done}){left}"


_bar = None  # the rich Progress on the terminal while some work shows a bar; nested work adds its own row


@contextmanager
def progress(description: str, total: int | None = None, unit: str = "images") -> Iterator[Progress]:
    """Show the progress of the work done inside the ``with`` block, on stderr.

    Work started inside another's block gets its own row under the outer bar (or its own lines).

    Args:
        description: what is being done; text from cards and plugins is fine (it is escaped).
        total: the units the work takes, or None when unknown.
        unit: what is counted, plural.

    Yields:
        The :class:`Progress`: call ``advance(n)`` as units get done (and set ``total`` when it becomes known).
    """
    global _bar
    if not setting_on("VAEZOO_PROGRESS", default=True):
        yield Progress(description, total, unit)
        return
    if _bar is None and not status_console().is_interactive:
        task = Progress(description, total, unit, lines=True)
        yield task
        print(task.line(finished=True), file=sys.stderr, flush=True)
        return
    task = Progress(description, total, unit)
    if _bar is not None:  # nested work: a row of the outer bar, removed when done
        task._row = (_bar, _bar.add_task(task.description, total=total, unit=unit))
        try:
            yield task
        finally:
            _bar.remove_task(task._row[1])
        return
    with _new_bar() as _bar:
        try:
            task._row = (_bar, _bar.add_task(task.description, total=total, unit=unit))
            yield task
        finally:
            _bar = None


def _new_bar():
    """A rich Progress on stderr; stdout is left alone (it carries data)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    from rich.progress import Progress as Bar

    return Bar(TextColumn("{task.description}", markup=False), BarColumn(), TaskProgressColumn(),
               MofNCompleteColumn(), TextColumn("{task.fields[unit]}", markup=False), TimeElapsedColumn(),
               TimeRemainingColumn(), console=status_console(), redirect_stdout=False)


def status_console():
    """A rich console on stderr for status and progress, interactive (a live bar redrawn in place) only where
    stderr is a terminal that redraws.

    ``FORCE_COLOR`` (which CI services set for coloured logs) makes rich take a pipe or a file for a terminal:
    a live bar there wrote its cursor moves and carriage returns into the log ten times a second, and under
    ``TERM=dumb`` nothing until the work ended. Off a terminal the progress is a plain line every
    :data:`PLAIN_INTERVAL` seconds instead.

    In a Jupyter notebook too the lines go to stderr (``force_jupyter=False``): rich would show each as a display
    of its own, which no ``redirect_stderr`` takes and the cell's stderr does not hold.
    """
    from rich.console import Console

    return Console(stderr=True, force_jupyter=False, force_interactive=None if _is_terminal(sys.stderr) else False)


def _is_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (False for a closed stream, or one without ``isatty``)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _duration(seconds: float) -> str:
    """``seconds`` as ``"0.4 s"``, ``"12 s"``, ``"3 min 5 s"`` or ``"2 h 4 min"``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    seconds = round(seconds)
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
