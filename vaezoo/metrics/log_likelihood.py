"""The test ELBO and the importance-sampled log-likelihood of the data, in nats per image.

The ELBO is E_q[log p(x|z)] - KL(q(z|x) || p(z)), with one reparameterised sample per image
(Kingma & Welling, 2014, "Auto-Encoding Variational Bayes"). The importance-sampled estimate
(Burda, Grosse & Salakhutdinov, 2016, "Importance Weighted Autoencoders", eq. 3, with their evaluation's
K = 5,000 by default: about 17 minutes for MNIST's test set on one CPU thread) is

    log p(x) ~= logsumexp_k [log p(x|z_k) + log p(z_k) - log q(z_k|x)] - log K,   z_k ~ q(z|x),

a lower bound on log p(x) that tightens as K grows. Both use only the latent protocol (``rsample``,
``log_prob``, ``prior_log_prob`` of a family with a per-dimension density) and a likelihood whose
``nll`` is a normalised negative log-density (Bernoulli pixels), so any such family gets them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from vaezoo.errors import VaezooError
from vaezoo.metrics.codes import eval_mode
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import DENSITY, NORMALISED_LIKELIHOOD
from vaezoo.metrics.spec import Count, Seed, metric_spec

CHUNK = 50  # samples whose weights are summed together
ROWS = 3_200
"""Decoder rows per pass at most (whole samples of the batch, one at least): the 50 samples of a chunk of a batch
of 1,024 images, ``vaezoo eval``'s, are 51,200 rows, 16 times the activations of a batch of 64 in one pass."""


def _check(model, metric: str) -> None:
    if not model.likelihood.normalised:
        raise VaezooError(f"{metric} needs a likelihood whose nll is a log-density (e.g. bernoulli); "
                          f"{type(model.likelihood).__name__} scores images up to a constant")


def _log_weights(model, x: torch.Tensor, samples: int) -> Iterator[torch.Tensor]:
    """log p(x|z) + log p(z) - log q(z|x) for ``samples`` draws z ~ q(z|x) per image, as ``(S, B)`` chunks of
    at most :data:`CHUNK` draws."""
    posterior = model.encode(x)
    per_pass = max(1, ROWS // len(x))
    for start in range(0, samples, CHUNK):
        z = torch.stack([posterior.rsample() for _ in range(min(CHUNK, samples - start))])  # (S, B, D)
        log_px = torch.cat([_log_px(model, z[s:s + per_pass], x) for s in range(0, len(z), per_pass)])
        yield log_px + posterior.prior_log_prob(z).sum(-1) - posterior.log_prob(z).sum(-1)


def _log_px(model, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``(S, B)``: log p(x|z) of the images ``x`` for ``S`` draws ``z`` ``(S, B, D)`` of their codes, decoded in one
    pass."""
    images = x.expand(len(z), *x.shape).flatten(0, 1)
    return -model.likelihood.nll(model.decode_logits(z.flatten(0, 1)), images).flatten(1).sum(1).view(len(z), -1)


def _log_mean_weight(model, x: torch.Tensor, samples: int) -> torch.Tensor:
    """``(B,)``: log of the mean importance weight over ``samples`` draws, accumulated chunk by chunk (memory
    does not grow with ``samples``)."""
    total = None
    for chunk in _log_weights(model, x, samples):
        lse = torch.logsumexp(chunk, 0)
        total = lse if total is None else torch.logaddexp(total, lse)
    return total - math.log(samples)


def _mean_over_images(evaluation: Evaluation, seed: int, per_batch, metric: str) -> float:
    model = evaluation.model
    total = 0.0
    with eval_mode(model), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _, x in evaluation.images.batches(evaluation.batch_size, evaluation.device):
            if (problem := model.likelihood.not_a_density_of(x)) is not None:
                raise VaezooError(f"{metric} is a log-likelihood of the images: {problem}")
            total += float(per_batch(x).double().sum())
    return total / len(evaluation.dataset)


@metric_spec(needs=(DENSITY, NORMALISED_LIKELIHOOD))
def elbo(evaluation: Evaluation, seed: Seed = 0) -> float:
    """The evidence lower bound per image (nats; higher is better), one sample z ~ q(z|x) per image.

    Args:
        evaluation: a VAE whose latent has a per-dimension density and whose likelihood is normalised, on the
            images to score (the test split in ``vaezoo eval``).
        seed: seed of the samples.
    """
    model = evaluation.model
    _check(model, "elbo")
    return _mean_over_images(evaluation, seed, lambda x: next(_log_weights(model, x, 1))[0], "elbo")


@metric_spec(needs=(DENSITY, NORMALISED_LIKELIHOOD), quick={"samples": 20})
def importance_log_likelihood(evaluation: Evaluation, samples: Count = 5000, seed: Seed = 0) -> float:
    """log p(x) per image (nats; higher is better), estimated with ``samples`` importance samples from q(z|x).

    Args:
        evaluation: a VAE whose latent has a per-dimension density and whose likelihood is normalised, on the
            images to score (the test split in ``vaezoo eval``).
        samples: K, importance samples per image.
        seed: seed of the samples.
    """
    model = evaluation.model
    _check(model, "importance_log_likelihood")
    return _mean_over_images(evaluation, seed, lambda x: _log_mean_weight(model, x, samples),
                             "importance_log_likelihood")
