"""The protocol every regularizer follows.

A regularizer maps the posterior, the sampled code and the training step to
named loss terms (scalars). The step is always passed in explicitly, so a
schedule is a pure function of it and resumes exactly from a checkpoint's step.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

from torch import Tensor, nn

from vaezoo.errors import VaezooError

if TYPE_CHECKING:
    from vaezoo.latents.base import Posterior


class Regularizer(nn.Module):
    """Base class. Subclasses implement :meth:`forward` and may override :meth:`targets`.

    Each sets the class attribute ``example``: the keyword arguments of
    :func:`vaezoo.testing.check_regularizer` for a small instance, that is its own
    arguments and, when the default Gaussian latent does not fit it, ``latent``: the
    spec of a family it does fit. vaezoo's registry-driven tests check every
    registered regularizer, a plugin's included, with it.
    """

    example: ClassVar[dict[str, Any] | None] = None

    def forward(self, posterior: Posterior, z: Tensor, step: int) -> dict[str, Tensor]:
        """Named loss terms (scalars, already averaged over the batch)."""
        raise NotImplementedError

    def targets(self, posterior: Posterior, step: int) -> dict[str, float]:
        """Schedule values at ``step`` worth showing while training (e.g. capacities)."""
        return {}


def check_weight(regularizer: str, name: str, value: float) -> float:
    """``value``, refused unless it is a finite number of at least 0, as a loss term's weight must be: a NaN or
    infinite weight makes the loss NaN at the first step, a negative one rewards what the term penalises.

    Raises:
        ValueError: naming the regularizer (as registered), the argument ``name`` and the value.
    """
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"regularizer '{regularizer}': {name} must be a finite number of at least 0, got {value}")
    return value


def select_part(posterior: Posterior, z: Tensor, part: str | None):
    """The posterior (and code) of one part of a joint latent, or the whole thing when ``part`` is None."""
    if part is None:
        return posterior, z
    if part not in posterior.parts:
        raise VaezooError(f"the latent has no part '{part}'; its parts are {', '.join(posterior.parts)}")
    start = 0
    for name, p in posterior.parts.items():
        if name == part:
            return p, z[:, start : start + p.code_size]
        start += p.code_size

