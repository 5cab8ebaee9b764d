"""Shared fixtures, built on tests/kit.py. ../shared (beside the repository root) holds MNIST and reference
checkpoints."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest
import torch

from kit import DATA_PLUGIN, MNIST_ROOT, FileServer, install_plugin, require_shared, serve_files

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest -n N: N workers share the machine's cores, so each computes on one thread (and so do the processes its
    # tests start) rather than every worker taking every core (oversubscribed OpenMP threads run many times slower)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    # and fits their metrics in the worker itself: a pool of fit processes per metric took most of a small
    # evaluation's time (tests/test_metric_speed.py sets its own jobs, to check that they change no score)
    os.environ.setdefault("VAEZOO_JOBS", "1")

# The processes the tests start and stop with signals meet them as a terminal user's command does. A suite started
# as a script's background job (`cmd &`) or under nohup inherits SIGINT or SIGHUP ignored, and vaezoo keeps a stop
# signal its process was started ignoring ignored (tests/test_train.py checks that): a handler here instead (the
# default's for SIGINT, none for SIGHUP, so that the suite still outlives a hangup) is reset to the default in
# every program the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that hold slow tests run first, each file's tests together and in their order (so that a module's
    fixtures are made once): with -n auto the workers then end on quick tests, together, instead of one idling
    while the other finishes a long test that came last."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session", autouse=True)
def temporary_folder(tmp_path_factory) -> Path:
    """The temporary folder of the tests and of every process they start (``tempfile``, and ``TMPDIR``, which the
    processes inherit): a folder of pytest's own for the session, which pytest removes with its old sessions. The
    system's kept what the tests left there: ``vaezoo push --dry-run``'s staged folders (kept for the user by
    design), ``torch.multiprocessing.spawn``'s error files of the processes that raised, torchrun's logs, torch's
    compile caches."""
    folder = tmp_path_factory.mktemp("tmp", numbered=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        yield folder


@pytest.fixture
def mnist_root() -> Path:
    """The folder holding MNIST in torchvision's layout; skips when ../shared is absent (see require_shared)."""
    require_shared(MNIST_ROOT / "MNIST" / "raw")
    return MNIST_ROOT


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch, tmp_path_factory):
    """Each test starts with freshly loaded plugins and an empty weights cache."""
    from vaezoo import plugins

    monkeypatch.setenv("VAEZOO_HOME", str(tmp_path_factory.mktemp("vaezoo_home")))
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture
def float64_seeded():
    """Known answers are checked in double precision, from a fixed seed."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture
def cards_dir(tmp_path, monkeypatch) -> Path:
    """An empty card directory, the only one on ``VAEZOO_CARDS_PATH``."""
    directory = tmp_path / "cards"
    directory.mkdir()
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(directory))
    return directory


@pytest.fixture
def cards(cards_dir, monkeypatch) -> Path:
    """Only the test's cards: an empty card directory, the only one, and no plugin loads (no zoo)."""
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    return cards_dir


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A folder on ``sys.path`` to install fake plugins into with :func:`kit.install_plugin`.

    A child process finds them where :func:`kit.child_env` is given this folder.
    """
    from vaezoo import plugins

    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    plugins.reset()
    return directory


@pytest.fixture
def data_plugin(site) -> Path:
    """The plugin site with the kit's test plugin installed (:data:`kit.DATA_PLUGIN`): the datasets
    ``toy_bars`` and ``tiny_blobs`` and the regularizers ``nan_after`` and ``inf_from``."""
    install_plugin(site, "testdata", DATA_PLUGIN)
    return site


@pytest.fixture
def server():
    """A :class:`kit.FileServer` on 127.0.0.1; tests put bytes in ``server.files`` and faults in its fields."""
    with serve_files(FileServer()) as running:
        yield running


@pytest.fixture
def second_member_diverges(monkeypatch) -> None:
    """The second of two stacked members' loss becomes NaN at step 9 (as a broken seed's would); the first's stays."""
    from vaezoo.training.ensemble import Stack

    losses = Stack.losses

    def diverges_at_step_9(self, x, noise, step):
        out, terms, z = losses(self, x, noise, step)
        if step == 9 and len(self.members) == 2:
            out = out * torch.tensor([1.0, float("nan")])
        return out, terms, z

    monkeypatch.setattr(Stack, "losses", diverges_at_step_9)
