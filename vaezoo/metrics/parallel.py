"""Running a metric's independent pieces of work on the cores the process may use: blocks of the entropy sums and
slices of images to encode on threads (torch releases the GIL), scikit-learn fits (a classifier per factor) in
worker processes."""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from vaezoo.context import whole_number
from vaezoo.errors import SharedChange

T = TypeVar("T")
R = TypeVar("R")

JOBS_VARIABLE = "VAEZOO_JOBS"
_jobs: int | None = None  # set_jobs' setting; None: VAEZOO_JOBS, else the cores the process may use
_block_jobs: ContextVar[tuple[int | None] | None] = ContextVar("vaezoo_jobs", default=None)
"""The count of the innermost :func:`jobs` block under way in this thread (None in it: the default), over
:func:`set_jobs`' setting: a block in one thread leaves another thread's count, and the setting, as they were."""


class _KeptPool(threading.local):
    """This thread's :func:`worker_pool` block: whether one is under way, and the pool it keeps with its number
    of workers. Per thread, so that the end of one thread's block never stops a pool another thread is using."""

    kept = False
    pool: tuple[ProcessPoolExecutor, int] | None = None


_here = _KeptPool()


def default_jobs() -> int:
    """The cores this process may use (``os.sched_getaffinity``; ``os.cpu_count()`` where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def get_jobs() -> int:
    """How many worker processes the metrics' fits use: :func:`set_jobs`'s setting, else ``VAEZOO_JOBS``, else
    :func:`default_jobs`."""
    block = _block_jobs.get()
    chosen = block[0] if block is not None else _jobs
    if chosen is not None:
        return chosen
    text = os.environ.get(JOBS_VARIABLE, "").strip()
    if not text:
        return default_jobs()
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{JOBS_VARIABLE}={text!r} is not a whole number of processes >= 1; set it to one, e.g. 2, "
                         f"or unset it for the cores this process may use")
    return value


def set_jobs(jobs: int | None) -> None:
    """Set the worker processes of the metrics' fits (``None``: back to the default). The numbers do not depend
    on it: each fit is seeded and runs alone, whichever process runs it."""
    global _jobs
    _jobs = _checked_jobs(jobs)


def _checked_jobs(jobs: int | None) -> int | None:
    """``jobs`` as a count of worker processes (None: the default), or a ValueError saying what to give."""
    count = None if jobs is None else whole_number(jobs)  # a numpy integer too, as the other counts take
    if jobs is not None and (count is None or count < 1):
        # "2" met Python's "'<' not supported", 2.5 the pool's words, True ran as 1
        raise ValueError(f"jobs takes a whole number of processes >= 1, e.g. 2, or None for the default, got {jobs!r}")
    return count


@contextmanager
def jobs(count: int | None) -> Iterator[None]:
    """:func:`set_jobs` for the duration of a block, in this thread only: the threads of one process may each
    evaluate with their own number of jobs."""
    token = _block_jobs.set((_checked_jobs(count),))
    try:
        yield
    finally:
        _block_jobs.reset(token)


@contextmanager
def worker_pool() -> Iterator[None]:
    """Within the block, :func:`process_map` keeps its worker processes for its next call rather than starting new
    ones for each (a start is fresh interpreters importing scikit-learn: seconds); they stop at the block's end. An
    evaluation's metrics, or a batch of evaluations, share them so. A block within another is the outer one's; each
    thread keeps its own pool."""
    if _here.kept:
        yield
        return
    _here.kept = True
    try:
        yield
    finally:
        _here.kept = False
        if _here.pool is not None:
            _here.pool[0].shutdown(cancel_futures=True)
            _here.pool = None


def _spawned(workers: int) -> ProcessPoolExecutor:
    # spawn: no fork of a process holding torch's threads (or a GPU); the workers inherit OMP_NUM_THREADS
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def _kept_pool(jobs: int) -> ProcessPoolExecutor:
    """The pool :func:`worker_pool` keeps, of ``jobs`` processes (each started when first needed); one of another
    number is stopped first."""
    if _here.pool is None or _here.pool[1] != jobs:
        if _here.pool is not None:
            _here.pool[0].shutdown()
        _here.pool = (_spawned(jobs), jobs)
    return _here.pool[0]


def process_map(function: Callable[..., R], arguments: Sequence[tuple], jobs: int | None = None) -> list[R]:
    """``[function(*args) for args in arguments]``, on up to ``jobs`` worker processes (default :func:`get_jobs`).

    ``function`` must be a module-level function of a module that imports quickly (:mod:`vaezoo.metrics.fits`
    imports numpy and scikit-learn only): the workers are spawned, fresh interpreters, kept for the next call
    within :func:`worker_pool`. With one job, or one item, everything runs in this process. Each call is
    independent of which process runs it, so the results are the same for any ``jobs``.
    """
    jobs = jobs or get_jobs()
    workers = min(jobs, len(arguments))
    if workers <= 1:
        return [function(*args) for args in arguments]
    if not _here.kept:
        with _spawned(workers) as pool:
            return _submitted(pool, function, arguments)
    pool = _kept_pool(jobs)
    try:
        return _submitted(pool, function, arguments)
    except BrokenProcessPool:  # a worker died (killed, out of memory): the next call starts a new pool
        _here.pool = None
        raise


def _submitted(pool: ProcessPoolExecutor, function: Callable[..., R], arguments: Sequence[tuple]) -> list[R]:
    """The results of ``function(*args)`` for each of ``arguments``, run on ``pool``, whose workers start (spawned)
    on the first submit without running the user's script (:func:`_script_left_out`)."""
    with _script_left_out:
        futures = [pool.submit(function, *args) for args in arguments]
    return [future.result() for future in futures]


def _leave_script_out() -> tuple[object, dict[str, object]]:
    main = sys.modules.get("__main__")
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__") if name in main.__dict__} \
        if main is not None else {}
    if "__spec__" in saved:
        main.__spec__ = None
    if "__file__" in saved:
        del main.__file__
    return main, saved


def _put_script_back(left_out: object) -> None:
    main, saved = left_out
    if main is not None:
        main.__dict__.update(saved)


_script_left_out = SharedChange(_leave_script_out, _put_script_back)
"""Within the block, a spawned process does not import ``__main__`` (the user's script) before it starts: the
workers run vaezoo's functions only, and a script without ``if __name__ == "__main__":`` ran its whole top level
again in each worker (its prints, its writes), which then failed starting workers of its own. The blocks of several
threads share one: ``__main__`` gets its names back when the last ends, not while another's workers still start."""


def parallel_map(function: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``[function(item) for item in items]``, on as many threads as torch uses (:func:`parallel_imap`); a single
    item on all of them, in torch's own operations."""
    if len(items) <= 1:
        return [function(item) for item in items]
    return list(parallel_imap(function, items))


def parallel_imap(function: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """``function(item)`` for each of ``items``, yielded in order, computed on as many threads as torch uses
    (``torch.get_num_threads()``, which ``OMP_NUM_THREADS`` sets).

    The work must release the GIL (torch operations do). Each item's torch operations use one thread, so that the
    threads do not oversubscribe the cores; the calling thread's count is left as it was, so the caller's own torch
    work between items, and after it stops reading early, uses all of them. ``items`` is read as the work goes: at
    most two items a thread ahead of the result yielded (an iterator of batches of images is never held whole).
    """
    import torch

    threads = torch.get_num_threads()
    if threads <= 1:
        yield from map(function, items)
        return

    def one_thread(item: T) -> R:
        # per worker thread (OpenMP keeps the setting of the thread that made it), and only for the item's work:
        # set_num_threads also sets the count a thread new to torch starts with, which is put back at once
        torch.set_num_threads(1)
        try:
            return function(item)
        finally:
            torch.set_num_threads(threads)

    with ThreadPoolExecutor(threads, thread_name_prefix="vaezoo-metric") as pool:
        pending: deque[Future[R]] = deque()
        for item in items:
            pending.append(pool.submit(one_thread, item))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
