"""Updating the text of a TOML file to hold new data while keeping what did not change.

A card file edited by hand has comments, an order of keys and a format of its own (inline tables, literal strings,
dotted keys). :func:`updated_text` changes only what differs between the data the text held and the data it is to
hold: values that changed are replaced (a comment beside one stays), keys that went away are removed, new keys and
tables are added, and every other line is kept as it was. It edits the text with tomlkit, which keeps a document's
comments and layout; :func:`vaezoo.entries.entry.update_card` checks what it returns before writing it. A key
added to a table goes where tomlkit puts it: after the table's last line, below a comment that ends the table's
lines (one written above the next table, say).

Three things keep the user's text where tomlkit alone would not: a file whose lines end in CRLF gets CRLF on the
lines the edit adds too (:func:`with_line_ends`), never a mix; a file that starts with a byte-order mark keeps it (as
:func:`with_line_ends` writes it); and a table written as dotted keys (``metrics.mig.value = 1`` among top-level keys)
takes a new key as one more dotted line after its last one, never as a ``[table]`` header dropped among those lines
(which would take the keys after it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, MutableMapping
from typing import Any

import tomlkit
from tomlkit.items import AoT, Array, InlineTable, Item, Table


def updated_text(text: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """``text``, a TOML document holding ``old``, edited to hold ``new``.

    Args:
        text: the document.
        old: the data ``text`` holds, as the program reads it (values of ``text`` that stand for the same data in
            another form, such as an integer for a float, are kept as they are when ``old`` and ``new`` agree).
        new: the data to write.

    Returns:
        The edited document; ``text`` itself where ``new`` is ``old``.

    Raises:
        tomlkit.exceptions.TOMLKitError: tomlkit cannot parse ``text`` or make an edit.
    """
    document = tomlkit.parse(text.removeprefix(BOM))
    _merge(document, old, new, dotted=False)
    edited = document.as_string()
    edited = edited.rstrip("\r\n") + text[len(text.rstrip("\r\n")):]  # a new last table ends as the file did
    return with_line_ends(edited, text)


BOM = "\ufeff"
"""The byte-order mark a card file may start with (Windows editors write one): read past, and kept on rewrite."""


def with_line_ends(text: str, like: str) -> str:
    """``text`` with its lines ending as ``like``'s first line does: every line break CRLF where that one is
    CRLF, ``text`` as it is otherwise (a TOML reader reads a multi-line string's CRLF as LF, so values stay); and
    starting with a byte-order mark (:data:`BOM`) where ``like`` does."""
    first = like.find("\n")
    text = re.sub(r"\r?\n", "\r\n", text) if first > 0 and like[first - 1] == "\r" else text
    return BOM + text.removeprefix(BOM) if like.startswith(BOM) else text


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same TOML data: the same types, NaN equal to NaN, tables in any order."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


_ABSENT = object()


def _merge(table: MutableMapping[str, Any], old: Mapping[str, Any], new: Mapping[str, Any], dotted: bool) -> None:
    """Edit ``table`` (a tomlkit document or table holding ``old``; ``dotted``: written as dotted keys) to hold
    ``new``."""
    for key in [key for key in table if key not in new]:
        del table[key]
    for key, value in new.items():
        was = old.get(key, _ABSENT)
        if same(was, value):  # kept as the text states it, or leaves it out (a default)
            continue
        current = table[key] if key in table else None
        if isinstance(value, dict) and isinstance(current, MutableMapping):
            _merge(current, was if isinstance(was, dict) else {}, value, _written_dotted(table, key))
        elif dotted and current is None:  # one more dotted line, after the table's last one
            _parts(table)[-1][key] = _item(value, None, True)
        else:
            table[key] = _item(value, current, isinstance(table, InlineTable))


def _parts(table: MutableMapping[str, Any]) -> list[Any]:
    """The tables, in the file's order, that make up ``table``: one, or those of a table whose keys are spread
    over the file (tomlkit's proxy of such a table keeps them as ``_tables``; it adds a new key to the first)."""
    return list(getattr(table, "_tables", None) or [table])


def _written_dotted(table: MutableMapping[str, Any], key: str) -> bool:
    """Whether ``key``'s table is written in ``table`` only as dotted keys (``key.x = 1``), with no header."""
    keys = [name for part in _parts(table) if isinstance(part, Table | tomlkit.TOMLDocument)
            for name, _ in (part.body if isinstance(part, tomlkit.TOMLDocument) else part.value.body)
            if name is not None and name.key == key]
    return bool(keys) and all(name.is_dotted() for name in keys)


def _item(value: Any, current: Item | None, in_inline: bool) -> Item:
    """The tomlkit item of ``value`` that replaces ``current`` (None: a new key) in a table, inline or not.

    A value among keys (in an inline table, among dotted keys, or in place of a value that is no table) is written
    inline: a ``[table]`` header there would take the keys after it. An array keeps ``current``'s lines; a new
    table ends with a blank line, as it may be added before other tables.
    """
    inline = in_inline or (current is not None and not isinstance(current, Table | AoT))
    item = _inline(value) if inline else tomlkit.item(value)
    if isinstance(item, Array) and isinstance(current, Array) and "\n" in current.as_string():
        item.multiline(True)
    if isinstance(item, Table) and current is None:
        item.add(tomlkit.nl())
    return item


def _inline(value: Any) -> Item:
    """``value`` as an item written on one line: tables as inline tables, at every depth."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, part in value.items():
            table[key] = _inline(part)
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(_inline(part) for part in value)
        return array
    return tomlkit.item(value)
