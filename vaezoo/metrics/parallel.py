"""Running a metric's independent pieces of work (a classifier per factor, a block of the entropy sums) on
the cores torch may use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

T = TypeVar("T")
R = TypeVar("R")


def parallel_map(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[function(item) for item in items]``, on as many threads as torch uses (``torch.get_num_threads()``,
    which ``OMP_NUM_THREADS`` sets).

    The work must release the GIL (torch operations, scikit-learn's tree and liblinear fits do). While it runs,
    torch's own operations use one thread each, so that the threads do not oversubscribe the cores.
    """
    threads = torch.get_num_threads()
    workers = min(threads, len(items))
    if workers <= 1:
        return [function(item) for item in items]

    def one_thread(item: T) -> R:
        torch.set_num_threads(1)  # per thread: OpenMP keeps the setting of the thread that made it
        return function(item)

    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="vaezoo-metric") as pool:
            return list(pool.map(one_thread, items))
    finally:
        torch.set_num_threads(threads)
