"""What a card records beside a metric's value: the metric's settings and the library versions behind it.

A metric's settings are those of its spec (points, bins, seed, ...: its keyword arguments after the
evaluation); their defaults are the protocol it follows. The numbers also depend
on the libraries that compute them: scikit-learn's classifiers and ``mutual_info_score`` have
changed between versions, and so can torch's kernels and numpy's generators.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from vaezoo.metrics.spec import MetricSpec

LIBRARIES = ("torch", "numpy", "scipy", "scikit-learn")
"""The distributions whose versions a metric's card entry records."""


def metric_parameters(metric: MetricSpec | Callable[..., float], **overrides: Any) -> dict[str, Any]:
    """The settings ``metric`` runs with: its spec's settings (:attr:`MetricSpec.settings`, a plain function's keyword
    defaults), updated with ``overrides``.

    Args:
        metric: a registered metric.
        overrides: settings passed to it instead of the defaults.
    """
    return {**MetricSpec.of(metric).settings, **overrides}


def library_versions() -> dict[str, str]:
    """The installed version of each of :data:`LIBRARIES` (those installed)."""
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found
