"""What a part is given and what it may take: the facts of the data and a way to build its sub-parts
(:class:`BuildContext`); the one reduction every loss term uses (:func:`batch_mean`); and whether a card's
free-form table fits the signature of the callable it is handed to (:func:`check_arguments`).

A card's ``[model]`` table, its sub-part specs (regularizers, nets, latents) and its dataset options are
keyword arguments of a builder, a part's class or a dataset that a plugin registered. :func:`check_arguments`
refuses, in one line naming the argument, a key the callable does not take and a value whose type is not
the one the callable's annotation states (``beta = "high"`` where it takes a ``float``), or that is outside
the bounds an ``Annotated`` annotation gives it with :mod:`annotated_types` (``samples: Annotated[int, Ge(1)]``
refuses ``samples = 0``), so the value never reaches the code.
"""

from __future__ import annotations

import collections.abc
import inspect
import operator
import os
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from torch import Tensor

FACTS = ("image_size", "channels", "dataset_size", "factor_names", "code_size", "part_sizes")
"""The facts of the data (and, for the parts built after the latent, of the latent) a builder or part may take as
arguments of these names."""


@dataclass(frozen=True)
class BuildContext:
    """Handed to builders and parts by :mod:`vaezoo.assemble`, the only module that looks names up.

    A part that needs a fact of the data takes an argument of that name (``image_size``,
    ``channels``, ``dataset_size``, ``factor_names``) and receives it from here, so cards do not
    restate what the dataset knows. A composite part (an architecture, a joint latent) takes a
    ``context`` argument and builds its sub-parts with :meth:`build`.

    A part built once the latent is (a regularizer) is also told the latent's sizes, ``code_size`` and
    ``part_sizes``, so that a network of its own (FactorVAE's discriminator) fits the code without the card
    stating its size twice.

    Attributes:
        builder: ``builder(kind, spec, context)`` -> the part; :meth:`build` calls it with this context.
        image_size: height and width of the input images.
        channels: channels of the input images.
        dataset_size: images in the training split.
        factor_names: the dataset's ground-truth factors, in order; () when it has none.
        code_size: the size of the model's code (the latent's ``code_size``), for parts built after the latent.
        part_sizes: each latent part's size in the code, by name, as ``code_size``.
    """

    builder: Callable[[str, Any, BuildContext], Any]
    image_size: int | None = None
    channels: int | None = None
    dataset_size: int | None = None
    factor_names: tuple[str, ...] = ()
    code_size: int | None = None
    part_sizes: Mapping[str, int] | None = None

    def build(self, kind: str, spec: Any) -> Any:
        """The part ``spec`` describes, e.g. ``build("latent family", {"type": "gaussian", "dim": 10})``."""
        return self.builder(kind, spec, self)

    def facts(self) -> dict[str, Any]:
        """The facts this context knows, by argument name."""
        values = {name: getattr(self, name) for name in FACTS}
        return {name: value for name, value in values.items() if value not in (None, ())}


def batch_mean(t: Tensor) -> Tensor:
    """Sum over every dimension but the first (pixels, latent dimensions), then average over the batch.

    Every loss term in vaezoo (reconstruction, KL, capacity, TC) is reduced
    here, so all terms are "per example, summed over its dimensions".
    """
    return t.reshape(t.shape[0], -1).sum(1).mean()


def whole_number(value: object) -> int | None:
    """``value`` as an int when it is a whole number: an int, a numpy integer or a 0-d integer tensor, not a bool
    (nor a bool tensor, which ``operator.index`` takes as 0 or 1, nor a tensor of one element, which it takes as
    that element); else None (the caller says what it takes)."""
    if isinstance(value, bool) or str(getattr(value, "dtype", "")) == "torch.bool" or getattr(value, "ndim", 0):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def truth_value(value: object) -> bool | None:
    """``value`` as a bool when it is one: True or False, numpy's ``np.True_`` and ``np.False_``, a 0-d bool tensor;
    else None (a number is none: 1 is no True)."""
    if isinstance(value, bool):
        return value
    is_bool = str(getattr(value, "dtype", "")) in ("bool", "torch.bool") and getattr(value, "ndim", None) == 0
    return bool(value) if is_bool else None


def real_number(value: object) -> float | int | None:
    """``value`` as a Python number when it is a real one: an int or a float as it is, a whole number
    (:func:`whole_number`) as an int, a numpy floating scalar or a 0-d floating tensor as a float; else None (a bool,
    text, an array or a tensor of more than one element)."""
    if type(value) is float or whole_number(value) is not None:
        return value if type(value) is float else whole_number(value)
    dtype = getattr(value, "dtype", None)
    floating = getattr(dtype, "kind", None) == "f" or getattr(dtype, "is_floating_point", False) is True
    return float(value) if floating and getattr(value, "ndim", None) == 0 else None


def check_arguments(func: Callable, arguments: Mapping[str, Any], subject: str,
                    skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Refuse ``arguments`` unless ``func`` takes each of them, with a value of its annotated type.

    Annotations that cannot be resolved or checked (a class the value is not an instance of counts as
    checkable) let any value through. Bounds are checked where the annotation states them
    (``Annotated[int, annotated_types.Interval(ge=1, le=100)]``); elsewhere ``func`` checks the ranges itself.
    Where an annotation takes an int (or a float), a whole number of another type is taken too
    (:func:`whole_number`: a numpy integer, a 0-d integer tensor), and handed on as the int it is; where it takes a
    float, a numpy floating scalar or a 0-d floating tensor too, handed on as a float (:func:`real_number`); where it
    takes a bool, numpy's and a 0-d bool tensor, handed on as a bool (:func:`truth_value`).

    Args:
        func: a function or class.
        arguments: the keyword arguments it is to be called with.
        subject: names the callable in messages (e.g. ``"regularizer 'beta'"``).
        skip: arguments vaezoo fills in itself (the facts of the data, ``context``), left unchecked.

    Returns:
        ``arguments``, each number or truth value taken for an int, a float or a bool as a Python one (so that a
        card or a recipe written from them holds plain values); the others as given.

    Raises:
        ValueError: one line naming the first argument that does not fit, and what ``func`` takes.
    """
    signature = inspect.signature(func)
    params = signature.parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    accepted = [n for n, p in params.items() if n not in skip and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    checked = dict(arguments)
    for key, value in arguments.items():
        if key in skip:
            continue
        if key not in params or params[key].kind in (params[key].VAR_POSITIONAL, params[key].POSITIONAL_ONLY):
            if takes_any:
                continue
            raise ValueError(f"{subject} takes no argument {key!r}; accepted arguments: "
                             f"{', '.join(accepted) or 'none'}")
        annotation = _annotation(func, params[key])
        checked[key] = _fitted(value, annotation)
        if checked[key] is _MISFIT:
            verb = "must be" if typing.get_origin(annotation) is typing.Literal else "is not"
            raise ValueError(f"{subject}: {key} = {value!r} {verb} {_describe(annotation)}")
    return checked


def _annotation(func: Callable, param: inspect.Parameter) -> Any:
    """``param``'s annotation as an object; ``Any`` when it has none or it cannot be resolved."""
    annotation = param.annotation
    if annotation is param.empty:
        return Any
    if isinstance(annotation, str):
        target = func.__init__ if isinstance(func, type) else func
        namespace = getattr(inspect.unwrap(target), "__globals__", {})
        try:
            return eval(annotation, dict(namespace))  # as typing.get_type_hints does, one annotation at a time
        except Exception:  # a name imported only for type checkers
            return Any
    return annotation


_MISFIT = object()
"""What :func:`_fitted` gives for a value that does not fit the annotation."""


def _fitted(value: Any, annotation: Any) -> Any:
    """``value`` where it fits ``annotation``, a number taken for an int or a float as a Python one (in a list,
    tuple or dict too); :data:`_MISFIT` where it does not fit."""
    if annotation is Any or annotation is object:
        return value
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        fitted = _fitted(value, args[0])
        return fitted if fitted is _MISFIT or all(_within(fitted, bound) for bound in _bounds(annotation)) \
            else _MISFIT
    if origin in (typing.Union, types.UnionType):
        return next((fitted for a in args if (fitted := _fitted(value, a)) is not _MISFIT), _MISFIT)
    if origin is typing.Literal:
        plain = value if whole_number(value) is None else whole_number(value)
        return next((a for a in args if plain == a and type(plain) is type(a)), _MISFIT)
    if annotation is None or annotation is type(None):
        return value if value is None else _MISFIT
    if annotation is bool:
        return _MISFIT if truth_value(value) is None else truth_value(value)
    if annotation is int or annotation is float:
        number = whole_number(value) if annotation is int else real_number(value)
        return _MISFIT if number is None else number
    if origin is type:
        return value if isinstance(value, type) else _MISFIT
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable):
        if not isinstance(value, list | tuple):
            return _MISFIT
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return _MISFIT
            items = [_fitted(v, a) for v, a in zip(value, args)]
        else:
            items = [_fitted(v, args[0]) if args else v for v in value]
        if any(item is _MISFIT for item in items):
            return _MISFIT
        unchanged = all(item is v for item, v in zip(items, value))
        return value if unchanged else tuple(items) if isinstance(value, tuple) else items
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return _MISFIT
        items = {k: _fitted(v, args[1]) if args else v for k, v in value.items()}
        if any(item is _MISFIT for item in items.values()):
            return _MISFIT
        return value if all(items[k] is v for k, v in value.items()) else items
    if isinstance(annotation, type):
        if issubclass(annotation, Mapping) and isinstance(value, dict):
            return value
        from pydantic import BaseModel

        fits = isinstance(value, annotation) or (issubclass(annotation, BaseModel) and isinstance(value, dict))
        return value if fits else _MISFIT
    return value


_BOUNDS = {annotated_types.Gt: ("gt", "greater than", lambda v, b: v > b),
           annotated_types.Ge: ("ge", "at least", lambda v, b: v >= b),
           annotated_types.Lt: ("lt", "less than", lambda v, b: v < b),
           annotated_types.Le: ("le", "at most", lambda v, b: v <= b)}


def _bounds(annotation: Any) -> list:
    """The ``Gt``, ``Ge``, ``Lt`` and ``Le`` of an ``Annotated`` annotation (an ``Interval`` gives its own)."""
    found = []
    for meta in typing.get_args(annotation)[1:]:
        found += list(meta) if isinstance(meta, annotated_types.GroupedMetadata) else [meta]
    return [bound for bound in found if type(bound) in _BOUNDS]


def _within(value: Any, bound: Any) -> bool:
    attribute, _, holds = _BOUNDS[type(bound)]
    try:
        return bool(holds(value, getattr(bound, attribute)))
    except TypeError:  # a value of another type: the type check speaks for it
        return True


def _describe(annotation: Any) -> str:
    """``annotation`` in words for a message: ``a number (float)``, ``a whole number (int), at least 1``,
    ``one of 'i', 'ii'``, or its spelling."""
    if typing.get_origin(annotation) is typing.Annotated:
        bounds = [f"{_BOUNDS[type(b)][1]} {getattr(b, _BOUNDS[type(b)][0]):,}" for b in _bounds(annotation)]
        return ", ".join([_describe(typing.get_args(annotation)[0]), *([" and ".join(bounds)] if bounds else [])])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        return " or ".join([*(_describe(a) for a in members), *(["None"] if optional else [])])
    if typing.get_origin(annotation) is typing.Literal:
        return f"one of {', '.join(map(repr, typing.get_args(annotation)))}"
    words = {bool: "true or false (bool)", int: "a whole number (int)", float: "a number (float)",
             str: "a string (str)", os.PathLike: "a path (os.PathLike)"}
    if annotation in words:
        return words[annotation]
    spelled = getattr(annotation, "__name__", None) if typing.get_origin(annotation) is None else None
    return f"of type {spelled or str(annotation).replace('typing.', '')}"


def parse_value(text: str) -> Any:
    """A value given on the command line, read as a card's TOML would hold it (``4``, ``1e-4``, ``true``,
    ``"mss"``); a bare word is a string.

    Raises:
        ValueError: ``text`` is TOML for more than one value (``5\nx = 1``), or nests deeper than TOML readers go.
    """
    try:
        document = tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        raise ValueError(f"the value {text[:40]!r}... nests too deeply; give a number, a string, true/false or a "
                         f"short array") from None
    if list(document) != ["v"]:
        raise ValueError(f"{text!r} holds more than one value; give one (a number, a string, true/false, an array)")
    return document["v"]


class LatentPart(BaseModel):
    """One part of a latent layout: a family and its size, e.g. ``gaussian(6)``.

    A card's ``latent`` is a list of them, in the order of the code: ``latent = [{ family = "gaussian", size = 6 },
    { family = "categorical", size = 3 }]``. :meth:`vaezoo.latents.LatentFamily.layout` makes them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: str = Field(pattern=r"^\S+$", description="the family as listings name it, in lower case, one word")
    size: int = Field(gt=0, description="the part's dimensions, or its categories")
    name: str | None = Field(default=None, description="the part's name inside a joint latent")

    @field_validator("family")
    @classmethod
    def _lower_case(cls, family: str) -> str:
        return family.lower()

    def __str__(self) -> str:
        return f"{self.family}({self.size})"


def layout_text(parts: Iterable[LatentPart] | None) -> str:
    """A latent layout as listings and messages show it: ``gaussian(6) + categorical(3)``; '' for none."""
    return " + ".join(map(str, parts or ()))
