"""Name -> object maps that plugins fill through registration callbacks.

Each kind of part (architecture, latent family, regularizer, ...) has one
:class:`Registry`. Plugins never touch a registry directly: the plugin manager
hands each plugin a ``register(name, obj)`` callback bound to the plugin's name,
so a duplicate is refused with a message naming both plugins.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from vaezoo.errors import DuplicateNameError, PluginError, UnknownNameError

COMMANDS = ("list", "info", "plugins", "verify", "train", "eval", "seeds", "convert", "show")
"""The core's own commands, in the order ``vaezoo --help`` lists them: a plugin's command may take none of these
names. Each is a module of :mod:`vaezoo.cli` (the others, ``gallery`` or ``push``, come from plugins, vaezoo's
own extras among them)."""

T = TypeVar("T")


def closest(name: str, candidates: list[str]) -> list[str]:
    """The names of ``candidates`` (at most 3) that ``name`` may have been meant as, case aside (``MIG_CHEN`` is
    ``mig_chen``): those ``name`` begins (``dci`` for ``dci_completeness``, which difflib finds too far), else
    those difflib finds close; none when nothing is close."""
    folded = {c.casefold(): c for c in candidates}
    key = name.casefold()
    begun = sorted(folded[c] for c in folded if len(key) >= 3 and c.startswith(key) and c != key)
    return begun[:3] or [folded[m] for m in difflib.get_close_matches(key, list(folded), n=3, cutoff=0.5)]


def close_matches(name: str, candidates: list[str]) -> str:
    """Return a ' Did you mean ...?' hint, or '' when nothing is close (:func:`closest`)."""
    matches = closest(name, candidates)
    return f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


PART_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
"""What a registered name may be: a card, ``--metrics A,B`` and ``--set METRIC.SETTING=VALUE`` name parts so."""


class Registry(Generic[T]):
    """A typed ``name -> object`` map that refuses duplicate names.

    Args:
        kind: what the registry holds, used in messages ("architecture").
        check: validates an object at registration; returns an error text or None.
        unknown_hint: what an unknown name's message ends with: where such a name could come from.
        name_check: validates a name at registration (a name the kind reserves); returns an error text or None.
    """

    def __init__(self, kind: str, check: Callable[[object], str | None] | None = None, unknown_hint: str = "",
                 name_check: Callable[[str], str | None] | None = None):
        self.kind = kind
        self._check = check
        self._unknown_hint = unknown_hint
        self._name_check = name_check
        self._items: dict[str, tuple[T, str]] = {}

    def register(self, name: str, obj: T, plugin: str) -> None:
        """Add ``obj`` under ``name`` on behalf of ``plugin``."""
        reserved = self._name_check(name) if self._name_check and isinstance(name, str) else None
        if reserved:  # said before the rule of every name, which a kind's own rule may narrow (a command's)
            raise PluginError(f"plugin '{plugin}' registered {self.kind} {name!r}: {reserved}")
        if not isinstance(name, str) or PART_NAME.fullmatch(name) is None:
            raise PluginError(f"plugin '{plugin}' registered a {self.kind} with an invalid name {name!r}: use "
                              f"letters, digits, '_' and '-', from a letter (a card, --metrics A,B and --set "
                              f"METRIC.SETTING=VALUE name parts so)")
        taken = self.taken(name)
        if taken is not None:  # names that differ in case only read as one in a card's layout and in listings
            owner = self._items[taken][1]
            if owner == plugin:
                raise DuplicateNameError(f"plugin '{plugin}' registers {self.kind} '{name}' twice"
                                         + (f" (as '{taken}' too)" if taken != name else "")
                                         + "; report it to its author, or disable it with VAEZOO_LOAD_PLUGINS")
            spelled = f" (as '{taken}')" if taken != name else ""
            raise DuplicateNameError(
                f"{self.kind} '{name}' is registered by both plugin '{owner}'{spelled} and plugin '{plugin}'; "
                f"uninstall one or disable it with VAEZOO_LOAD_PLUGINS"
            )
        problem = self._check(obj) if self._check else None
        if problem:
            raise PluginError(f"plugin '{plugin}' registered {self.kind} '{name}': {problem}")
        self._items[name] = (obj, plugin)

    def taken(self, name: str) -> str | None:
        """The registered name that ``name`` is, but for case: names that differ in case only read as one name in a
        card's layout and in listings, so one of them is refused; None when ``name`` is free."""
        return next((known for known in self._items if known.casefold() == name.casefold()), None)

    def __getitem__(self, name: str) -> T:
        if not isinstance(name, str):
            article = "an" if self.kind[0] in "aeiou" else "a"
            example = next(iter(self._items), "its-name")
            raise TypeError(f"{article} {self.kind} is named by a string, e.g. {example!r}, got {type(name).__name__}")
        try:
            return self._items[name][0]
        except KeyError:
            known = sorted(self._items)
            error = UnknownNameError(
                f"unknown {self.kind} '{name}'.{close_matches(name, known)} Known: {', '.join(known) or 'none'}"
                + (f". {self._unknown_hint}" if self._unknown_hint else ""))
            error.missing = (self.kind, name)
            raise error from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def registered(self) -> list[str]:
        """The names in the order they were registered (iterating gives them sorted)."""
        return list(self._items)

    def plugin_of(self, name: str) -> str:
        """The plugin that registered ``name``."""
        self[name]
        return self._items[name][1]
