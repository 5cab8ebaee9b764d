"""What vaezoo writes to a terminal: text that came from a card, a plugin, a path or an error, made safe to
show (:func:`printable`), and status lines that never stop the work they report (:class:`StatusStream`)."""

from __future__ import annotations

import errno
from typing import TextIO


def printable(value: object) -> str:
    """``str(value)`` with every non-printable character written as its Python escape (``\\x1b``, ``\\r``, ``\\n``).

    Control characters (ESC sequences, carriage return, backspace, BEL), line and paragraph separators and
    invisible format characters (bidirectional overrides) would otherwise move the cursor, rewrite what is
    already shown, break one line into several or retitle the terminal; escaped, they show as themselves.

    Args:
        value: anything; it is turned into text with ``str``.

    Returns:
        The text, on one line, with only printable characters.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


class StatusStream:
    """A stream of status lines (stderr) that goes quiet once nobody reads it, instead of raising.

    A write to a terminal that was closed fails with EIO, and to a pipe whose reader ended
    (``vaezoo train ... 2>&1 | head``) with EPIPE. Status lines are not the work: a run whose progress
    cannot be shown any more keeps training and writes its checkpoints and card. Other errors still raise.

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
            if exc.errno not in (errno.EPIPE, errno.EIO):
                raise
            self.gone = True

    def __getattr__(self, name: str):  # isatty, fileno, encoding, ...: the stream's own
        return getattr(self.stream, name)
