"""What a card records beside a metric's value: the metric's settings and the library versions behind it.

A metric's settings are its keyword arguments after ``model, dataset, device, batch_size``
(points, bins, seed, ...); their defaults are the protocol it follows. The numbers also depend
on the libraries that compute them: scikit-learn's classifiers and ``mutual_info_score`` have
changed between versions, and so can torch's kernels and numpy's generators.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

LIBRARIES = ("torch", "numpy", "scipy", "scikit-learn")
"""The distributions whose versions a metric's card entry records."""

_NOT_SETTINGS = {"model", "dataset", "device", "batch_size"}  # batch_size: the results do not depend on it


def metric_parameters(metric: Callable, **overrides: Any) -> dict[str, Any]:
    """The settings ``metric`` runs with: its keyword defaults (but None, "unset", which a card cannot hold),
    updated with ``overrides``.

    Args:
        metric: a registered metric, ``metric(model, dataset, device=None, batch_size=64, **settings)``.
        overrides: settings passed to it instead of the defaults.
    """
    defaults = {name: p.default for name, p in inspect.signature(metric).parameters.items()
                if name not in _NOT_SETTINGS and p.default not in (inspect.Parameter.empty, None)}
    return {**defaults, **overrides}


def library_versions() -> dict[str, str]:
    """The installed version of each of :data:`LIBRARIES` (those installed)."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
