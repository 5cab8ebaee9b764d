"""Likelihoods p(x|z): how the decoder's output is scored against the data."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Likelihood(nn.Module):
    """Maps decoder outputs to a per-pixel negative log-likelihood and to a mean image.

    ``normalised`` says whether ``nll`` is a true negative log-density (so that likelihood metrics such as
    the importance-sampled log p(x) mean what they say) rather than a score up to a constant.
    """

    normalised: bool = False

    def nll(self, output: Tensor, x: Tensor) -> Tensor:
        """Per-pixel negative log-likelihood, same shape as ``x`` (not reduced)."""
        raise NotImplementedError

    def not_a_density_of(self, x: Tensor) -> str | None:
        """Why a ``normalised`` likelihood's ``nll`` is still no log-density of the images ``x``, or None (the
        default: it is one of any image)."""
        return None

    def mean(self, output: Tensor) -> Tensor:
        """The expected image under p(x|z)."""
        raise NotImplementedError


class Bernoulli(Likelihood):
    """Bernoulli pixels; the decoder outputs logits. The NLL is binary cross-entropy."""

    normalised = True

    def nll(self, output, x):
        return F.binary_cross_entropy_with_logits(output, x, reduction="none")

    def not_a_density_of(self, x):
        if bool(((x == 0) | (x == 1)).all()):
            return None
        return ("a Bernoulli likelihood is a density of binary images only (pixels 0 or 1), and these have grey "
                "levels: measure it on binarised images (e.g. MNIST's data option binarize = \"dynamic\", which "
                "binarises the test split once)")

    def mean(self, output):
        return torch.sigmoid(output)


class Gaussian(Likelihood):
    """Fixed-variance Gaussian pixels; the decoder outputs the mean. The NLL is the squared error."""

    def nll(self, output, x):
        return F.mse_loss(output, x, reduction="none")

    def mean(self, output):
        return output
