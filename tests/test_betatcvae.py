"""The betatcvae plugin: its architectures, its dSprites recipes, and a composed joint + TC recipe that trains."""

from __future__ import annotations

import math

import pytest
import torch
from kit import REPO

from vaezoo.assemble import build_model
from vaezoo.data.dsprites import dsprites
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.schema import DataSpec
from vaezoo.latents import Gaussian
from vaezoo.plugins import registry

RECIPES = REPO / "plugins" / "vaezoo_betatcvae" / "recipes"


def recipe(name: str, subset: int | None = None, batch_size: int | None = None):
    """A recipe card, optionally shrunk to a dSprites subset for a quick run."""
    card = parse_card(RECIPES / f"{name}.toml")
    if subset is None:
        return card
    data = DataSpec(name="dsprites", options={**card.train.data.options, "subset": subset})
    train = card.train.model_copy(update={"data": data, "batch_size": batch_size or card.train.batch_size})
    return card.model_copy(update={"train": train})


@pytest.fixture(scope="module")
def batch():
    return dsprites(subset=32, subset_seed=5).batch(slice(0, 32))


def test_architectures_come_from_the_plugin():
    for name in ("betatcvae", "betavae"):
        assert registry("architecture").plugin_of(name) == "betatcvae"


@pytest.mark.parametrize("name,terms", [
    ("betatcvae-dsprites", {"reconstruction", "mi", "tc", "dwkl"}),
    ("betavae-dsprites", {"reconstruction", "kl"}),
])
def test_recipe_builds_and_trains_on_dsprites_images(name, terms, batch):
    card = recipe(name)
    model = build_model(card)
    assert model.image_size == 64 and isinstance(model.latent, Gaussian) and model.latent.code_size == 10
    out = model(batch, step=0)
    assert set(out.terms) == terms and torch.isfinite(out.loss)
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_betatcvae_weights_its_terms_as_the_card_says(batch):
    card = recipe("betatcvae-dsprites")
    plain = build_model(card.model_copy(update={"model": {**card.model, "alpha": 1.0, "beta": 1.0, "gamma": 1.0}}))
    weighted = build_model(card)
    weighted.load_state_dict(plain.state_dict())
    plain.eval()  # in eval mode both decode the posterior mode, so they see the same code
    weighted.eval()
    a, b = plain(batch).terms, weighted(batch).terms
    torch.testing.assert_close(b["tc"], 6 * a["tc"])
    torch.testing.assert_close(b["mi"], a["mi"])
    torch.testing.assert_close(b["dwkl"], a["dwkl"])


def test_the_two_recipes_differ_only_in_the_regularizer():
    tc, beta = recipe("betatcvae-dsprites"), recipe("betavae-dsprites")
    assert tc.train == beta.train  # same data, budget, epochs, batch, optimiser and seed
    shared = ("latent_dim",)
    assert {k: tc.model[k] for k in shared} == {k: beta.model[k] for k in shared}
    assert tc.model["beta"] == beta.model["beta"] == 6.0 and tc.model["alpha"] == tc.model["gamma"] == 1.0
    assert build_model(tc).encoder.state_dict().keys() == build_model(beta).encoder.state_dict().keys()
    sizes = [sum(p.numel() for p in build_model(card).parameters()) for card in (tc, beta)]
    assert sizes[0] == sizes[1]
    assert tc.train.budget and tc.eval_metrics == beta.eval_metrics


@pytest.mark.parametrize("name", ["betatcvae-dsprites", "betavae-dsprites", "betatcvae-joint-dsprites"])
def test_recipes_name_registered_metrics(name):
    card = recipe(name)
    assert {"mig_chen", "mig_dlib", "total_correlation"} <= set(card.eval_metrics)
    assert all(metric in registry("metric") for metric in card.eval_metrics)


def test_joint_latent_with_tc_on_its_continuous_part_and_capacity_on_its_categorical_part(batch):
    model = build_model(recipe("betatcvae-joint-dsprites"))
    assert list(model.part_slices) == ["continuous", "discrete"]
    out = model(batch, step=100)
    on_continuous = {"mi_continuous", "tc_continuous", "dwkl_continuous"}
    assert {"reconstruction", *on_continuous, "capacity_discrete"} == set(out.terms)
    assert set(out.kl) == {"continuous", "discrete"}


def test_joint_tc_recipe_trains_for_a_few_steps(tmp_path):
    from vaezoo.training.train import train

    result = train(recipe("betatcvae-joint-dsprites", subset=96, batch_size=32), tmp_path, max_steps=2)
    # stopped before the end of its one epoch: a short run's card
    assert result.step == 2 and result.card.train.steps == 2
    assert (tmp_path / "checkpoint.pt").is_file()
    model = result.model.eval()
    x = dsprites(subset=96).batch(slice(0, 8))
    assert math.isfinite(model(x, step=3).loss.item())
