"""The protocol every latent family follows, modelled on ``torch.distributions``.

A family turns the encoder's parameter vector into a :class:`Posterior`. The
posterior can ``rsample()`` (reparameterised), give its ``mode`` (the code used
in eval), and its KL to the family's prior per latent dimension, as a tensor of
shape ``(batch, kl_dims)``. Nothing here reduces over the batch: that happens
once, in :func:`vaezoo.model.batch_mean`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class Posterior:
    """q(z|x) for a batch. Subclasses set ``code_size`` and implement the methods below."""

    code_size: int
    max_kl: float = math.inf  # the largest KL any posterior of this family can have

    def rsample(self) -> Tensor:
        """A reparameterised sample of the code, shape ``(batch, code_size)``."""
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        """The deterministic code used in eval, shape ``(batch, code_size)``."""
        raise NotImplementedError

    def kl(self) -> Tensor:
        """KL(q(z|x) || p(z)) per latent dimension, shape ``(batch, kl_dims)``."""
        raise NotImplementedError

    def kl_parts(self) -> dict[str, Tensor]:
        """KL per part, each of shape ``(batch,)``; a single-part family has one entry."""
        return {"z": self.kl().sum(-1)}

    @property
    def parts(self) -> dict[str, Posterior]:
        """The posterior of each part, by name."""
        return {"z": self}


class LatentFamily(nn.Module):
    """A latent family: its parameter size, code size and prior.

    Subclasses set ``param_size`` (how many encoder outputs they read) and
    ``code_size`` (the decoder's input size) and implement :meth:`posterior`
    and :meth:`sample_prior`.
    """

    param_size: int
    code_size: int

    def posterior(self, params: Tensor) -> Posterior:
        """Build q(z|x) from the encoder's parameters, shape ``(batch, param_size)``."""
        raise NotImplementedError

    def sample_prior(self, n: int, generator: torch.Generator | None = None, device=None) -> Tensor:
        """Draw ``n`` codes from the prior, shape ``(n, code_size)``."""
        raise NotImplementedError

    def part_slices(self) -> dict[str, slice]:
        """Each part's slice of the code."""
        return {"z": slice(0, self.code_size)}

    def describe(self) -> str:
        """A short layout for listings, e.g. ``gaussian(10)``; families override it."""
        return f"{type(self).__name__.lower()}({self.extra_repr()})"
