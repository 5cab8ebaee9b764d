"""A model's float settings (a regularizer's ``beta``, a capacity's ``max``, a temperature) and how a stacked step
hands each member its own.

Members of an ensemble that differ only in such numbers (a sweep of ``beta``) train in one stack: their models
have the same parameters and the same code, and each setting that differs among them is given to the stacked
forward pass as a per-member tensor in place of the Python number (:func:`swapped`). A setting is a ``float``
attribute of a submodule, or one held inside such an attribute's lists, tuples, dicts or pydantic models
(``regularizers.1.groups.0.gamma``); the code reads it as a number, so a 0-d tensor of the same value computes
the same thing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from torch import Tensor, nn

from vaezoo.entries.schema import Card

__all__ = ["differing", "float_settings", "structure", "swapped"]


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every leaf of ``value`` with its dotted path, through lists, tuples, dicts and pydantic models."""
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _leaves(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}.{i}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}")
    elif not isinstance(value, nn.Module | Tensor):  # submodules are walked on their own; tensors are state
        yield path, value


def _attributes(module: nn.Module) -> Iterator[tuple[str, Any]]:
    """Every plain attribute leaf of ``module`` and its submodules (not parameters, buffers, private ones or the card
    a model was built from)."""
    for prefix, sub in module.named_modules():
        for name, value in vars(sub).items():
            if not name.startswith("_") and name != "training" and not isinstance(value, Card):
                yield from _leaves(value, f"{prefix}.{name}" if prefix else name)


def float_settings(module: nn.Module) -> dict[str, float]:
    """The float settings of ``module``, by dotted path (e.g. ``{"regularizers.0.beta": 4.0}``)."""
    return {path: value for path, value in _attributes(module) if type(value) is float}


def structure(module: nn.Module) -> str:
    """What models must share besides their float settings and weights to be stacked: their submodules' types,
    their other attribute values, and their parameters' and buffers' shapes."""
    types = [(name, type(sub).__qualname__) for name, sub in module.named_modules()]
    others = [(path, repr(value)) for path, value in _attributes(module) if type(value) is not float]
    shapes = [(name, tuple(t.shape), str(t.dtype)) for name, t in [*module.named_parameters(), *module.named_buffers()]]
    return repr((types, others, shapes))


def differing(models: Sequence[nn.Module]) -> dict[str, list[float]]:
    """The float settings whose values differ among ``models`` (of one :func:`structure`): each member's value."""
    settings = [float_settings(m) for m in models]
    return {path: [s[path] for s in settings] for path in settings[0]
            if any(s[path] != settings[0][path] for s in settings)}


def _replaced(value: Any, parts: list[str], new: Any) -> Any:
    """``value`` with the leaf at ``parts`` set to ``new``: lists, dicts and pydantic models are copied, not
    changed, so that the original ``value`` can be put back."""
    if not parts:
        return new
    head, rest = parts[0], parts[1:]
    if isinstance(value, BaseModel):
        return value.model_copy(update={head: _replaced(getattr(value, head), rest, new)})
    if isinstance(value, list | tuple):
        items = list(value)
        items[int(head)] = _replaced(items[int(head)], rest, new)
        return type(value)(items) if isinstance(value, tuple) else items
    return {**value, head: _replaced(value[head], rest, new)}


@contextlib.contextmanager
def swapped(module: nn.Module, values: Mapping[str, Any]):
    """``module`` with the settings at the paths of ``values`` set to those values (per-member tensors under
    ``torch.func.vmap``); the settings are put back on exit."""
    modules = dict(module.named_modules())
    saved: dict[tuple[int, str], tuple[nn.Module, str, Any]] = {}
    try:
        for path, value in values.items():
            parts = path.split(".")
            at = max(i for i in range(len(parts)) if ".".join(parts[:i]) in modules)
            owner, name = modules[".".join(parts[:at])], parts[at]
            saved.setdefault((id(owner), name), (owner, name, getattr(owner, name)))
            setattr(owner, name, _replaced(getattr(owner, name), parts[at + 1:], value))
        yield module
    finally:
        for owner, name, original in saved.values():
            setattr(owner, name, original)
