"""Warnings vaezoo ignores for a moment (SAP's convergence warnings, torch's words on a refused checkpoint) are ignored
for that moment only, whichever threads do so at once: ``warnings.catch_warnings`` in two threads left the process
ignoring them for good (`vaezoo.errors.ignoring`)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
import torch

from vaezoo.entries import checkpoints
from vaezoo.errors import TrainingError, ignoring
from vaezoo.metrics import fits

WAIT = 30  # seconds an event is waited for before the test fails rather than hangs


def overlapping(first, second):
    """Run ``first(entered, leave)`` and ``second(entered, leave)`` on two threads, their blocks overlapping as
    first in, second in, first out, second out: the order in which ``catch_warnings`` puts back, last, the filters
    the first block had added. Each calls ``entered()`` inside its block and ``leave()`` before leaving it."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    errors = []

    def wait(event):
        assert event.wait(WAIT), "the other thread never came"

    def guarded(work, entered, leave, done=None):
        try:
            work(entered, leave)
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)
        finally:
            if done is not None:
                done.set()

    threads = [threading.Thread(target=guarded, args=(first, first_in.set, lambda: wait(second_in), first_out)),
               threading.Thread(target=guarded, args=(second, lambda: (wait(first_in), second_in.set()),
                                                      lambda: wait(first_out)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(2 * WAIT)
    assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]


@pytest.fixture
def filters():
    """The process's filters as they were before the test, given back after it."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        yield list(warnings.filters)


def test_overlapping_blocks_of_two_threads_leave_the_filters_as_they_were(filters):
    def block(entered, leave):
        with ignoring(UserWarning):
            entered()
            leave()
            assert ("ignore", None, UserWarning, None, 0) in warnings.filters

    overlapping(block, block)
    assert warnings.filters == filters


def test_a_filter_the_caller_had_stays_and_one_added_meanwhile_stays(filters):
    warnings.filterwarnings("ignore", category=UserWarning)
    with ignoring(UserWarning):
        warnings.filterwarnings("error", category=DeprecationWarning)
    assert warnings.filters[:2] == [("error", None, DeprecationWarning, None, 0),
                                    ("ignore", None, UserWarning, None, 0)]
    assert warnings.filters[2:] == filters


def test_sap_fits_of_two_threads_at_once_leave_convergence_warnings_shown(filters, monkeypatch):
    """Each thread's SVM fit holds the thread inside SAP's block, so that the blocks overlap."""
    import sklearn.svm
    from sklearn.exceptions import ConvergenceWarning

    steps = threading.local()

    class Held(sklearn.svm.LinearSVC):
        def fit(self, x, y):
            steps.entered()
            steps.leave()
            return super().fit(x, y)

    monkeypatch.setattr(sklearn.svm, "LinearSVC", Held)
    rng = np.random.default_rng(0)
    codes, factors = rng.normal(size=(40, 1)), rng.integers(0, 2, size=(40, 1))

    def fit(entered, leave):
        steps.entered, steps.leave = entered, leave
        fits.sap_row(codes, factors, codes, factors, 0)

    overlapping(fit, fit)
    assert not [f for f in warnings.filters if f[2] is ConvergenceWarning]  # scikit-learn's import adds others


def test_refused_checkpoints_read_by_two_threads_at_once_leave_warnings_shown(filters, tmp_path, monkeypatch):
    """Each thread's torch.load holds the thread inside the block that silences torch's words on the file."""
    steps = threading.local()

    def held_load(*args, **kwargs):
        steps.entered()
        steps.leave()
        raise RuntimeError("not a checkpoint")

    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1}, path)
    monkeypatch.setattr(torch, "load", held_load)

    def read(entered, leave):
        steps.entered, steps.leave = entered, leave
        with pytest.raises(TrainingError, match="not a checkpoint"):
            checkpoints.read_checkpoint(path, "start over")

    overlapping(read, read)
    assert warnings.filters == filters
