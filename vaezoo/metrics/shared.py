"""Work that several metrics of one evaluation need, done once: within :func:`sharing`, a result is kept
under a key naming what it was computed from, and dropped when the block ends.

Outside such a block nothing is kept, so a result can never outlive the model it was computed from
(no cache has to guess whether parameters changed since). :func:`vaezoo.evaluate.evaluate` computes a
card's metrics inside one block: the suite encodes each image once, and ``mig_chen`` and
``total_correlation`` share one entropy estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_scope: dict[Hashable, Any] | None = None


@contextmanager
def sharing() -> Iterator[None]:
    """Share results among the metrics computed inside the block (nested blocks share the outer one's).

    The caller keeps the models and datasets alive and unchanged inside the block.
    """
    global _scope
    outer = _scope
    _scope = {} if outer is None else outer
    try:
        yield
    finally:
        _scope = outer


def shared(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or inside :func:`sharing` the result already computed under ``key``."""
    if _scope is None:
        return compute()
    if key not in _scope:
        _scope[key] = compute()
    return _scope[key]
