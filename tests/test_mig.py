"""MIG in both variants and the aggregate-posterior entropy estimator, on codes with known answers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from vaezoo.data import ImageDataset
from vaezoo.data.dsprites import dsprites
from vaezoo.errors import MetricError, VaezooError
from vaezoo.metrics import entropy, mig
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.provenance import metric_parameters
from vaezoo.plugins import registry

SIZES = (4, 8, 8, 8)


def grid_factors(sizes=SIZES) -> np.ndarray:
    """Every combination of the factor classes once, ``(prod(sizes), len(sizes))``."""
    return np.stack(np.meshgrid(*map(np.arange, sizes), indexing="ij"), -1).reshape(-1, len(sizes))


def tight_posteriors(code: np.ndarray, std: float = 0.05):
    """Gaussian posteriors centred on ``code`` with a small spread (the classes are 1 apart)."""
    mean = torch.tensor(code, dtype=torch.float32)
    return mean, torch.full_like(mean, 2 * math.log(std))


# ---- disentanglement_lib's variant -------------------------------------------------------------

def test_discrete_mutual_information_known_values():
    a = np.array([0, 0, 1, 1])
    assert mig.discrete_mutual_information(a, a) == pytest.approx(math.log(2))
    assert mig.discrete_mutual_information(a, np.array([0, 1, 0, 1])) == pytest.approx(0)
    # H(X) for the distribution (1/2, 1/4, 1/4), with the labels' values irrelevant
    x = np.array([7, 7, 3, 5])
    assert mig.discrete_mutual_information(x, x) == pytest.approx(1.5 * math.log(2))


def test_discretize_uses_equal_width_bins():
    codes = np.array([[0.0], [0.49], [0.51], [1.0]])
    np.testing.assert_array_equal(mig.discretize(codes, bins=2)[:, 0], [1, 1, 2, 2])


def test_dlib_code_copying_each_factor_scores_one():
    factors = grid_factors((3, 6, 10))
    np.testing.assert_allclose(mig.dlib_mig_gaps(factors.astype(float), factors), 1.0)


def test_dlib_random_code_scores_about_zero():
    rng = np.random.default_rng(0)
    factors = rng.integers(0, 6, size=(10_000, 3))
    assert mig.dlib_mig_gaps(rng.normal(size=(10_000, 5)), factors).max() < 0.03


def test_dlib_two_copies_of_a_factor_score_zero_for_it():
    factors = grid_factors((3, 6, 10))
    codes = factors[:, [0, 0, 1, 2]].astype(float)
    np.testing.assert_allclose(mig.dlib_mig_gaps(codes, factors), [0.0, 1.0, 1.0])


def test_dlib_constant_factor_scores_zero_rather_than_nan():
    factors = np.stack([np.zeros(60, int), np.arange(60) % 6], axis=1)
    np.testing.assert_allclose(mig.dlib_mig_gaps(factors.astype(float), factors), [0.0, 1.0])


# ---- the sampling estimator and Chen et al.'s variant ------------------------------------------

def test_entropy_of_identical_standard_normal_posteriors():
    n, dims = 3000, 3
    estimate = entropy.estimate_entropies(torch.zeros(n, dims), torch.zeros(n, dims), samples=3000)
    # q(z) is exactly N(0, I): H(z_j) = 0.5 log(2 pi e); the mixture equals the product of its marginals
    np.testing.assert_allclose(estimate.marginal.numpy(), 0.5 * math.log(2 * math.pi * math.e), atol=0.05)
    assert estimate.total_correlation == pytest.approx(0, abs=1e-6)


def test_tight_code_entropies_are_log_counts_plus_the_noise_entropy():
    factors = grid_factors()
    mean, logvar = tight_posteriors(factors[:, :2])
    estimate = entropy.estimate_entropies(mean, logvar, torch.tensor(factors), samples=2000)
    noise = 0.5 * math.log(2 * math.pi * math.e * 0.05**2)
    np.testing.assert_allclose(estimate.marginal.numpy(), [math.log(4) + noise, math.log(8) + noise], atol=0.05)
    # conditioning on the factor a dimension copies leaves only the noise; other factors change nothing
    mi = estimate.mutual_information.numpy()
    np.testing.assert_allclose(mi[0], [math.log(4), 0], atol=1e-4)
    np.testing.assert_allclose(mi[1], [0, math.log(8)], atol=1e-4)
    np.testing.assert_allclose(mi[2:], 0, atol=1e-4)


def test_chen_code_copying_each_factor_scores_one():
    factors = grid_factors()
    mean, logvar = tight_posteriors(factors)
    np.testing.assert_allclose(mig.chen_mig_gaps(mean, logvar, torch.tensor(factors), samples=2000), 1, atol=1e-3)


def test_chen_random_code_scores_about_zero():
    factors = grid_factors()
    generator = torch.Generator().manual_seed(0)
    mean = torch.randn(len(factors), 5, generator=generator)
    gaps = mig.chen_mig_gaps(mean, torch.zeros_like(mean), torch.tensor(factors), samples=2000)
    assert np.abs(gaps).max() < 0.03


def test_chen_two_copies_of_a_factor_score_zero_for_it():
    factors = grid_factors()
    mean, logvar = tight_posteriors(factors[:, [0, 0, 1, 2, 3]])
    gaps = mig.chen_mig_gaps(mean, logvar, torch.tensor(factors), samples=2000)
    np.testing.assert_allclose(gaps, [0, 1, 1, 1], atol=1e-3)


def test_chen_constant_factor_scores_zero_rather_than_inf():
    # a factor that takes one value on the dataset (ln |V_k| = 0): the estimate's noise over 0 was inf, or NaN
    factors = grid_factors((1, 8, 8))
    mean, logvar = tight_posteriors(factors[:, 1:])
    gaps = mig.chen_mig_gaps(mean, logvar, torch.tensor(factors), samples=64)
    np.testing.assert_allclose(gaps, [0, 1, 1], atol=1e-3)


@pytest.mark.parametrize("where", ["mean", "logvar"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_chen_posteriors_that_are_not_finite_are_refused_in_one_line(where, bad):
    """One image's posterior not finite made every entropy NaN, and mig_chen NaN without a word."""
    factors = grid_factors((4, 8))
    mean, logvar = tight_posteriors(factors)
    (mean if where == "mean" else logvar)[3, 1] = bad
    with pytest.raises(VaezooError, match=r"^the posteriors of 1 of the 32 images hold NaN or infinite locations or "
                                          r"scales; the entropies need finite ones"):
        mig.chen_mig_gaps(mean, logvar, torch.tensor(factors), samples=32)


def test_total_correlation_of_a_duplicated_dimension_is_the_log_count():
    # z = (v0, v0, v1, v2) + noise: the two copies share log 4 nats; the rest are independent
    factors = grid_factors()
    mean, logvar = tight_posteriors(factors[:, [0, 0, 1, 2]])
    estimate = entropy.estimate_entropies(mean, logvar, samples=2000)
    assert estimate.total_correlation == pytest.approx(math.log(4), abs=0.02)


def test_grid_and_scatter_grouping_give_the_same_estimate():
    # a complete grid takes the reshaping path; use_grid=False scatters, in other block sizes
    factors = grid_factors()
    mean = torch.randn(len(factors), 3, generator=torch.Generator().manual_seed(1))
    logvar = torch.full_like(mean, -2.0)
    first = entropy.estimate_entropies(mean, logvar, torch.tensor(factors), samples=500)
    second = entropy.estimate_entropies(mean, logvar, torch.tensor(factors), samples=500, block=5000, use_grid=False)
    torch.testing.assert_close(first.conditional, second.conditional, rtol=1e-5, atol=1e-5)
    assert first.joint == pytest.approx(second.joint, rel=1e-5)


@pytest.mark.parametrize("use_grid", [True, False])
def test_the_estimate_does_not_depend_on_how_many_threads_sum_it(use_grid):
    factors = torch.tensor(grid_factors())
    mean = torch.randn(len(factors), 3, generator=torch.Generator().manual_seed(2))
    logvar = torch.full_like(mean, -1.0)
    estimates, previous = [], torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            estimates.append(entropy.estimate_entropies(mean, logvar, factors, samples=300, use_grid=use_grid))
    finally:
        torch.set_num_threads(previous)
    one, two = estimates
    assert torch.equal(one.marginal, two.marginal) and torch.equal(one.conditional, two.conditional)
    assert one.joint == two.joint


# ---- the registered metrics on a model ---------------------------------------------------------

@pytest.fixture(scope="module")
def small_dsprites():
    return dsprites(subset=256, subset_seed=3)


def tiny_model():
    from vaezoo.assemble import build_part

    torch.manual_seed(0)
    return build_part("architecture", {"type": "vae", "image_size": 64, "channels": 1,
                                       "latent": {"type": "gaussian", "dim": 4},
                                       "encoder": {"type": "conv_encoder", "hidden": 32},
                                       "decoder": {"type": "conv_decoder", "hidden": 32}})


def test_metrics_are_registered_by_the_core():
    for name in ("mig_chen", "mig_dlib", "total_correlation"):
        assert registry("metric").plugin_of(name) == "core"


def test_registered_metrics_run_on_a_model(small_dsprites):
    model = tiny_model()
    assert 0 <= registry("metric")["mig_chen"](model, small_dsprites, batch_size=128) <= 1
    assert 0 <= mig.mig_dlib(model, small_dsprites, batch_size=128, points=500) <= 1
    assert math.isfinite(registry("metric")["total_correlation"](model, small_dsprites, batch_size=128))


def test_mig_chen_and_total_correlation_share_one_estimate(small_dsprites, monkeypatch):
    calls = []
    real = entropy.estimate_entropies
    monkeypatch.setattr(entropy, "estimate_entropies", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = tiny_model()
    evaluation = Evaluation(model, small_dsprites, batch_size=128)  # as vaezoo eval computes a card's metrics
    together = (mig.mig_chen.measure(evaluation), entropy.total_correlation.measure(evaluation))
    assert len(calls) == 1
    alone = (mig.mig_chen(model, small_dsprites, batch_size=128),  # each on an evaluation of its own
             entropy.total_correlation(model, small_dsprites, batch_size=128))
    assert len(calls) == 3 and together == alone


def test_chen_leaves_out_the_shape_factor(small_dsprites):
    assert entropy.chen_columns(small_dsprites) == (1, 2, 3, 4)


def test_mig_chen_draws_at_most_the_dataset_s_images_and_its_card_records_the_setting(small_dsprites):
    """``samples`` is an upper bound, as in the reference code (``randperm(N)[:n_samples]``): on 256 images the
    default 10,000 draws each image once, the value of samples=256, and the recorded setting, 10,000, measures it
    again. A smaller setting draws fewer."""
    model = tiny_model()
    evaluation = Evaluation(model, small_dsprites, batch_size=128)
    recorded = metric_parameters(mig.mig_chen)
    assert recorded == {"samples": 10_000, "seed": 0}
    value = mig.mig_chen.measure(evaluation, **recorded)
    assert value == mig.mig_chen.measure(evaluation, samples=256) != mig.mig_chen.measure(evaluation, samples=100)
    assert mig.mig_chen(model, small_dsprites, batch_size=128, **recorded) == value


def test_mig_chen_refuses_a_dataset_with_no_ordered_factor_that_varies():
    """Every factor constant, or every varying one nominal (left out): 0.0 and NaN (numpy's mean of an empty
    slice), which looked measured or said nothing."""
    images = torch.zeros(8, 1, 64, 64, dtype=torch.uint8)
    shape = torch.arange(8)[:, None] % 2
    for factors, nominal, said in (
            (torch.zeros(8, 2, dtype=torch.long), (), r"no factor of the dataset takes two values \(8 image\(s\)\), "
                                                      r"so mig_chen has nothing to measure"),
            (torch.cat([shape, torch.zeros_like(shape)], 1), ("shape",),
             r"no ordered factor of the dataset takes two values \(Chen et al\.'s MIG leaves nominal factors out\), "
             r"so there is no gap to measure")):
        dataset = ImageDataset(images, factors=factors, factor_names=("shape", "scale"), nominal_factors=nominal)
        with pytest.raises(MetricError, match=f"^{said}$"):
            mig.mig_chen(tiny_model(), dataset)


def test_chen_takes_factors_given_as_an_array_or_a_list(small_dsprites):
    """A dataset made with numpy factors met torch.unique's ``argument 'input' must be Tensor``, a list ``'list' object
    has no attribute 'shape'``; every other metric took them."""
    model = tiny_model()
    expected = (mig.mig_chen(model, small_dsprites, batch_size=128),
                registry("metric")["total_correlation"](model, small_dsprites, batch_size=128))
    for factors in (small_dsprites.factors.numpy(), small_dsprites.factors.tolist()):
        given = dataclasses.replace(small_dsprites, factors=factors)
        assert (mig.mig_chen(model, given, batch_size=128),
                registry("metric")["total_correlation"](model, given, batch_size=128)) == expected


def test_metrics_need_factors():
    images = ImageDataset(torch.zeros(4, 1, 64, 64, dtype=torch.uint8))
    for metric in (mig.mig_chen, mig.mig_dlib):
        with pytest.raises(VaezooError, match="needs a dataset with ground-truth factors"):
            metric(tiny_model(), images)
