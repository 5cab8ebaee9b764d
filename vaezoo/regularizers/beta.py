"""beta-weighted KL (Higgins et al., 2017, "beta-VAE: Learning Basic Visual Concepts with a
Constrained Variational Framework"). beta = 1 is the plain ELBO."""

from __future__ import annotations

from torch import Tensor

from vaezoo.context import batch_mean
from vaezoo.regularizers.base import Regularizer, check_weight, select_part


class Beta(Regularizer):
    """``beta * KL(q(z|x) || p(z))``.

    Args:
        beta: weight of the KL term, a finite number of at least 0.
        part: apply to this part of a joint latent only (default: the whole latent).
    """

    example = {"beta": 4.0}

    def __init__(self, beta: float = 1.0, part: str | None = None):
        super().__init__()
        self.beta, self.part = check_weight("beta", "beta", beta), part

    def forward(self, posterior, z, step) -> dict[str, Tensor]:
        posterior, _ = select_part(posterior, z, self.part)
        name = f"kl_{self.part}" if self.part else "kl"
        return {name: self.beta * batch_mean(posterior.kl())}

    def extra_repr(self) -> str:
        return f"beta={self.beta}, part={self.part}"
