"""Build a part (latent family, regularizer, net, likelihood) from a card's spec via the registries."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from vaezoo.errors import CardError
from vaezoo.plugins import registry


def build(kind: str, spec: Mapping[str, Any] | str, **extra: Any):
    """Instantiate the ``kind`` registered as ``spec["type"]`` with the spec's other keys.

    Args:
        kind: a registry kind ("latent family", "regularizer", "net", "likelihood").
        spec: ``{"type": name, **arguments}``, or just a name.
        extra: arguments the caller supplies (e.g. ``image_size``), used where the part accepts them.
    """
    spec = {"type": spec} if isinstance(spec, str) else dict(spec)
    if "type" not in spec:
        raise CardError(f"a {kind} spec needs a 'type' key, got {spec}")
    cls = registry(kind)[spec.pop("type")]
    accepted = inspect.signature(cls).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
    for key, value in extra.items():
        if takes_any or key in accepted:
            spec.setdefault(key, value)
    try:
        inspect.signature(cls).bind(**spec)
    except TypeError as exc:
        raise CardError(f"{kind} '{cls.__name__}': {exc}; accepted arguments: {', '.join(accepted)}") from None
    return cls(**spec)
