"""Latent families: Gaussian, Gumbel-softmax categorical, and their joint product."""

from vaezoo.latents.base import LatentFamily, LocationScale, Posterior, Sweep, require_params
from vaezoo.latents.categorical import CategoricalPosterior, GumbelCategorical
from vaezoo.latents.gaussian import Gaussian, GaussianPosterior
from vaezoo.latents.joint import Joint, JointPosterior

__all__ = [
    "LatentFamily", "LocationScale", "Posterior", "Sweep", "require_params", "Gaussian", "GaussianPosterior",
    "GumbelCategorical", "CategoricalPosterior", "Joint", "JointPosterior",
]
