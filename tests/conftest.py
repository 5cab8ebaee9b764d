"""Shared fixtures. ../shared (beside the repository root) holds MNIST and reference checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import MNIST_ROOT


@pytest.fixture
def mnist_root() -> Path:
    """The folder holding MNIST in torchvision's layout; skips when ../shared is absent."""
    if not (MNIST_ROOT / "MNIST" / "raw").is_dir():
        pytest.skip(f"MNIST not found at {MNIST_ROOT} (../shared beside the repository)")
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
