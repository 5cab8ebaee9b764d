"""The plugin's own tests: vaezoo's conformance kit, and the Laplace maths checked independently."""

import math
from typing import Any

import pytest
import torch

import vaezoo
from vaezoo import testing
from vaezoo_laplace import CARDS
from vaezoo_laplace.latent import Laplace


def test_plugin_registers_its_parts_and_card() -> None:
    assert testing.check_plugin("laplace") == {
        "latent family": ["laplace"], "architecture": ["laplacevae"], "card": ["laplacevae-mnist"],
    }


def test_latent_family_conforms_and_trains() -> None:
    testing.check_latent_family("laplace", dim=3)


@pytest.mark.parametrize("regularizer, kwargs", [("beta", {"beta": 4.0}),
                                                 ("total_correlation", {"dataset_size": 1000})])
def test_core_regularizers_accept_the_laplace_latent(regularizer: str, kwargs: dict[str, Any]) -> None:
    testing.check_regularizer(regularizer, latent={"type": "laplace", "dim": 3}, **kwargs)


def test_architecture_conforms_and_trains() -> None:
    testing.check_architecture("laplacevae", image_size=16, channels=1)


def test_card_conforms() -> None:
    testing.check_card(CARDS / "laplacevae-mnist.toml")


def test_card_trains_evaluates_traverses_and_loads() -> None:
    """What 'vaezoo train' does with the card, in miniature: a few steps, its metrics, a traversal inside the
    Laplace prior's support, and the run loaded back."""
    model = testing.check_training(CARDS / "laplacevae-mnist.toml")
    assert isinstance(model.latent, Laplace) and model.card is not None
    assert "reconstruction" in model.card.metrics


def _kl(loc: float, scale: float) -> float:
    params = torch.tensor([[loc, math.log(scale)]], dtype=torch.float64)
    return Laplace(dim=1).double().posterior(params).kl().item()


@pytest.mark.parametrize("loc", [0.0, 0.5, -2.0])
def test_kl_with_unit_scale_is_abs_loc_plus_exp_minus_abs_loc_minus_one(loc: float) -> None:
    # E|x| under Laplace(m, 1) is |m| + exp(-|m|), and the entropy terms cancel.
    assert _kl(loc, 1.0) == pytest.approx(abs(loc) + math.exp(-abs(loc)) - 1, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("scale", [0.1, 1.0, 3.0])
def test_kl_at_zero_loc_is_scale_minus_log_scale_minus_one(scale: float) -> None:
    # E|x| under Laplace(0, b) is b; entropy log(2b) + 1 against the prior's cross-entropy log 2 + b.
    assert _kl(0.0, scale) == pytest.approx(scale - math.log(scale) - 1, rel=1e-12, abs=1e-12)


def test_kl_matches_a_monte_carlo_estimate() -> None:
    torch.manual_seed(0)
    family = Laplace(dim=2).double()
    posterior = family.posterior(torch.tensor([[0.7, -1.5, math.log(0.4), math.log(2.0)]], dtype=torch.float64))
    z = posterior.distribution.sample((400_000,))
    log_ratio = posterior.log_prob(z) - posterior.prior_log_prob(z)
    estimate, stderr = log_ratio.mean(0), log_ratio.std(0) / math.sqrt(z.shape[0])
    assert torch.all((estimate - posterior.kl()[0]).abs() < 4 * stderr)


def test_prior_samples_have_the_moments_of_laplace_0_1() -> None:
    z = Laplace(dim=4).sample_prior(200_000, generator=torch.Generator().manual_seed(0))
    assert z.mean().abs() < 0.01
    assert z.abs().mean() == pytest.approx(1.0, abs=0.01)  # E|z| = scale
    assert z.var() == pytest.approx(2.0, abs=0.03)  # Var z = 2 scale^2


def test_pretrained_model_loads_and_reconstructs() -> None:
    model = vaezoo.load("laplacevae-mnist")
    assert isinstance(model.latent, Laplace)
    x = torch.rand(2, 1, 16, 16)
    assert model.reconstruct(x).shape == x.shape
