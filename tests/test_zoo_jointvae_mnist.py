"""The shipped jointvae-mnist entry reaches the paper's clustering accuracy and its card checks out."""

import pytest

import vaezoo
from vaezoo.cli import main
from vaezoo.assemble import load_dataset
from vaezoo.plugins import registry

from kit import MNIST_ROOT, require_shared

PAPER_ACCURACY = 0.887  # Dupont (2018), Table 1; the original checkpoint scores 0.8873


@pytest.fixture(scope="module")
def card():
    card = vaezoo.get_card("jointvae-mnist")
    assert card.weights is not None, "jointvae-mnist has no weights: train it with 'vaezoo train jointvae-mnist'"
    return card


@pytest.fixture(scope="module")
def accuracy(card):
    require_shared(MNIST_ROOT / "MNIST" / "raw")
    test_set = load_dataset("mnist", MNIST_ROOT, "test", **card.train.data.options)
    return registry("metric")["cluster_accuracy"](vaezoo.load("jointvae-mnist"), test_set)


def test_shipped_weights_reproduce_the_card(card, accuracy):
    assert accuracy == pytest.approx(card.metrics["cluster_accuracy"].value, abs=1e-4)


def test_shipped_weights_reach_paper_accuracy(accuracy):
    assert accuracy >= PAPER_ACCURACY


def test_eval_check_passes(card, mnist_root, capsys):
    assert main(["eval", "jointvae-mnist", "--data-root", str(mnist_root), "--check", "--json"]) == 0
    assert '"check_failures": []' in capsys.readouterr().out
