"""The protocol every latent family follows, modelled on ``torch.distributions``.

A family turns the encoder's parameter vector into a :class:`Posterior`. The
posterior can ``rsample()`` (reparameterised), give its ``mode`` (the code used
in eval), its log-density and KL to the family's prior per latent dimension (a
tensor of shape ``(batch, dims)``), and the log-density of every code under every
posterior of the batch (what total-correlation estimators need). The family says
how to sweep its dimensions for a traversal and which code is its reference.
viz, the metrics and the regularizers use only this protocol, so a family a
plugin registers gets all of them with no code of its own.

Nothing here reduces over the batch: that happens once, in
:func:`vaezoo.reduction.batch_mean`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.distributions import Distribution


class Posterior:
    """q(z|x) for a batch. Subclasses set ``code_size`` and implement the methods below.

    A family whose posterior factorises over dimensions sets ``distribution`` (a
    ``torch.distributions`` object of batch shape ``(batch, code_size)``) and ``prior``
    (broadcastable to it); :meth:`log_prob`, :meth:`prior_log_prob` and
    :meth:`log_density_matrix` then work without more code.
    """

    code_size: int
    max_kl: float = math.inf  # the largest KL any posterior of this family can have
    distribution: Distribution | None = None
    prior: Distribution | None = None

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

    def log_prob(self, z: Tensor) -> Tensor:
        """log q(z|x) per dimension, shape ``(batch, code_size)``."""
        return self._factorised("log_prob").log_prob(z)

    def prior_log_prob(self, z: Tensor) -> Tensor:
        """log p(z) per dimension, shape ``(batch, code_size)``."""
        self._factorised("prior_log_prob")
        return self.prior.log_prob(z)

    def log_density_matrix(self, z: Tensor) -> Tensor:
        """log q(z_i | x_j) per dimension for every pair of the batch, shape ``(batch, batch, code_size)``."""
        return self._factorised("log_density_matrix").log_prob(z.unsqueeze(1))

    def _factorised(self, what: str) -> Distribution:
        if self.distribution is None or self.prior is None:
            raise NotImplementedError(f"{type(self).__name__} has no per-dimension density, so it has no {what}; "
                                      f"use a family that sets 'distribution' and 'prior'")
        return self.distribution

    @property
    def parts(self) -> dict[str, Posterior]:
        """The posterior of each part, by name."""
        return {"z": self}


@dataclass(frozen=True)
class Sweep:
    """One row of a traversal of a latent part.

    Attributes:
        index: the dimension the row varies, shown in its label; None when it varies the whole part.
        columns: the columns of the part's code the row sets.
        kl_index: which entry of the part's per-dimension KL measures what the row varies.
        values: ``(n, width of columns)`` the values those columns take along the row.
    """

    index: int | None
    columns: slice
    kl_index: int
    values: Tensor


class LatentFamily(nn.Module):
    """A latent family: its parameter size, code size and prior.

    Subclasses set ``param_size`` (how many encoder outputs they read) and
    ``code_size`` (the decoder's input size) and implement :meth:`posterior`
    and :meth:`sample_prior`. Each sets the class attribute ``example``: the
    arguments of a small instance (e.g. ``{"dim": 3}``), with which vaezoo's
    registry-driven tests run :func:`vaezoo.testing.check_latent_family` on every
    registered family, a plugin's included.
    """

    param_size: int
    code_size: int
    example: ClassVar[dict[str, Any] | None] = None

    def posterior(self, params: Tensor) -> Posterior:
        """Build q(z|x) from the encoder's parameters, shape ``(batch, param_size)``."""
        raise NotImplementedError

    def sample_prior(self, n: int, generator: torch.Generator | None = None, device=None) -> Tensor:
        """Draw ``n`` codes from the prior, shape ``(n, code_size)``."""
        raise NotImplementedError

    @property
    def prior(self) -> Distribution:
        """The prior p(z), a ``torch.distributions`` object per dimension (its ``mean`` and ``stddev``
        define the default traversal)."""
        raise NotImplementedError

    @property
    def parts(self) -> dict[str, LatentFamily]:
        """The family of each part, by name; a single-part family is its own part ``"z"``."""
        return {"z": self}

    def part_slices(self) -> dict[str, slice]:
        """Each part's slice of the code."""
        return {"z": slice(0, self.code_size)}

    def reference_code(self) -> Tensor:
        """The code a traversal holds still when it has no image to start from: the prior's mean."""
        prior = self.prior
        return prior.mean.expand(self.code_size).clone()

    def sweeps(self, steps: int, span: tuple[float, float]) -> list[Sweep]:
        """What each row of a traversal varies: one row per dimension, ``steps`` values from ``span[0]``
        to ``span[1]`` prior standard deviations around the prior mean. Families whose dimensions do not
        move independently (a categorical) override it."""
        prior = self.prior
        offsets = torch.linspace(span[0], span[1], steps, device=prior.mean.device)
        mean, std = prior.mean.expand(self.code_size), prior.stddev.expand(self.code_size)
        return [Sweep(i, slice(i, i + 1), i, (mean[i] + offsets * std[i]).unsqueeze(1)) for i in range(self.code_size)]

    def describe(self) -> str:
        """A short layout for listings, e.g. ``gaussian(10)``; families override it."""
        return f"{type(self).__name__.lower()}({self.extra_repr()})"
