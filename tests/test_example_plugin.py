"""The example third-party plugin (examples/vaezoo-laplace), installed with pip as a user would.

It adds a latent family, an architecture and a card with weights through the
hooks alone: vaezoo must discover, list and load it, and it must pass the
conformance kit and its own tests.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vaezoo
from vaezoo import plugins, testing
from vaezoo.cli import main
from vaezoo.store.weights import read_safetensors

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vaezoo-laplace"
CARD = "laplacevae-mnist"

LIST_WITHOUT_TORCH = """
import sys
from vaezoo.cli import main
assert main(["list", "--json"]) == 0
assert "torch" not in sys.modules, "vaezoo list imported torch"
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(source copy, site directory)``: the example built by its own pyproject and installed by pip.

    pip builds from a copy so that the build leaves nothing in the checkout.
    """
    source = tmp_path_factory.mktemp("source") / "vaezoo-laplace"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return source, site


@pytest.fixture
def laplace(installed, monkeypatch):
    """The installed example on ``sys.path`` and ``PYTHONPATH``, with plugins reloaded; returns its site directory."""
    _, site = installed
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    plugins.reset()
    yield site
    for module in [m for m in sys.modules if m == "vaezoo_laplace" or m.startswith("vaezoo_laplace.")]:
        del sys.modules[module]


def test_is_discovered_through_its_entry_point(laplace):
    info = plugins.get_plugins().info["laplace"]
    assert (info.status, info.version) == ("ok", "0.1.0")
    assert info.hooks == ["vaezoo_card_dirs", "vaezoo_register_architectures", "vaezoo_register_latent_families"]
    assert plugins.registry("latent family").plugin_of("laplace") == "laplace"
    assert plugins.registry("architecture").plugin_of("laplacevae") == "laplace"


def test_is_listed_by_vaezoo_list_and_plugins(laplace, capsys):
    assert main(["list", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    card = vaezoo.get_card(CARD)
    assert rows[CARD]["architecture"] == "laplacevae"
    assert rows[CARD]["metrics"] == {name: metric.value for name, metric in card.metrics.items()}
    assert main(["plugins", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["laplace"]["status"] == "ok"


def test_vaezoo_list_stays_free_of_torch_with_it_installed(laplace):
    result = subprocess.run([sys.executable, "-c", LIST_WITHOUT_TORCH], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert CARD in {row["name"] for row in json.loads(result.stdout)}


def test_loads_pretrained_from_the_installed_package(laplace):
    from vaezoo_laplace.latent import Laplace

    model = vaezoo.load(CARD)
    assert model.card.path.is_relative_to(laplace)
    assert isinstance(model.latent, Laplace) and model.latent.dim == model.card.model["dim"]
    stored = read_safetensors(model.card.path.parent / model.card.weights.file)
    assert stored.keys() == model.state_dict().keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in stored.items())
    assert sum(p.numel() for p in model.parameters()) == model.card.parameters
    assert model.card.weights.size < 1_000_000


def test_passes_the_conformance_kit(laplace):
    assert testing.check_plugin("laplace") == {
        "latent family": ["laplace"], "architecture": ["laplacevae"], "card": [CARD],
    }
    # the parts' trial runs are in vaezoo's registry-driven tests (below) and the example's own tests
    testing.check_latent_family("laplace", dim=3, train=False)
    testing.check_regularizer("beta", latent={"type": "laplace", "dim": 3}, beta=4.0, train=False)
    testing.check_regularizer("total_correlation", latent={"type": "laplace", "dim": 3}, dataset_size=1000,
                              train=False)
    testing.check_architecture("laplacevae", image_size=32, channels=3, dim=2, widths=[8, 8, 16], train=False)
    testing.check_card(CARD)
    trained = testing.check_training(CARD)  # vaezoo train in miniature: metrics, traversal, loading back
    assert trained.card.train.data.name == "synthetic" and trained.card.train.data.options["image_size"] == 16


# vaezoo's tests that go over whatever is installed: the registry, the zoo's cards, the plugins
REGISTRY_DRIVEN = ["test_models.py", "test_input_contract.py::test_every_zoo_card_states_its_input", "test_plugins.py",
                   "test_cli.py::test_plugins_json_lists_every_entry_point",
                   "reliability/test_broken_plugins.py::test_a_plugin_hanging_at_import_is_named_with_how_to_skip_it"]


@pytest.mark.slow
def test_vaezoos_registry_driven_tests_pass_and_check_it(laplace):
    """Installed, it is checked by vaezoo's own registry-driven tests (its family with the example its class
    declares, trial runs included, and its card), and none of them fails for its presence. The built-in parts'
    trial runs are left out: they train no part of the plugin's, and the suite runs them on its own."""
    tests = Path(__file__).parent
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:randomly",
                             "-k", "laplace or not trains", *[str(tests / t) for t in REGISTRY_DRIVEN]],
                            cwd=tests.parent,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    passed = [line for line in result.stdout.splitlines() if line.startswith("PASSED ")]
    for checked in ("test_latent_family[laplace]", "test_latent_family_trains[laplace]",
                    f"test_card[{CARD}]", f"test_every_zoo_card_states_its_input[{CARD}]",
                    "test_architecture_trains[laplacevae-laplacevae-mnist]"):
        assert any(line.endswith(f"::{checked}") for line in passed), (checked, result.stdout)


@pytest.mark.slow
def test_passes_its_own_tests(installed, laplace):
    source, _ = installed
    # -P: the tests import the installed copy, not the source tree in the working directory
    result = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                            cwd=source, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_vaezoo_eval_reproduces_the_cards_metrics(laplace, mnist_root, capsys):
    assert main(["eval", CARD, "--data-root", str(mnist_root), "--check", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["check_failures"] == []
    assert set(report["metrics"]) >= set(vaezoo.get_card(CARD).metrics)


def test_a_third_party_family_gets_traversals_and_the_entropy_metrics(laplace):
    """The Laplace family has no code for these: viz, mig_chen and the TC metric use only the latent protocol."""
    from vaezoo.assemble import build_part
    from vaezoo.data.dsprites import dsprites
    from vaezoo.evaluation import viz
    from vaezoo.metrics import entropy, mig

    torch.manual_seed(0)
    model = build_part("architecture", {"type": "laplacevae", "image_size": 64, "channels": 1, "dim": 3,
                                        "widths": [8, 8, 16, 16]}).eval()
    traversal = viz.traverse(model, steps=4)
    assert [(row.part, row.index) for row in traversal.dimensions] == [("z", 0), ("z", 1), ("z", 2)]
    scale = model.latent.prior.stddev  # Laplace(0, 1): sqrt(2)
    expected = model.decode(torch.tensor([[-3 * scale, 0, 0], [3 * scale, 0, 0]]))
    assert torch.allclose(traversal.tiles[0, [0, 3]], expected, atol=1e-6)

    data = dsprites(subset=256, subset_seed=3)
    score = mig.mig_chen(model, data, samples=200)
    tc = entropy.total_correlation(model, data, samples=200)
    assert 0 <= score <= 1 and tc >= -0.05


def test_the_laplace_entropy_estimate_matches_the_closed_form():
    """One Laplace(0, b) posterior per image, all alike: H(z_j) is the Laplace entropy 1 + log(2b)."""
    from torch.distributions import Laplace

    from vaezoo.metrics.entropy import estimate_entropies

    n, dims, b = 400, 2, 0.7
    estimate = estimate_entropies(torch.zeros(n, dims), torch.full((n, dims), 2 * math.log(b)), samples=4000,
                                  family=Laplace)
    torch.testing.assert_close(estimate.marginal, torch.full((dims,), 1 + math.log(2 * b), dtype=torch.float64),
                               atol=0.05, rtol=0)
    assert abs(estimate.total_correlation) < 0.05
