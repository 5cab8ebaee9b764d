"""Dynamically binarised MNIST (``binarize = "dynamic"``): fresh Bernoulli pixels every training batch, a fixed draw
of the test split, and runs that resume and stack as exactly as grey-level ones."""

from __future__ import annotations

import pytest
import torch
from kit import make_card

from vaezoo.assemble import load_dataset
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import DataError
from vaezoo.entries.checkpoints import CHECKPOINT
from vaezoo.training.train import train, train_seeds


def test_training_batches_are_drawn_afresh_from_the_grey_levels(mnist_root):
    data = load_dataset("mnist", mnist_root, "train", binarize="dynamic")
    index = torch.arange(2000)
    grey = data.batch(index)
    first, second = data.draw_pixels(grey), data.draw_pixels(grey)
    assert set(first.unique().tolist()) == {0.0, 1.0}
    assert not torch.equal(first, second)
    assert float(first.mean()) == pytest.approx(float(grey.mean()), rel=0.02)
    assert torch.equal(first[grey == 0], grey[grey == 0]) and torch.equal(first[grey == 1], grey[grey == 1])


def test_the_test_split_is_one_fixed_draw(mnist_root):
    grey = load_dataset("mnist", mnist_root, "test")
    once, again = (load_dataset("mnist", mnist_root, "test", binarize="dynamic") for _ in range(2))
    assert once.images.dtype == torch.uint8 and once.scale == 1.0 and not once.binarize
    assert torch.equal(once.images, again.images) and torch.equal(once.labels, grey.labels)
    assert set(once.images.unique().tolist()) == {0, 1}
    assert float(once.batch(slice(None)).mean()) == pytest.approx(float(grey.batch(slice(None)).mean()), rel=0.01)


def test_grey_levels_stay_grey_without_the_option(mnist_root):
    data = load_dataset("mnist", mnist_root, "train")
    grey = data.batch(slice(0, 64))
    assert not data.binarize and data.draw_pixels(grey) is grey


def test_an_unknown_binarisation_is_refused_before_any_file_is_read(tmp_path):
    with pytest.raises(DataError, match="mnist option binarize is 'static'; the one binarisation is 'dynamic'"):
        load_dataset("mnist", tmp_path, "train", binarize="static")


def binarised_card(**train) -> Card:
    model = {"latent": {"type": "gaussian", "dim": 4},
             "encoder": {"type": "mlp_encoder", "hidden": [32]}, "decoder": {"type": "mlp_decoder", "hidden": [32]},
             "regularizers": [{"type": "beta", "beta": 1.0}]}
    card = make_card("mnist", "vae-mnist-bits", model=model, eval_metrics=["elbo"],
                     train={"batch_size": 64, "checkpoint_every": 5, **train})
    card["train"]["data"]["options"]["binarize"] = "dynamic"
    return Card.model_validate(card)


def same_state(a, b) -> bool:
    """Whether two checkpoints hold the same step, weights, Adam moments and RNG state."""
    a, b = (torch.load(path, weights_only=True) for path in (a, b))
    moments = [(a["optimizer"]["state"][i][k], b["optimizer"]["state"][i][k]) for i in a["optimizer"]["state"]
               for k in a["optimizer"]["state"][i]]
    weights = [(a["model"][k], b["model"][k]) for k in a["model"]]
    return a["step"] == b["step"] and torch.equal(a["rng_cpu"], b["rng_cpu"]) and all(
        torch.equal(x, y) for x, y in weights + moments)


def test_a_binarised_run_resumes_exactly_and_an_ensemble_member_is_its_solo_run(mnist_root, tmp_path):
    whole = train(binarised_card(), tmp_path / "whole", data_root=mnist_root, max_steps=12)
    train(binarised_card(), tmp_path / "cut", data_root=mnist_root, max_steps=7)
    resumed = train(binarised_card(), tmp_path / "cut", data_root=mnist_root, max_steps=12, resume=True)
    assert same_state(tmp_path / "whole" / CHECKPOINT, tmp_path / "cut" / CHECKPOINT)
    assert all(torch.equal(a, b) for a, b in zip(whole.model.state_dict().values(),
                                                 resumed.model.state_dict().values()))
    train_seeds(binarised_card(), tmp_path / "ensemble", [1, 0], data_root=mnist_root, max_steps=12,
                formulation="loop")
    assert same_state(tmp_path / "ensemble" / "seed-0" / CHECKPOINT, tmp_path / "whole" / CHECKPOINT)


def test_the_card_records_the_binarisation_beside_the_metric(mnist_root, tmp_path):
    run = train(binarised_card(batch_size=600), tmp_path / "run", data_root=mnist_root)
    metric = parse_card(run.card_path).metrics["elbo"]
    assert metric.data == {"binarize": "dynamic"} and metric.parameters == {"seed": 0}
    assert "reconstruction" in parse_card(run.card_path).metrics
    assert parse_card(run.card_path).metrics["reconstruction"].data is None
