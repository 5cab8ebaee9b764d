"""Text that came from a card, a plugin, a path or an error, made safe to write to a terminal."""

from __future__ import annotations


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
