"""Warnings of one category ignored while a block runs, in a process whose threads may do the same at once.

:class:`warnings.catch_warnings` saves the whole list of filters and puts that copy back when its block ends: two
threads in such blocks at once undo each other, and the one that ends last puts back the list the other had changed,
so that its ``ignore`` filter stays for the rest of the process (a long-lived process evaluating checkpoints on
8 threads ignored every warning from then on). Here the filter goes in with the first block of its category, and
out with the last; the filters added meanwhile (by the caller, another thread, an import) stay.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ignoring"]

_lock = threading.Lock()
_blocks: dict[type[Warning], tuple[int, bool]] = {}  # per category: the blocks under way, and whether they added it


@contextmanager
def ignoring(category: type[Warning] = Warning) -> Iterator[None]:
    """Ignore the warnings of ``category`` (its subclasses too) within the block.

    Python's filters are the process's: while a block runs, a warning of ``category`` from any thread is ignored.
    A filter ignoring ``category`` that was there before the first block stays after the last.
    """
    entry = ("ignore", None, category, None, 0)
    with _lock:
        count, added = _blocks.get(category, (0, False))
        if not count and entry not in warnings.filters:
            warnings.filterwarnings("ignore", category=category)
            added = True
        _blocks[category] = (count + 1, added)
    try:
        yield
    finally:
        with _lock:
            count, added = _blocks.pop(category)
            if count > 1:
                _blocks[category] = (count - 1, added)
            elif added and entry in warnings.filters:  # warnings.resetwarnings() may have removed it meanwhile
                # an ignored warning is never noted in a module's registry, so no cached decision outlives it
                warnings.filters.remove(entry)
