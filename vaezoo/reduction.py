"""The one reduction vaezoo's losses use."""

from torch import Tensor


def batch_mean(t: Tensor) -> Tensor:
    """Sum over every dimension but the first (pixels, latent dimensions), then average over the batch.

    Every loss term in vaezoo (reconstruction, KL, capacity, TC) is reduced
    here, so all terms are "per example, summed over its dimensions".
    """
    return t.reshape(t.shape[0], -1).sum(1).mean()
