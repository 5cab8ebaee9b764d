"""The shipped jointvae-mnist entry reaches the paper's clustering accuracy and its card checks out."""

import pytest

import vaezoo
from vaezoo.cli import main
from vaezoo.data import load_dataset
from vaezoo.plugins import registry

PAPER_ACCURACY = 0.887  # Dupont (2018), Table 1; the original checkpoint scores 0.8873


@pytest.fixture(scope="module")
def card():
    card = vaezoo.get_card("jointvae-mnist")
    assert card.weights is not None, "jointvae-mnist has no weights: train it with 'vaezoo train jointvae-mnist'"
    return card


def test_shipped_weights_reach_paper_accuracy(card, mnist_root):
    model = vaezoo.load("jointvae-mnist")
    test_set = load_dataset("mnist", mnist_root, "test", **card.train.data.options)
    accuracy = registry("metric")["cluster_accuracy"](model, test_set)
    assert accuracy >= PAPER_ACCURACY
    assert accuracy == pytest.approx(card.metrics["cluster_accuracy"].value, abs=1e-4)


def test_eval_check_passes(card, mnist_root, capsys):
    assert main(["eval", "jointvae-mnist", "--data-root", str(mnist_root), "--check", "--json"]) == 0
    assert '"check_failures": []' in capsys.readouterr().out
