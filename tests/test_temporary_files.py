"""The tests leave nothing in the system's temporary folder: theirs, and that of every process they start, is one
of pytest's own for the session (tests/conftest.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch.multiprocessing as mp
from kit import run_python


def _raise(rank: int) -> None:
    raise RuntimeError(f"process {rank} fails, as a test's spawned process may")


def test_temporary_files_of_the_tests_and_of_the_processes_they_start_go_to_pytest_s_folder(tmp_path_factory):
    """68 folders of 'vaezoo push --dry-run' without --out, and the error files of torch.multiprocessing.spawn's
    processes that raised, piled up in /tmp, run after run."""
    base = tmp_path_factory.getbasetemp()
    assert Path(tempfile.gettempdir()).is_relative_to(base)
    started = run_python("-c", "import tempfile; print(tempfile.gettempdir())")  # as the CLI and torchrun are
    assert Path(started.stdout.strip()).is_relative_to(base), started.stderr

    before = set(base.rglob("pytorch-errorfile-*.pickle"))
    with pytest.raises(mp.ProcessRaisedException, match="process 0 fails"):
        mp.spawn(_raise, nprocs=1)
    assert len(set(base.rglob("pytorch-errorfile-*.pickle")) - before) == 1  # spawn leaves it, here
