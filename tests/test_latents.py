"""Latent families against known answers: KLs by Monte Carlo and by formula, samples by their statistics."""

from __future__ import annotations

import math

import pytest
import torch

from vaezoo.assemble import build_part
from vaezoo.context import LatentPart, layout_text
from vaezoo.latents import Gaussian, GumbelCategorical, LatentFamily

pytestmark = pytest.mark.usefixtures("float64_seeded")


def gaussian_posterior(mean, logvar):
    return Gaussian(mean.shape[-1]).posterior(torch.cat([mean, logvar], dim=-1))


def test_gaussian_kl_closed_form_matches_monte_carlo():
    mean = torch.tensor([[0.0, 1.5, -0.7], [0.3, -2.0, 0.1]])
    logvar = torch.tensor([[0.0, -1.0, 0.8], [-2.5, 0.4, 1.2]])
    kl = gaussian_posterior(mean, logvar).kl()
    assert kl.shape == (2, 3)

    # E_q[log q(z) - log p(z)] with z = mean + sigma * eps, both log densities written out by hand
    n = 400_000
    eps = torch.randn(n, 2, 3)
    z = mean + torch.exp(0.5 * logvar) * eps
    log_q = -0.5 * (math.log(2 * math.pi) + logvar + eps**2)
    log_p = -0.5 * (math.log(2 * math.pi) + z**2)
    samples = log_q - log_p
    estimate, stderr = samples.mean(0), samples.std(0) / math.sqrt(n)
    assert torch.all((kl - estimate).abs() <= 5 * stderr + 1e-12), (kl, estimate, stderr)


def test_gaussian_kl_is_zero_at_the_prior_and_summed_per_part():
    posterior = gaussian_posterior(torch.zeros(4, 2), torch.zeros(4, 2))
    assert torch.equal(posterior.kl(), torch.zeros(4, 2))
    shifted = gaussian_posterior(torch.ones(4, 2), torch.zeros(4, 2))
    assert torch.allclose(shifted.kl_parts()["z"], torch.full((4,), 1.0))  # 2 dims x (1^2 / 2)


@pytest.mark.parametrize("logvar, expected", [(-120.0, 0.5 * (0.25 + math.exp(-120) - 1 + 120)), (89.0, math.inf)])
def test_gaussian_kl_stays_exact_where_the_float32_scale_underflows_or_overflows(logvar, expected):
    """In float32, exp(logvar / 2) squared is 0 below a logvar of about -103 and inf above 88.7: KL(scale) is inf,
    NaN."""
    params = torch.tensor([[0.5, logvar]], dtype=torch.float32)
    assert Gaussian(1).to(torch.float32).posterior(params).kl().item() == pytest.approx(expected)


def test_gaussian_rsample_has_the_posterior_moments_and_carries_gradients():
    mean = torch.tensor([[1.0, -2.0]], requires_grad=True)
    logvar = torch.tensor([[0.5, -1.0]], requires_grad=True)
    posterior = gaussian_posterior(mean.expand(200_000, 2), logvar.expand(200_000, 2))
    z = posterior.rsample()
    assert torch.allclose(z.mean(0), mean[0].detach(), atol=0.02)
    assert torch.allclose(z.var(0), logvar[0].detach().exp(), rtol=0.02)
    z.sum().backward()
    assert mean.grad is not None and logvar.grad is not None
    assert torch.equal(posterior.mode, mean.detach().expand(200_000, 2))


def test_categorical_kl_to_uniform_matches_the_direct_formula():
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0], [9.0, -9.0, -9.0, -9.0]])
    posterior = GumbelCategorical(4).posterior(logits)
    kl = posterior.kl()
    assert kl.shape == (3, 1)
    for row, value in zip(logits.tolist(), kl[:, 0].tolist(), strict=True):
        total = sum(math.exp(v) for v in row)
        probs = [math.exp(v) / total for v in row]
        direct = sum(p * math.log(p * len(row)) for p in probs)  # KL(p || uniform) = sum p log(p k)
        assert value == pytest.approx(direct, abs=1e-12)
    assert kl[1, 0].item() == pytest.approx(0.0, abs=1e-12)
    assert kl[2, 0].item() == pytest.approx(math.log(4), abs=1e-6)
    assert posterior.max_kl == pytest.approx(math.log(4))



def test_categorical_kl_of_a_class_ruled_out_by_a_minus_infinite_logit_is_finite_and_so_are_its_gradients():
    logits = torch.tensor([[2.0, -math.inf, 0.0, 1.0]], requires_grad=True)
    kl = GumbelCategorical(4).posterior(logits).kl()
    probs = [math.exp(v) / sum(math.exp(u) for u in (2.0, 0.0, 1.0)) for v in (2.0, 0.0, 1.0)]
    assert kl.item() == pytest.approx(sum(p * math.log(p * 4) for p in probs), abs=1e-12)
    kl.sum().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, 1] == 0

def test_gumbel_softmax_samples_are_relaxed_and_their_argmax_is_categorical():
    logits = torch.tensor([1.0, 0.0, -1.0]).expand(100_000, 3)
    posterior = GumbelCategorical(3, temperature=0.67).posterior(logits)
    sample = posterior.rsample()
    assert torch.all(sample > 0) and torch.allclose(sample.sum(-1), torch.ones(100_000))
    assert not torch.all((sample == 0) | (sample == 1)), "training samples should be relaxed, not one-hot"
    # argmax of Gumbel-perturbed logits is exactly Categorical(softmax(logits)), at any temperature
    n = sample.shape[0]
    frequency = torch.bincount(sample.argmax(-1), minlength=3) / n
    probs = torch.softmax(logits[0], -1)
    stderr = (probs * (1 - probs) / n).sqrt()
    assert torch.all((frequency - probs).abs() < 5 * stderr), (frequency, probs)


def test_categorical_mode_is_the_argmax_one_hot():
    logits = torch.tensor([[0.1, 3.0, -1.0], [5.0, 0.0, 0.0]])
    mode = GumbelCategorical(3).posterior(logits).mode
    assert torch.equal(mode, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))


def test_a_categorical_mode_of_nan_logits_is_nan_not_a_class():
    # the argmax of NaN logits is a class (0 for all NaN): metrics scored NaN weights' codes as that category
    logits = torch.tensor([[math.nan, math.nan, math.nan], [0.1, math.nan, 2.0], [5.0, 0.0, 0.0]])
    mode = GumbelCategorical(3).posterior(logits).mode
    assert mode[:2].isnan().all() and torch.equal(mode[2], torch.tensor([1.0, 0.0, 0.0]))


def test_joint_orders_parts_and_reports_kl_per_part():
    joint = build_part("latent family", {"type": "joint", "parts": [
        {"type": "gaussian", "name": "cont", "dim": 2},
        {"type": "gumbel_categorical", "name": "digit", "categories": 3},
        {"type": "gumbel_categorical", "categories": 4},
    ]})
    assert list(joint.part_slices()) == ["cont", "digit", "z2"]
    assert joint.part_slices() == {"cont": slice(0, 2), "digit": slice(2, 5), "z2": slice(5, 9)}
    assert (joint.param_size, joint.code_size) == (4 + 3 + 4, 2 + 3 + 4)

    params = torch.randn(5, joint.param_size)
    posterior = joint.posterior(params)
    cont = gaussian_posterior(params[:, :2], params[:, 2:4])
    digit = GumbelCategorical(3).posterior(params[:, 4:7])
    last = GumbelCategorical(4).posterior(params[:, 7:])
    kl_parts = posterior.kl_parts()
    assert list(kl_parts) == ["cont", "digit", "z2"]
    assert torch.allclose(kl_parts["cont"], cont.kl().sum(-1))
    assert torch.allclose(kl_parts["digit"], digit.kl().sum(-1))
    assert torch.allclose(kl_parts["z2"], last.kl().sum(-1))
    assert torch.allclose(posterior.kl(), torch.cat([cont.kl(), digit.kl(), last.kl()], -1))
    assert torch.equal(posterior.mode, torch.cat([cont.mode, digit.mode, last.mode], -1))
    assert posterior.rsample().shape == (5, joint.code_size)


def test_joint_prior_samples_are_gaussian_then_one_hot():
    joint = build_part("latent family", {"type": "joint", "parts": [
        {"type": "gaussian", "dim": 2}, {"type": "gumbel_categorical", "categories": 3}]})
    z = joint.sample_prior(1000)
    assert z.shape == (1000, 5)
    assert torch.equal(z[:, 2:].sum(-1), torch.ones(1000)) and set(z[:, 2:].unique().tolist()) == {0.0, 1.0}
    assert abs(z[:, :2].mean().item()) < 0.15 and abs(z[:, :2].std().item() - 1) < 0.1


def test_a_joint_reference_code_is_on_one_device_where_its_parts_give_theirs_on_two():
    """On a GPU, the Gaussian's (its prior's buffer) was on cuda and the categorical's one-hot on the CPU: torch.cat
    failed, and so did every traversal of a JointVAE on a GPU (vaezoo show --device cuda). The meta device stands
    for the GPU here."""
    joint = build_part("latent family", {"type": "joint", "parts": [
        {"type": "gaussian", "dim": 2}, {"type": "gumbel_categorical", "categories": 3}]}).to("meta")
    code = joint.reference_code()
    assert code.device.type == "meta" and code.shape == (5,)


def test_families_state_their_layout_as_a_card_does():
    joint = build_part("latent family", {"type": "joint", "parts": [
        {"type": "gaussian", "name": "cont", "dim": 2}, {"type": "gumbel_categorical", "categories": 3},
        {"type": "joint", "name": "inner", "parts": [{"type": "gaussian", "name": "a", "dim": 1}]}]})
    assert Gaussian(4).layout() == [LatentPart(family="gaussian", size=4)]
    assert GumbelCategorical(5).layout() == [LatentPart(family="categorical", size=5)]
    assert joint.layout() == [LatentPart(family="gaussian", size=2, name="cont"),
                              LatentPart(family="categorical", size=3, name="z1"),
                              LatentPart(family="gaussian", size=1, name="inner.a")]
    assert layout_text(joint.layout()) == "gaussian(2) + categorical(3) + gaussian(1)"


def test_a_family_that_states_no_layout_gets_one_part_named_by_its_class():
    class Laplace(LatentFamily):  # a plugin's family that writes nothing for its layout
        def __init__(self, dim: int):
            super().__init__()
            self.code_size, self.param_size = dim, 2 * dim

    assert Laplace(8).layout() == [LatentPart(family="laplace", size=8)]
    joint = build_part("latent family", {"type": "joint", "parts": [Laplace(2), GumbelCategorical(3)]})
    assert layout_text(joint.layout()) == "laplace(2) + categorical(3)"


@pytest.mark.parametrize("make, message", [
    (lambda: Gaussian(0), "dim >= 1"),
    (lambda: GumbelCategorical(1), "categories >= 2"),
    (lambda: GumbelCategorical(3, temperature=0.0), "temperature must be a finite number above 0, got 0.0"),
    # NaN was taken and the run blamed the family's rsample(); inf was taken and sampled 1/k in every category
    (lambda: GumbelCategorical(3, temperature=float("nan")), "temperature must be a finite number above 0, got nan"),
    (lambda: GumbelCategorical(3, temperature=float("inf")), "temperature must be a finite number above 0, got inf"),
    (lambda: build_part("latent family", {"type": "joint", "parts": [
        {"type": "gaussian", "name": "a", "dim": 1}, {"type": "gaussian", "name": "a", "dim": 1}]}),
     "both named 'a'"),
])
def test_invalid_latents_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_family_named_in_any_script_or_case_gets_a_layout_a_card_holds():
    from vaezoo.context import LatentPart

    assert LatentPart(family="Lâplace", size=3).family == "lâplace"
