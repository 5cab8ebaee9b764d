"""Helpers of the training-engine tests: the ``toydata`` plugin installed, a card for it, child processes.

The plugin (:mod:`toydata`) is installed as a ``*.dist-info`` with an entry
point in the ``vaezoo`` group, so vaezoo finds it exactly as it finds a
third-party plugin: in the test process and in the processes a test starts
(``python -m vaezoo``, ``torchrun``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w
from toydata import DATASET

import vaezoo

TESTS = Path(__file__).resolve().parent


def toy_card(name: str = "toyvae-bars", **train) -> dict:
    """A JointVAE card (as a dict) for ``toy_bars``: 3 steps per epoch, 12 steps, a checkpoint every 4.

    ``train`` overrides keys of the recipe (e.g. ``data={"name": DATASET, "options": {"nan": True}}``).
    """
    return {
        "name": name,
        "architecture": "jointvae",
        "summary": "A tiny JointVAE for tests of the training engine.",
        "dataset": DATASET,
        "paper": "Dupont (2018), Learning Disentangled Joint Continuous and Discrete Representations. "
                 "https://arxiv.org/abs/1804.00104",
        "license": "MIT",
        "vaezoo_version": vaezoo.__version__,
        "eval_metrics": ["cluster_accuracy"],
        "model": {"image_size": 16, "channels": 1, "continuous": 2, "discrete": [3], "hidden": 32,
                  "capacity": {"continuous": [0.0, 5.0, 20, 30.0], "discrete": [0.0, 1.0, 20, 30.0]}},
        "train": {"epochs": 4, "batch_size": 32, "seed": 0, "checkpoint_every": 4,
                  "data": {"name": DATASET, "options": {"size": 96}},
                  "optimizer": {"name": "Adam", "lr": 1e-3}, **train},
    }


def write_card(path: Path, card: dict) -> Path:
    """Write ``card`` as TOML to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(card), encoding="utf-8")
    return path


@dataclass
class ToyPlugin:
    """The installed plugin: its site directory, and the environment of processes that should find it."""

    site: Path

    def env(self, **extra: str) -> dict[str, str]:
        """This process's environment, with the plugin's site and the tests folder on ``PYTHONPATH``."""
        env = dict(os.environ, OMP_NUM_THREADS="1", **extra)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.site), str(TESTS), env.get("PYTHONPATH")]))
        return env


def install_toy_plugin(site: Path, monkeypatch: pytest.MonkeyPatch) -> ToyPlugin:
    """Install :mod:`toydata` as the plugin ``toydata`` (a dist-info in ``site``, put on ``sys.path``).

    Plugins are reloaded, so the next registry lookup finds ``toy_bars``.
    """
    from vaezoo import plugins

    dist = site / "vaezoo_toydata-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vaezoo-toydata\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[vaezoo]\ntoydata = toydata\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    plugins.reset()
    return ToyPlugin(site)

