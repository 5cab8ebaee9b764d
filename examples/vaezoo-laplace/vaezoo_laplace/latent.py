"""A factorised Laplace latent with a Laplace(0, 1) prior on each dimension.

The posterior is Laplace(loc, scale) per dimension, sampled by the inverse-CDF
reparameterisation of :class:`torch.distributions.Laplace`. Its KL to the prior
has a closed form. For p = Laplace(m1, b1), q = Laplace(m2, b2) and d = |m1 - m2|,
E_p|x - m2| = d + b1 exp(-d / b1), so

    KL(p || q) = log(b2 / b1) + (d + b1 exp(-d / b1)) / b2 - 1

(M. Gil, 2011, "On Rényi Divergence Measures for Continuous Alphabet Sources",
MSc thesis, Queen's University; the formula ``torch.distributions.kl`` implements
for a Laplace pair, which this module uses).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Laplace as LaplaceDistribution
from torch.distributions import kl_divergence

from vaezoo.latents import LatentFamily, LocationScale, Posterior


class LaplacePosterior(Posterior):
    """Laplace(loc, exp(log_scale)) per dimension, with its prior object.

    Args:
        loc: location, shape ``(batch, dim)``.
        log_scale: log of the scale, shape ``(batch, dim)``.
        prior: the prior p(z), broadcastable to ``(batch, dim)``.
    """

    distribution: LaplaceDistribution  # a Posterior's may be None; this one always has both
    prior: LaplaceDistribution

    def __init__(self, loc: Tensor, log_scale: Tensor, prior: LaplaceDistribution) -> None:
        self.loc, self.log_scale = loc, log_scale
        self.code_size = loc.shape[-1]
        self.distribution = LaplaceDistribution(loc, log_scale.exp())
        self.prior = prior

    def rsample(self) -> Tensor:
        return self.distribution.rsample()

    @property
    def mode(self) -> Tensor:
        return self.loc

    def kl(self) -> Tensor:
        return kl_divergence(self.distribution, self.prior)  # broadcast to (batch, dim)

    def location_scale(self) -> LocationScale:
        """Laplace(loc, scale): the entropy metrics (``mig_chen``, ``total_correlation``) need it."""
        return LocationScale(self.loc, self.log_scale.exp(), LaplaceDistribution)


class Laplace(LatentFamily):
    """A ``dim``-dimensional factorised Laplace latent; reads ``2 * dim`` parameters (loc, then log-scale).

    Args:
        dim: number of latent dimensions.
    """

    example = {"dim": 3}  # vaezoo's registry-driven tests check the family built with these arguments
    prior_loc: Tensor  # a buffer, which nn.Module's attribute lookup would type as Tensor | Module

    def __init__(self, dim: int) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"a Laplace latent needs dim >= 1, got {dim}")
        self.dim = self.code_size = dim
        self.param_size = 2 * dim
        self.register_buffer("prior_loc", torch.zeros(()), persistent=False)

    @property
    def prior(self) -> LaplaceDistribution:
        """The prior p(z) = Laplace(0, 1) per dimension, on the family's device."""
        return LaplaceDistribution(self.prior_loc, torch.ones_like(self.prior_loc))

    def posterior(self, params: Tensor) -> LaplacePosterior:
        loc, log_scale = params.chunk(2, dim=-1)
        return LaplacePosterior(loc, log_scale, self.prior)

    def sample_prior(self, n: int, generator: torch.Generator | None = None,
                     device: torch.device | None = None) -> Tensor:
        # The difference of two Exponential(1) variables is Laplace(0, 1); torch's Laplace.sample takes no generator.
        device = device or self.prior_loc.device
        e = torch.empty(2, n, self.dim, device=device).exponential_(generator=generator)
        return e[0] - e[1]

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
