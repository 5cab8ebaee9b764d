"""k-way categorical latent with the Gumbel-softmax relaxation.

Jang, Gu & Poole (2017), "Categorical Reparameterization with Gumbel-Softmax";
Maddison, Mnih & Teh (2017), "The Concrete Distribution".
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributions import Categorical, RelaxedOneHotCategorical

from vaezoo.context import LatentPart
from vaezoo.latents.base import LatentFamily, Posterior, Sweep, require_params


class CategoricalPosterior(Posterior):
    """A categorical over ``k`` classes; samples are relaxed one-hot vectors at ``temperature``."""

    def __init__(self, logits: Tensor, temperature: float | Tensor):
        self.logits = logits
        self.temperature = temperature
        self.code_size = logits.shape[-1]
        self.max_kl = math.log(self.code_size)

    @property
    def probs(self) -> Tensor:
        """Class probabilities, shape ``(batch, k)``."""
        return F.softmax(self.logits, dim=-1)

    def rsample(self) -> Tensor:
        temperature = self.temperature  # a stacked ensemble's per-member tensor, or a number:
        if not isinstance(temperature, Tensor):
            temperature = self.logits.new_full((), temperature)  # made on the device: no copy from the host
        return RelaxedOneHotCategorical(temperature, logits=self.logits, validate_args=False).rsample()

    @property
    def mode(self) -> Tensor:
        """The one-hot of the most probable class; NaN where a logit is NaN, which the argmax alone would hide
        behind a class (as a Gaussian's mode carries its mean's NaN)."""
        # not F.one_hot, which checks the indices' values: torch.func.vmap cannot run such a check
        categories = torch.arange(self.code_size, device=self.logits.device)
        one_hot = (categories == self.logits.argmax(-1, keepdim=True)).to(self.logits.dtype)
        return one_hot.masked_fill(self.logits.isnan().any(-1, keepdim=True), math.nan)

    def kl(self) -> Tensor:
        # torch.distributions' categorical KL, less its masks (which torch.func.vmap cannot batch): the uniform
        # prior puts no zero anywhere, and a zero of q (a logit of -inf) is clamped to give 0 * finite
        log_q = F.log_softmax(self.logits, dim=-1)
        finite = log_q.clamp(min=torch.finfo(log_q.dtype).min)
        return (log_q.exp() * (finite + math.log(self.code_size))).sum(-1, keepdim=True)


class GumbelCategorical(LatentFamily):
    """A ``categories``-way categorical with a uniform prior, relaxed at ``temperature`` while training.

    Args:
        categories: number of classes k.
        temperature: Gumbel-softmax temperature (JointVAE uses 0.67).
    """

    example = {"categories": 4}

    def __init__(self, categories: int, temperature: float = 0.67):
        super().__init__()
        if categories < 2:
            raise ValueError(f"a categorical latent needs categories >= 2, got {categories}")
        if not (math.isfinite(temperature) and temperature > 0):  # NaN samples NaN, inf samples 1/k everywhere
            raise ValueError(f"temperature must be a finite number above 0, got {temperature}")
        self.categories = self.code_size = self.param_size = categories
        self.temperature = temperature

    def posterior(self, params: Tensor) -> CategoricalPosterior:
        require_params(self, params, self.categories, "categories")
        return CategoricalPosterior(params, self.temperature)

    @property
    def prior(self) -> Categorical:
        """The uniform prior over the categories."""
        return Categorical(logits=torch.zeros(self.categories))

    def sample_prior(self, n, generator=None, device=None) -> Tensor:
        index = torch.randint(self.categories, (n,), generator=generator, device=device)
        return F.one_hot(index, self.categories).float()

    def reference_code(self) -> Tensor:
        """The first category, one-hot."""
        return F.one_hot(torch.tensor(0), self.categories).float()

    def sweeps(self, steps: int, span: tuple[float, float]) -> list[Sweep]:
        """One row showing each category in turn (the row is as long as the category count)."""
        return [Sweep(None, slice(0, self.categories), 0, torch.eye(self.categories))]

    def layout(self) -> list[LatentPart]:
        """One part, ``categorical(categories)``."""
        return [LatentPart(family="categorical", size=self.categories)]

    def extra_repr(self) -> str:
        return f"categories={self.categories}, temperature={self.temperature}"
