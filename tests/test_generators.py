"""Seeded work on torch's global generators runs one at a time in a process (`vaezoo.store.locks.GENERATORS`): a metric
measured, an evaluation and a training run on two threads at once drew from each other's streams, so that an
evaluation on 4 threads gave none of the values the card records, and a seeded run trained apart from the same run
alone."""

from __future__ import annotations

import threading

import torch
from kit import make_card
from safetensors.torch import load_file

from vaezoo.entries.schema import Card
from vaezoo.metrics import spec
from vaezoo.metrics.spec import metric_spec
from vaezoo.training import train as training

WAIT = 30  # seconds an event is waited for before the test fails rather than hangs


class Watched:
    """A lock standing for ``GENERATORS`` that says when a thread asks for it while another holds it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition()
        self.asked = False

    def __enter__(self) -> Watched:
        if not self.lock.acquire(blocking=False):
            with self.changed:
                self.asked = True
                self.changed.notify_all()
            self.lock.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.lock.release()

    def wait_until(self, done: threading.Event) -> None:
        """Wait until a thread asked for the lock, or until ``done`` is set (the other thread finished unheld)."""
        with self.changed:
            assert self.changed.wait_for(lambda: self.asked or done.is_set(), WAIT)

    def finished(self, done: threading.Event) -> None:
        """Set ``done`` and wake whoever waits in :meth:`wait_until`."""
        with self.changed:
            done.set()
            self.changed.notify_all()


def test_seeded_metrics_of_two_threads_draw_what_each_draws_alone(monkeypatch):
    watched, second_done = Watched(), threading.Event()
    monkeypatch.setattr(spec, "GENERATORS", watched, raising=False)
    pause = threading.local()

    @metric_spec()
    def draws(evaluation, seed: int = 0) -> float:
        torch.manual_seed(seed)
        first = torch.rand(()).item()
        if getattr(pause, "mid_way", None):
            pause.mid_way()
        return first + 10 * torch.rand(()).item()

    alone = [draws.measure(None, seed=0), draws.measure(None, seed=1)]
    first_in = threading.Event()
    got = {}

    def first():
        pause.mid_way = lambda: (first_in.set(), watched.wait_until(second_done))
        got[0] = draws.measure(None, seed=0)

    def second():
        assert first_in.wait(WAIT)
        try:
            got[1] = draws.measure(None, seed=1)
        finally:
            watched.finished(second_done)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(2 * WAIT)
    assert [got.get(0), got.get(1)] == alone


def test_a_training_run_waits_for_seeded_work_under_way_in_another_thread(tmp_path, monkeypatch):
    watched, done = Watched(), threading.Event()
    monkeypatch.setattr(training, "GENERATORS", watched, raising=False)
    data = {"name": "synthetic", "options": {"image_size": 4, "size": 16}}
    card = Card.model_validate(make_card("tiny", dataset="synthetic", train={"data": data}))
    training.train(card, tmp_path / "alone", evaluate=False)
    errors = []

    def run():
        try:
            training.train(card, tmp_path / "thread", evaluate=False)
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)
        finally:
            watched.finished(done)

    before = torch.get_default_dtype()
    with watched:  # an evaluation under way in this thread, its default dtype float64 for the while
        torch.set_default_dtype(torch.float64)
        thread = threading.Thread(target=run)
        thread.start()
        watched.wait_until(done)
        assert watched.asked and not done.is_set()
        torch.set_default_dtype(before)
    thread.join(2 * WAIT)
    assert not errors
    name = "tiny-blobs-run.safetensors"
    alone, threaded = load_file(tmp_path / "alone" / name), load_file(tmp_path / "thread" / name)
    assert all(torch.equal(alone[key], threaded[key]) for key in alone)


def test_a_thread_waiting_for_seeded_work_names_the_thread_that_holds_it(monkeypatch):
    """A metric that waits on a thread of its own that measures a metric never finishes: that thread waits for the
    metric's hold of torch's generators (which cannot tell it from another evaluation's thread, which must wait). It
    hung without a word; the waiting thread now says on stderr what it waits for, naming the holder's thread."""
    from vaezoo.store import locks

    said, noticed = [], threading.Event()
    monkeypatch.setattr(locks, "note", lambda line: (said.append(line), noticed.set()))

    @metric_spec()
    def inner(evaluation, seed: int = 0) -> float:
        torch.manual_seed(seed)
        return torch.rand(()).item()

    alone = inner.measure(None)
    got, helpers = {}, []

    @metric_spec()
    def outer(evaluation) -> float:
        helper = threading.Thread(target=lambda: got.update(inner=inner.measure(None)), name="helper")
        helpers.append(helper)
        helper.start()
        got["noticed"] = noticed.wait(WAIT)  # where a plugin's metric joins its helper, and hangs
        return 0.0

    caller = threading.Thread(target=lambda: got.update(outer=outer.measure(None)), name="evaluation")
    caller.start()
    caller.join(2 * WAIT)
    helpers[0].join(WAIT)
    assert got == {"noticed": True, "outer": 0.0, "inner": alone}
    assert len(said) == 1 and said[0].startswith("waiting for thread 'evaluation' to finish its seeded work "
                                                 "(training, or measuring a metric): torch's global generators serve "
                                                 "one thread at a time")


def test_a_thread_waiting_its_turn_metric_after_metric_says_so_once(monkeypatch):
    """Two evaluations in threads take turns metric by metric: the waiting one said that it waited before each of
    its metrics, a line a metric."""
    from vaezoo.store import locks

    said = []
    monkeypatch.setattr(locks, "note", said.append)

    class Busy:
        """A lock another thread holds for longer than the notice waits, then frees."""

        def acquire(self, timeout: float = -1) -> bool:
            return timeout == -1

        def release(self) -> None:
            pass

    work = locks._SeededWork()
    work._lock = Busy()

    def measure_three() -> None:
        for _ in range(3):
            with work:
                pass

    measure_three()
    other = threading.Thread(target=measure_three)
    other.start()
    other.join(WAIT)
    assert len(said) == 2 and all(line.startswith("waiting for thread ") for line in said)  # once in each thread
