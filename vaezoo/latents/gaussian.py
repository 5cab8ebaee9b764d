"""Diagonal Gaussian latent (Kingma & Welling, 2014, "Auto-Encoding Variational Bayes")."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Normal

from vaezoo.latents.base import LatentFamily, LocationScale, Posterior, require_params


class GaussianPosterior(Posterior):
    """N(mean, diag(exp(logvar))) with a standard-normal prior object."""

    distribution: Normal
    prior: Normal

    def __init__(self, mean: Tensor, logvar: Tensor, prior: Normal):
        self.mean, self.logvar = mean, logvar
        self.code_size = mean.shape[-1]
        # No argument validation: it reads the values back to the host (a sync per batch, and no torch.export)
        self.distribution = Normal(mean, torch.exp(0.5 * logvar), validate_args=False)
        self.prior = prior

    def rsample(self) -> Tensor:
        return self.distribution.rsample()

    @property
    def mode(self) -> Tensor:
        return self.mean

    def kl(self) -> Tensor:
        # written in logvar, not in the scale: the scale squared underflows to 0 (and its log to -inf) for a
        # float32 logvar below about -103, where this stays exact
        log_var_ratio = self.logvar - 2 * self.prior.scale.log()
        shift = (self.mean - self.prior.loc) / self.prior.scale
        return 0.5 * (log_var_ratio.exp() + shift**2 - 1 - log_var_ratio)

    def location_scale(self) -> LocationScale:
        return LocationScale(self.mean, self.distribution.stddev, Normal)


class Gaussian(LatentFamily):
    """A ``dim``-dimensional diagonal Gaussian; reads ``2 * dim`` parameters (mean, then log-variance).

    Args:
        dim: number of latent dimensions.
    """

    example = {"dim": 3}

    def __init__(self, dim: int):
        super().__init__()
        if dim < 1:
            raise ValueError(f"a Gaussian latent needs dim >= 1, got {dim}")
        self.dim = self.code_size = dim
        self.param_size = 2 * dim
        self.register_buffer("prior_loc", torch.zeros(()), persistent=False)

    @property
    def prior(self) -> Normal:
        """The prior p(z) = N(0, I), on the family's device."""
        return Normal(self.prior_loc, torch.ones_like(self.prior_loc), validate_args=False)

    def posterior(self, params: Tensor) -> GaussianPosterior:
        require_params(self, params, 2 * self.dim, "2 * dim")
        mean, logvar = params.split(self.dim, dim=-1)
        return GaussianPosterior(mean, logvar, self.prior)

    def sample_prior(self, n, generator=None, device=None) -> Tensor:
        device = device or self.prior_loc.device
        return torch.randn(n, self.dim, generator=generator, device=device)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

