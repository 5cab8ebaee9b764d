"""Exceptions vaezoo raises on bad input. Each message is one line naming the problem and the fix.

A message about the arguments of a call names them through a :class:`Phrase`: ``str(error)`` spells them as the
call's keyword arguments (``max_steps must be at least 1``, ``pass resume=True``), and the CLI, through
:meth:`VaezooError.spelled`, as its options (``--max-steps must be at least 1``, ``pass --resume``).

Warnings vaezoo silences for a moment are silenced with :func:`ignoring`, which threads may use at once, as
any :class:`SharedChange` of the process's state.
"""

from __future__ import annotations

import os
import string
import threading
import warnings
from collections.abc import Callable
from typing import Generic, Self, TypeVar, cast

Spelling = Callable[[str, str], str]
"""How a message spells an argument, given its keyword and the value the message gives it ("" for none)."""


def keyword_spelling(keyword: str, value: str) -> str:
    """An argument as a Python caller writes it: ``max_steps``, ``resume=True``, ``epochs=12``."""
    return f"{keyword}={value}" if value else keyword


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


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message, stripped ('' where it has none): what a one-line error quotes of an
    error raised by code vaezoo does not own (a plugin, torch, a compiler)."""
    return (str(error).strip().splitlines() or [""])[0]


def in_brief(value: object, most: int) -> str:
    """``value`` as an error names it: its repr on one line, cut to ``most`` characters, and its type
    (``array([0, 1]) (ndarray)``)."""
    shown = " ".join(repr(value).split())
    return f"{shown if len(shown) <= most else shown[:most - 3] + '...'} ({type(value).__name__})"


class Phrase:
    """Text that names arguments of a call, spelled when it is shown (:func:`keyword_spelling`, or the CLI's flags).

    ``template`` is a :meth:`str.format` template: a field named in ``values`` shows that value; any other
    names an argument by its keyword, with the value the text gives it, if any, as the field's format
    (``"{max_steps} must be at least 1, got {got}"``; ``"pass {resume:True}"``; ``"pass {epochs:{least}}"``).
    A value that is itself a :class:`Phrase` or a :class:`VaezooError` is spelled as the text holding it.

    Attributes:
        template: the text with its fields.
        values: the values of the fields that are not arguments.
    """

    def __init__(self, template: str, **values: object) -> None:
        self.template = template
        self.values = values

    @property
    def arguments(self) -> list[str]:
        """The keywords of the arguments the text names, in order, each once."""
        fields = (field for _, field, _, _ in string.Formatter().parse(self.template) if field)
        return list(dict.fromkeys(f for f in fields if f not in self.values))

    def spell(self, spelling: Spelling) -> str:
        """The text, with each argument it names spelled by ``spelling``."""
        return self.template.format_map(_Fields(self.values, spelling))

    def __str__(self) -> str:
        return self.spell(keyword_spelling)


class _Fields(dict):
    """The values of a :class:`Phrase`'s fields: its own, spelled when they are phrases, and its arguments'."""

    def __init__(self, values: dict[str, object], spelling: Spelling) -> None:
        super().__init__({key: _spelled(value, spelling) for key, value in values.items()})
        self.spelling = spelling

    def __missing__(self, keyword: str) -> _Argument:
        return _Argument(keyword, self.spelling)


class _Argument:
    """An argument named in a :class:`Phrase`: its field's format is the value the text gives it."""

    def __init__(self, keyword: str, spelling: Spelling) -> None:
        self.keyword = keyword
        self.spelling = spelling

    def __format__(self, value: str) -> str:
        return self.spelling(self.keyword, value)


def _spelled(value: object, spelling: Spelling) -> object:
    if isinstance(value, Phrase):
        return value.spell(spelling)
    if isinstance(value, VaezooError):
        return value.spelled(spelling)
    return value


class VaezooError(Exception):
    """Base class: the CLI prints these as a one-line error and exits non-zero.

    The message is one line of printable text for a Python caller too: a control character or a line break in a
    name it quotes (``from_pretrained("owner/tiny\\n")``) is written as its escape (:func:`printable`).

    Attributes:
        phrase: the message, when it names arguments of the call (made by :meth:`about`), else None.
        option: the keyword of the argument the problem is about (the first the message names), or None.
        usage: the call itself is wrong, whatever the files, cards and machine (made by :meth:`of_value`): the CLI
            ends it with exit code 2, as argparse's usage errors, where any other ends with 1.
    """

    phrase: Phrase | None = None
    option: str | None = None
    usage: bool = False

    def __init__(self, *args: object) -> None:
        super().__init__(*(printable(arg) if isinstance(arg, str) else arg for arg in args))

    @classmethod
    def about(cls, template: str, **values: object) -> Self:
        """An error whose message names arguments of the call: ``Phrase(template, **values)``.

        Example: ``TrainingError.about("{max_steps} must be at least 1, got {got}", got=0)`` reads
        ``max_steps must be at least 1, got 0``, and in the CLI ``--max-steps must be at least 1, got 0``.
        """
        phrase = Phrase(template, **values)
        error = cls(str(phrase))
        error.phrase = phrase
        error.option = next(iter(phrase.arguments), None)
        return error

    @classmethod
    def of_value(cls, template: str, **values: object) -> Self:
        """An error of a value given to the call that the call alone shows wrong (out of its range, of the wrong
        form, or two values that exclude each other), as :meth:`about`, marked :attr:`usage`.

        Example: ``TrainingError.of_value("{max_steps} must be at least 1, got {got}", got=0)``: in the CLI
        ``error: --max-steps must be at least 1, got 0`` and exit code 2.
        """
        error = cls.about(template, **values)
        error.usage = True
        return error

    def spelled(self, spelling: Spelling) -> str:
        """The message, with the arguments it names spelled by ``spelling`` (as ``str(error)`` when it names none)."""
        if self.phrase is None:
            return str(self)
        return printable(self.phrase.spell(spelling))


class UnknownNameError(VaezooError, KeyError):
    """A name that no registry or card holds."""

    missing: tuple[str, str] | None = None
    """The part no plugin registers, ``(kind, name)``, when a registry lookup raised it."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DuplicateNameError(VaezooError):
    """Two plugins (or two cards) claim one name."""


class CardError(VaezooError):
    """A zoo card that cannot be read or does not validate."""


class WeightsError(VaezooError):
    """A weights file that is missing, does not verify, or does not fit its model."""


class PluginError(VaezooError):
    """A plugin broke a rule of the hook it implements."""


class InstallError(VaezooError):
    """pip could not install or uninstall plugins in vaezoo's environment (missing, failed, or asked to remove
    vaezoo itself)."""


class DataError(VaezooError):
    """A dataset that cannot be found or read."""


class TrainingError(VaezooError):
    """A training run that cannot go on (NaN loss, bad checkpoint)."""


class OutputError(VaezooError):
    """A file vaezoo was asked to write that cannot be written where it was asked."""


class DeviceError(VaezooError):
    """A device that is not one, or that this machine does not have."""


class DtypeError(VaezooError, TypeError):
    """A dtype a model's parameters cannot take (not one of float32, float64, float16, bfloat16)."""


class InputError(VaezooError):
    """Images that are not what a model takes (shape, channels, type or value range)."""


class MetricError(VaezooError):
    """A metric a model cannot serve (its latent, likelihood or dataset lacks what the metric needs)."""


class LatentError(VaezooError, NotImplementedError):
    """A part asked a latent family's posterior for what the family does not define (e.g. a density)."""


class TrainingWarning(UserWarning):
    """A training run that goes on, but not quite as asked (its sampling noise reseeded on resume, its step run
    eagerly rather than as a captured CUDA graph)."""


class RecipeWarning(UserWarning):
    """Something made from a recipe that records none (a checkpoint or run an older vaezoo wrote), taken as made from
    the card's recipe since it cannot be checked against it."""


class PublishWarning(UserWarning):
    """A finished run's card written without something that failed: a metric, or the label matching."""


ON = ("1", "on", "yes", "true")
"""The values of an on/off environment variable that turn it on, in any case (as huggingface_hub reads its own)."""
OFF = ("", "0", "off", "no", "false")
"""Those that turn it off."""


def setting_on(name: str, default: bool = False) -> bool:
    """Whether the on/off environment variable ``name`` (``VAEZOO_OFFLINE``, ...) is on: :data:`ON` or
    :data:`OFF`, in any case; ``default`` when it is unset.

    Raises:
        VaezooError: it is set to neither (``VAEZOO_OFFLINE=maybe`` would otherwise mean off, and go online).
    """
    value = os.environ.get(name)
    if value is None:
        return default
    if value.strip().lower() in ON:
        return True
    if value.strip().lower() in OFF:
        return False
    raise VaezooError(f"{name}={value!r} is neither on nor off; set it to 1 (or yes, true, on) or 0 (or no, false, "
                      f"off), or unset it")


SWITCHES = ("VAEZOO_OFFLINE", "VAEZOO_ALLOW_HTTP", "VAEZOO_PROGRESS", "HF_HUB_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS")
"""The on/off environment variables a vaezoo command may read (huggingface_hub's two through it)."""


def check_switches() -> None:
    """Refuse an on/off variable of :data:`SWITCHES` set to neither on nor off before a command does anything: each
    is read only where it matters (a download, a progress line), so ``VAEZOO_OFFLINE=maybe vaezoo list`` passed and
    the mistake showed only later, in another command (huggingface_hub takes any word but its on words for off).

    Raises:
        VaezooError: one of them is malformed, naming it, its value and the accepted words.
    """
    for name in SWITCHES:
        setting_on(name)


M = TypeVar("M")


class SharedChange(Generic[M]):
    """A change to the process's state (a warning filter, ``sys.stdout``, ``__main__``'s names) made for blocks
    that several threads may be in at once (``with change:``): the first block makes it, the last one undoes it,
    and a block that begins while another's is under way neither makes it again nor has it undone early. (Saving
    and restoring the state per block, two threads undid each other, and the one that ended last left its change
    in place for good.)

    Args:
        make: makes the change; what it returns is given to ``undo``.
        undo: undoes it.
    """

    def __init__(self, make: Callable[[], M], undo: Callable[[M], None]):
        self._make, self._undo = make, undo
        self._lock = threading.Lock()
        self._blocks = 0
        self._made: M | None = None

    @property
    def made(self) -> M | None:
        """What ``make`` returned, while a block is in the change; None when none is."""
        return self._made

    def __enter__(self) -> None:
        with self._lock:
            if not self._blocks:
                self._made = self._make()
            self._blocks += 1

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._blocks -= 1
            if not self._blocks:
                self._undo(cast(M, self._made))
                self._made = None


_ignored: dict[type[Warning], SharedChange] = {}
_ignored_lock = threading.Lock()


def ignoring(category: type[Warning] = Warning) -> SharedChange:
    """Ignore the warnings of ``category`` (its subclasses too) within the block (``with ignoring(C):``).

    Unlike :class:`warnings.catch_warnings`, which puts back the whole list of filters it found, threads may be in
    such blocks at once (a long-lived process evaluating checkpoints on 8 threads was left ignoring every warning):
    the filter goes in with the first block of its category and out with the last, and the filters added meanwhile
    (by the caller, another thread, an import) stay. Python's filters are the process's: while a block runs, a
    warning of ``category`` from any thread is ignored. A filter ignoring ``category`` that was there before the
    first block stays after the last.
    """
    entry = ("ignore", None, category, None, 0)

    def make() -> bool:
        if entry in warnings.filters:
            return False
        warnings.filterwarnings("ignore", category=category)
        return True

    def undo(added: object) -> None:
        if added and entry in warnings.filters:  # warnings.resetwarnings() may have removed it meanwhile
            # an ignored warning is never noted in a module's registry, so no cached decision outlives it
            warnings.filters.remove(entry)

    with _ignored_lock:
        return _ignored.setdefault(category, SharedChange(make, undo))
