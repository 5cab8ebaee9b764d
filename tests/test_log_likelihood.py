"""The test ELBO and the importance-sampled log-likelihood: known relations, protocol only, clear refusals."""

from __future__ import annotations

import math

import pytest
import torch
from kit import make_card

from vaezoo.assemble import build_part
from vaezoo.data import ImageDataset
from vaezoo.entries.schema import Card
from vaezoo.errors import MetricError, VaezooError
from vaezoo.evaluation.measure import evaluate
from vaezoo.metrics.log_likelihood import elbo, importance_log_likelihood


def tiny(latent=None, likelihood="bernoulli"):
    torch.manual_seed(0)
    return build_part("architecture", {"type": "vae", "image_size": 8, "channels": 1,
                                       "latent": latent or {"type": "gaussian", "dim": 3},
                                       "encoder": {"type": "mlp_encoder", "hidden": [16]},
                                       "decoder": {"type": "mlp_decoder", "hidden": [16]}, "likelihood": likelihood})


@pytest.fixture
def images():
    generator = torch.Generator().manual_seed(1)
    return ImageDataset((torch.rand(40, 1, 8, 8, generator=generator) > 0.5).to(torch.uint8), scale=1.0)


def test_one_importance_sample_is_the_elbo(images):
    model = tiny()
    assert importance_log_likelihood(model, images, samples=1, seed=3) == pytest.approx(elbo(model, images, seed=3))


def test_more_samples_tighten_the_bound_and_the_seed_repeats_it(images):
    model = tiny()
    bounds = [importance_log_likelihood(model, images, samples=k) for k in (1, 10, 200)]
    assert bounds[0] < bounds[1] < bounds[2] < 0
    assert importance_log_likelihood(model, images, samples=10) == bounds[1]


def test_the_elbo_is_reconstruction_plus_kl_in_expectation(images):
    """Averaged over many seeds, -ELBO is E_q[nll] + KL; the KL is exact, so compare the Monte Carlo mean."""
    model = tiny().eval()
    x = images.batch(slice(None))
    with torch.no_grad():
        posterior = model.encode(x)
        kl = posterior.kl().sum(1).mean()
        torch.manual_seed(0)
        nll = torch.stack([model.likelihood.nll(model.decode_logits(posterior.rsample()), x).flatten(1).sum(1).mean()
                           for _ in range(400)]).mean()
    estimates = [elbo(model, images, seed=s) for s in range(20)]
    assert -sum(estimates) / len(estimates) == pytest.approx(float(nll + kl), rel=2e-3)


def test_a_third_party_style_family_is_scored_through_the_protocol(images):
    """A joint latent of two Gaussian parts: no code of the metric knows it."""
    model = tiny({"type": "joint", "parts": [{"type": "gaussian", "dim": 2}, {"type": "gaussian", "dim": 1}]})
    assert math.isfinite(importance_log_likelihood(model, images, samples=5))


def test_refusals_are_one_line(images):
    with pytest.raises(VaezooError, match="needs a likelihood whose nll is a log-density"):
        elbo(tiny(likelihood="gaussian"), images)
    with pytest.raises(VaezooError, match="samples = 0 is not a whole number"):
        importance_log_likelihood(tiny(), images, samples=0)
    categorical = tiny({"type": "gumbel_categorical", "categories": 3})
    # called alone, as vaezoo eval says it, the metric's need (it stopped inside, at the family author's fix)
    with pytest.raises(MetricError, match=r"^metric 'elbo' needs a posterior and a prior density at the posterior's "
                                          r"samples .*; CategoricalPosterior\.log_prob\(\) of part 'z' raised"):
        elbo(categorical, images)


@pytest.mark.parametrize("metric", [elbo, importance_log_likelihood])
def test_a_bernoulli_model_is_not_scored_on_grey_levels(metric, images):
    """Binary cross-entropy of a grey level is no log-density: exp(-nll) integrates to 1/2 over [0, 1]."""
    assert math.isfinite(metric(tiny(), images))  # binary: scored
    grey = ImageDataset(images.images * 200, scale=255.0)  # 200/255: one grey level
    with pytest.raises(VaezooError, match=r"^\S+ is a log-likelihood of the images: a Bernoulli likelihood is a "
                                          r"density of binary images only \(pixels 0 or 1\), and these have grey"):
        metric(tiny(), grey)


def test_a_sampled_metric_called_alone_gives_vaezoo_eval_s_number(data_plugin):
    """Samples are drawn batch by batch, so the batch size moves the estimate: called alone, a metric draws in
    the batches ``vaezoo eval`` uses and gives its number."""
    generator = torch.Generator().manual_seed(2)
    images = ImageDataset((torch.rand(150, 1, 8, 8, generator=generator) > 0.5).to(torch.uint8), scale=1.0)
    model = tiny()
    card = Card.model_validate(make_card("tiny", eval_settings={"importance_log_likelihood": {"samples": 20}}))
    measured = evaluate(model, card, metrics=["importance_log_likelihood", "elbo"], dataset=images)
    assert importance_log_likelihood(model, images, samples=20) == measured["importance_log_likelihood"]
    assert elbo(model, images) == measured["elbo"]


def test_importance_sampling_decodes_a_bounded_number_of_rows_at_a_time(monkeypatch):
    """At vaezoo eval's batch of 1,024 images, a chunk of 50 samples was decoded in one pass of 51,200 rows (22 GB
    for a dSprites model on a CPU, where a batch of 64 took 2 GB); decoded in smaller passes, the estimate is the
    same."""
    from vaezoo.metrics import log_likelihood

    generator = torch.Generator().manual_seed(4)
    images = ImageDataset((torch.rand(1024, 1, 8, 8, generator=generator) > 0.5).to(torch.uint8), scale=1.0)
    model, rows = tiny(), []
    decode = model.decode_logits
    monkeypatch.setattr(model, "decode_logits", lambda z: rows.append(len(z)) or decode(z))
    bounded = importance_log_likelihood(model, images, samples=60)
    assert sum(rows) == 60 * 1024 and max(rows) <= log_likelihood.ROWS
    monkeypatch.setattr(log_likelihood, "ROWS", 60 * 1024)  # a chunk of samples in one pass, as it was decoded
    assert importance_log_likelihood(model, images, samples=60) == bounded
