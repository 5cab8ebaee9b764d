"""Regularizers against known answers: beta-KL by hand, the capacity schedule, TC estimators by brute force."""

from __future__ import annotations

import math
import re

import pytest
import torch

from vaezoo.assemble import build_part
from vaezoo.errors import CardError, InputError, VaezooError
from vaezoo.latents import Gaussian
from vaezoo.regularizers import Beta, Capacity, TotalCorrelation, log_importance_weights


pytestmark = pytest.mark.usefixtures("float64_seeded")


def joint_posterior(mean: float, logvar: float, logits: list[float], batch: int = 2, dim: int = 2):
    """A posterior with a Gaussian part ``cont`` (every entry ``mean``, ``logvar``) and a categorical ``cat``."""
    joint = build_part("latent family", {"type": "joint", "parts": [{"type": "gaussian", "name": "cont", "dim": dim},
                   {"type": "gumbel_categorical", "name": "cat", "categories": len(logits)}]})
    params = torch.tensor([[mean] * dim + [logvar] * dim + logits] * batch)
    posterior = joint.posterior(params)
    return posterior, posterior.mode


def test_beta_weighs_the_kl_summed_over_dimensions_and_averaged_over_the_batch():
    # KL(N(1, 1) || N(0, 1)) = 1/2 per dimension; 3 dimensions -> 1.5 per example; beta = 4 -> 6
    posterior = Gaussian(3).posterior(torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]] * 5))
    terms = Beta(beta=4.0)(posterior, posterior.mode, step=0)
    assert terms.keys() == {"kl"}
    assert terms["kl"].item() == pytest.approx(6.0)


def test_beta_on_one_part_of_a_joint_latent():
    posterior, z = joint_posterior(1.0, 0.0, [0.0, 0.0, 0.0])  # cont KL = 2 x 1/2; cat KL = 0
    assert Beta(beta=2.0, part="cont")(posterior, z, 0)["kl_cont"].item() == pytest.approx(2.0)
    assert Beta(beta=2.0, part="cat")(posterior, z, 0)["kl_cat"].item() == pytest.approx(0.0)
    with pytest.raises(VaezooError, match="no part 'nope'"):
        Beta(part="nope")(posterior, z, 0)


@pytest.mark.parametrize("step, expected", [(0, 1.0), (500, 3.0), (1000, 5.0), (1001, 5.0), (10**6, 5.0)])
def test_capacity_rises_linearly_then_holds(step, expected):
    # C(step) = min + (max - min) * step / N, held at max after N: min 1, max 5, N 1000
    group = {"name": "continuous", "parts": ["cont"], "min": 1.0, "max": 5.0, "iterations": 1000, "gamma": 30.0}
    capacity = Capacity([group])
    posterior, z = joint_posterior(0.0, 0.0, [0.0, 0.0, 0.0])  # every KL is 0, so the term is gamma * C
    assert capacity.targets(posterior, step) == {"C_continuous": pytest.approx(expected)}
    assert capacity(posterior, z, step)["capacity_continuous"].item() == pytest.approx(30.0 * expected)


@pytest.mark.parametrize("step, expected", [(0, 0.0), (100, 0.5), (500, math.log(3)), (1000, math.log(3)),
                                            (5000, math.log(3))])
def test_categorical_capacity_is_capped_at_log_k(step, expected):
    # min 0, max 5 over 1000 steps would reach 2.5 at step 500, but a 3-way categorical holds at most log 3
    group = {"name": "discrete", "parts": ["cat"], "min": 0.0, "max": 5.0, "iterations": 1000, "gamma": 10.0}
    posterior, z = joint_posterior(0.0, 0.0, [0.0, 0.0, 0.0])
    capacity = Capacity([group])
    assert capacity.targets(posterior, step)["C_discrete"] == pytest.approx(expected)
    assert capacity(posterior, z, step)["capacity_discrete"].item() == pytest.approx(10.0 * expected)


def test_capacity_penalises_the_distance_of_the_group_kl_from_its_target():
    # cont KL: 2 dims x (2^2 / 2) = 4 per example; C(0) = 1; gamma 3 -> 3 * |4 - 1| = 9
    group = {"name": "c", "parts": ["cont"], "min": 1.0, "max": 5.0, "iterations": 10, "gamma": 3.0}
    posterior, z = joint_posterior(2.0, 0.0, [0.0, 0.0])
    assert Capacity([group])(posterior, z, 0)["capacity_c"].item() == pytest.approx(9.0)


def test_capacity_at_a_step_does_not_depend_on_earlier_calls():
    """The schedule is a function of the step passed in, so a resumed run continues where it stopped."""
    group = {"name": "c", "parts": ["cont"], "min": 0.0, "max": 5.0, "iterations": 100, "gamma": 1.0}
    posterior, z = joint_posterior(0.5, -0.3, [0.2, 0.0])
    used = Capacity([group])
    for step in range(0, 60, 7):
        used(posterior, z, step)
    assert torch.equal(used(posterior, z, 60)["capacity_c"], Capacity([group])(posterior, z, 60)["capacity_c"])
    assert used.state_dict() == {}  # nothing hidden that a checkpoint would have to carry


def test_capacity_groups_are_validated():
    with pytest.raises(ValueError, match="iterations"):
        Capacity([{"name": "c", "parts": ["cont"], "max": 5.0, "iterations": 0, "gamma": 1.0}])


@pytest.mark.parametrize("groups, problem", [
    ([], r"groups must be one or more, each of its own name, got the names \[\]"),
    ([{"name": "c", "parts": ["cont"]}, {"name": "c", "parts": ["cat"]}], "each of its own name"),
    ([{"name": "c", "parts": ["cont", "cont"]}], "names a part more than once"),
    ([{"name": "c", "parts": ["cont"], "gamma": 1e308}], r"gamma \* max is inf"),
    ([{"name": "c", "parts": ["cont"], "max": 1e308, "gamma": 30.0}], r"gamma \* max is inf")])
def test_capacity_refuses_groups_that_would_train_another_objective_than_the_card_says(groups, problem):
    # no group trained no term; two groups of one name kept the second's term alone; a part named twice weighed
    # its KL twice; a gamma * max beyond a float made the loss inf at step 0 or 1, blamed on the learning rate
    groups = [{"max": 5.0, "iterations": 10, "gamma": 1.0, **g} for g in groups]
    with pytest.raises(ValueError, match=problem):
        Capacity(groups)


def test_capacity_of_a_part_the_latent_lacks_names_the_group_and_the_parts():
    # it was a KeyError ('nope') from inside the forward pass: a traceback at the run's first step
    capacity = Capacity([{"name": "c", "parts": ["nope"], "max": 5.0, "iterations": 10, "gamma": 1.0}])
    posterior, z = joint_posterior(0.0, 0.0, [0.0, 0.0, 0.0])
    for call in (lambda: capacity(posterior, z, 0), lambda: capacity.targets(posterior, 0)):
        with pytest.raises(CardError, match="group 'c' names the part.s. nope, which the latent does not have; "
                                            "its parts are cont, cat"):
            call()


# Total correlation, by brute force. Chen et al. (2018), "Isolating Sources of Disentanglement in VAEs",
# section 4.1 and appendix C: for a minibatch z_1..z_B (z_i ~ q(z|x_i)) from a dataset of size N,
#   log q(z_i) ~= log sum_j w_ij q(z_i|x_j)   and   log prod_d q(z_id) ~= sum_d log sum_j w_ij q(z_id|x_j)
# with minibatch-weighted sampling w_ij = 1 / (N B); with minibatch-stratified sampling (M = B - 1 examples
# besides x_i): w_ii = 1/N, one other example (here x_{i+1 mod B}) (N - M) / (N M), the remaining M - 1 1/M.
# Then MI = mean_i[log q(z_i|x_i) - log q(z_i)], TC = mean_i[log q(z_i) - log prod_d q(z_id)],
# dimension-wise KL = mean_i[log prod_d q(z_id) - log p(z_i)].

def log_normal(x: float, mean: float, logvar: float) -> float:
    return -0.5 * (math.log(2 * math.pi) + logvar + (x - mean) ** 2 / math.exp(logvar))


def brute_force_decomposition(mean, logvar, z, dataset_size: int, sampling: str) -> tuple[float, float, float]:
    batch, dims = len(z), len(z[0])
    others = batch - 1

    def weight(i: int, j: int) -> float:
        if sampling == "mws":
            return 1 / (dataset_size * batch)
        if j == i:
            return 1 / dataset_size
        if j == (i + 1) % batch:
            return (dataset_size - others) / (dataset_size * others)
        return 1 / others

    mi = tc = dwkl = 0.0
    for i in range(batch):
        log_qz_x = sum(log_normal(z[i][d], mean[i][d], logvar[i][d]) for d in range(dims))
        qz = 0.0
        for j in range(batch):
            qz += weight(i, j) * math.exp(sum(log_normal(z[i][d], mean[j][d], logvar[j][d]) for d in range(dims)))
        log_prod = 0.0
        for d in range(dims):
            log_prod += math.log(sum(weight(i, j) * math.exp(log_normal(z[i][d], mean[j][d], logvar[j][d]))
                                     for j in range(batch)))
        log_pz = sum(log_normal(z[i][d], 0.0, 0.0) for d in range(dims))
        mi += (log_qz_x - math.log(qz)) / batch
        tc += (math.log(qz) - log_prod) / batch
        dwkl += (log_prod - log_pz) / batch
    return mi, tc, dwkl


@pytest.mark.parametrize("sampling", ["mws", "mss"])
@pytest.mark.parametrize("batch, dims, dataset_size", [(5, 3, 40), (2, 2, 10), (6, 1, 1000)])
def test_total_correlation_estimators_match_brute_force(sampling, batch, dims, dataset_size):
    mean, logvar = 0.8 * torch.randn(batch, dims), 0.5 * torch.randn(batch, dims)
    posterior = Gaussian(dims).posterior(torch.cat([mean, logvar], -1))
    z = posterior.rsample()
    terms = TotalCorrelation(dataset_size, alpha=1.0, beta=1.0, gamma=1.0, sampling=sampling)(posterior, z, 0)
    expected = brute_force_decomposition(mean.tolist(), logvar.tolist(), z.tolist(), dataset_size, sampling)
    got = (terms["mi"].item(), terms["tc"].item(), terms["dwkl"].item())
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_total_correlation_weights_and_telescoping_sum():
    mean, logvar = torch.randn(4, 3), 0.3 * torch.randn(4, 3)
    posterior = Gaussian(3).posterior(torch.cat([mean, logvar], -1))
    z = posterior.rsample()
    unit = TotalCorrelation(100, alpha=1.0, beta=1.0, gamma=1.0, sampling="mss")(posterior, z, 0)
    weighted = TotalCorrelation(100, alpha=2.0, beta=3.0, gamma=5.0, sampling="mss")(posterior, z, 0)
    for name, factor in [("mi", 2.0), ("tc", 3.0), ("dwkl", 5.0)]:
        assert weighted[name].item() == pytest.approx(factor * unit[name].item())
    # MI + TC + dimension-wise KL = mean_i[log q(z_i|x_i) - log p(z_i)], whatever the estimate of q(z)
    log_ratio = sum(log_normal(z[i, d].item(), mean[i, d].item(), logvar[i, d].item())
                    - log_normal(z[i, d].item(), 0.0, 0.0) for i in range(4) for d in range(3)) / 4
    assert sum(v.item() for v in unit.values()) == pytest.approx(log_ratio)


def test_stratified_total_correlation_of_a_batch_of_one_is_an_input_error():
    posterior = Gaussian(3).posterior(torch.zeros(1, 6))
    with pytest.raises(InputError, match="needs batches of at least 2 images, got 1: pass 2 or more"):
        TotalCorrelation(100, sampling="mss")(posterior, posterior.mode, 0)
    assert set(TotalCorrelation(100, sampling="mws")(posterior, posterior.mode, 0)) == {"mi", "tc", "dwkl"}


def test_total_correlation_on_the_continuous_part_of_a_joint_latent():
    posterior, _ = joint_posterior(0.3, -0.5, [1.0, 0.0, 0.0], batch=4, dim=2)
    z = posterior.rsample()
    on_part = TotalCorrelation(50, part="cont", sampling="mws")(posterior, z, 0)
    cont = posterior.parts["cont"]
    alone = TotalCorrelation(50, sampling="mws")(cont, z[:, :2], 0)
    expected = {f"{k}_cont": v.item() for k, v in alone.items()}
    assert {k: v.item() for k, v in on_part.items()} == pytest.approx(expected)
    with pytest.raises(NotImplementedError,
                       match="CategoricalPosterior sets no 'distribution', so it has no log_density_matrix"):
        TotalCorrelation(50, part="cat")(posterior, z, 0)


@pytest.mark.parametrize("batch, dataset_size", [(2, 10), (5, 40), (64, 60000)])
def test_stratified_weights_rows_sum_to_one(batch, dataset_size):
    weights = log_importance_weights(batch, dataset_size).exp()
    assert torch.allclose(weights.sum(1), torch.ones(batch))
    assert torch.allclose(weights.diagonal(), torch.full((batch,), 1 / dataset_size))


@pytest.mark.parametrize("kwargs, message", [
    ({"dataset_size": 100, "sampling": "mcmc"}, "'mws' or 'mss'"),
    ({"dataset_size": 1}, "at least 2"),
])
def test_total_correlation_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TotalCorrelation(**kwargs)


GROUP = {"name": "c", "parts": ["cont"], "max": 5.0, "iterations": 10, "gamma": 1.0}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
@pytest.mark.parametrize("build, problem", [
    (lambda bad: Beta(beta=bad), "regularizer 'beta': beta must be a finite number of at least 0, got "),
    (lambda bad: TotalCorrelation(100, alpha=bad), "regularizer 'total_correlation': alpha must be a finite number"),
    (lambda bad: TotalCorrelation(100, beta=bad), "regularizer 'total_correlation': beta must be a finite number"),
    (lambda bad: TotalCorrelation(100, gamma=bad), "regularizer 'total_correlation': gamma must be a finite number"),
    (lambda bad: Capacity([{**GROUP, "gamma": bad}]), "field 'gamma': Input should be"),
    (lambda bad: Capacity([{**GROUP, "max": bad}]), "field 'max': Input should be"),
    (lambda bad: Capacity([{**GROUP, "min": bad}]), "field 'min': Input should be"),
], ids=["beta", "tc-alpha", "tc-beta", "tc-gamma", "capacity-gamma", "capacity-max", "capacity-min"])
def test_a_weight_that_is_not_finite_or_is_negative_is_refused_when_built(build, problem, bad):
    """A NaN, infinite or negative weight would make the loss NaN at step 0, or reward what the term penalises."""
    with pytest.raises(ValueError) as info:
        build(bad)
    assert problem in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("sampling", ["mss", "mws"])
def test_total_correlation_of_a_bfloat16_posterior_is_estimated_in_float32(sampling):
    """A bfloat16 model's densities, summed in bfloat16, put the TC most of a nat off; the estimator upcasts them."""
    batch, dim = 64, 10
    params = torch.cat([torch.randn(batch, dim) * 2, torch.randn(batch, dim) - 4], dim=1).to(torch.bfloat16)
    posterior = Gaussian(dim).to(torch.bfloat16).posterior(params)
    z = posterior.rsample()
    estimator = TotalCorrelation(737_280, alpha=1, beta=1, gamma=1, sampling=sampling)
    in_bf16 = estimator(posterior, z, 0)
    exact = estimator(Gaussian(dim).posterior(params.double()), z.double(), 0)
    assert {k: v.dtype for k, v in in_bf16.items()} == dict.fromkeys(exact, torch.float32)
    assert {k: v.item() for k, v in in_bf16.items()} == pytest.approx({k: v.item() for k, v in exact.items()},
                                                                       abs=0.05)


def _joint_model(regularizers: list[dict], parts: tuple[dict, ...] = ()):
    from kit import JOINT_TC_CAPACITY, make_card

    from vaezoo.assemble import build_model
    from vaezoo.entries.schema import Card

    latent = {"type": "joint", "parts": [*JOINT_TC_CAPACITY["latent"]["parts"], *parts]}
    spec = {**JOINT_TC_CAPACITY, "latent": latent, "regularizers": regularizers}
    return build_model(Card.model_validate(make_card(model=spec)))


def test_a_term_named_like_an_earlier_one_is_refused_instead_of_replacing_it_in_the_loss():
    model = _joint_model([{"type": "beta", "beta": 4.0}, {"type": "beta", "beta": 1.0}])
    with pytest.raises(VaezooError, match=r"its term 'kl' has the name of an earlier regularizer's term, which it "
                                          r"would replace in the loss"):
        model(torch.rand(4, 1, 16, 16).round(), step=0)


@pytest.mark.parametrize("regularizers, fix", [
    ([{"type": "factorvae", "layers": 1, "hidden": 8}, {"type": "beta", "beta": 1.0}],
     "FactorVAE takes no 'part' to act on a part of the latent of its own: keep one of the two on the card"),
    ([{"type": "beta", "beta": 4.0, "part": "cont"}, {"type": "beta", "beta": 1.0, "part": "cont"}],
     "two regularizers of one type: give each its own 'part'")], ids=["factorvae-beta", "beta-beta"])
def test_a_term_named_like_an_earlier_one_is_told_a_fix_that_fits_both_regularizers(regularizers, fix):
    # beta after FactorVAE was told "two regularizers of one type: give each its own 'part'": FactorVAE takes none
    model = _joint_model(regularizers)
    with pytest.raises(VaezooError, match=rf"give each term a name of its own \({re.escape(fix)}\)$"):
        model(torch.rand(4, 1, 16, 16).round(), step=0)


def test_two_total_correlations_on_two_parts_each_weigh_in_the_loss():
    tc = {"type": "total_correlation", "dataset_size": 1000, "sampling": "mws"}
    regularizers = [{**tc, "part": "cont"}, {**tc, "part": "cont2", "beta": 3.0}, {"type": "beta", "part": "cat"}]
    model = _joint_model(regularizers, parts=({"type": "gaussian", "name": "cont2", "dim": 2},))
    assert model(torch.rand(4, 1, 16, 16).round(), step=0).terms.keys() == {
        "reconstruction", "mi_cont", "tc_cont", "dwkl_cont", "mi_cont2", "tc_cont2", "dwkl_cont2", "kl_cat"}
