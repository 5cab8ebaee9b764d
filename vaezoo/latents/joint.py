"""A product of latent families: continuous parts first, then each categorical in order.

Dupont (2018), "Learning Disentangled Joint Continuous and Discrete Representations".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from vaezoo.context import BuildContext, LatentPart
from vaezoo.errors import PluginError
from vaezoo.latents.base import LatentFamily, Posterior, require_params


class JointPosterior(Posterior):
    """The posterior of each part, side by side; KL is reported per part and per dimension."""

    def __init__(self, parts: dict[str, Posterior]):
        self._parts = parts
        self.code_size = sum(p.code_size for p in parts.values())

    @property
    def parts(self) -> dict[str, Posterior]:
        return self._parts

    def rsample(self) -> Tensor:
        return torch.cat([p.rsample() for p in self._parts.values()], dim=-1)

    @property
    def mode(self) -> Tensor:
        return torch.cat([p.mode for p in self._parts.values()], dim=-1)

    def kl(self) -> Tensor:
        return torch.cat([p.kl() for p in self._parts.values()], dim=-1)

    def kl_parts(self) -> dict[str, Tensor]:
        return {name: p.kl().sum(-1) for name, p in self._parts.items()}

    def log_prob(self, z: Tensor) -> Tensor:
        return torch.cat([p.log_prob(c) for p, c in self._chunks(z)], dim=-1)

    def prior_log_prob(self, z: Tensor) -> Tensor:
        return torch.cat([p.prior_log_prob(c) for p, c in self._chunks(z)], dim=-1)

    def log_density_matrix(self, z: Tensor) -> Tensor:
        return torch.cat([p.log_density_matrix(c) for p, c in self._chunks(z)], dim=-1)

    def _chunks(self, z: Tensor):
        """Each part's posterior with its columns of ``z``, in order."""
        return zip(self._parts.values(), z.split([p.code_size for p in self._parts.values()], dim=-1))


class Joint(LatentFamily):
    """An ordered product of latent families.

    Args:
        parts: a list of part specs, each ``{"type": family, "name": optional, **arguments}``,
            or of built :class:`LatentFamily` modules; unnamed parts are called ``z0``, ``z1``, ...
        context: builds the parts given as specs (see :class:`~vaezoo.context.BuildContext`).
    """

    example = {"parts": [{"type": "gaussian", "name": "cont", "dim": 2},
                         {"type": "gumbel_categorical", "name": "cat", "categories": 3}]}

    def __init__(self, parts: list[Mapping[str, Any] | LatentFamily], context: BuildContext | None = None):
        super().__init__()
        families: dict[str, LatentFamily] = {}
        for i, spec in enumerate(parts):
            if isinstance(spec, LatentFamily):
                name, family = f"z{i}", spec
            else:
                spec = dict(spec)
                name = spec.pop("name", f"z{i}")
                if context is None:
                    raise ValueError("a joint latent given part specs needs a build context to build them")
                family = context.build("latent family", spec)
            if name in families:
                raise ValueError(f"two parts of a joint latent are both named '{name}'")
            families[name] = family
        self.families = nn.ModuleDict(families)
        self.param_size = sum(f.param_size for f in families.values())
        self.code_size = sum(f.code_size for f in families.values())

    def posterior(self, params: Tensor) -> JointPosterior:
        sizes = [f.param_size for f in self.families.values()]
        require_params(self, params, sum(sizes), "the sum of its parts' param_size")
        parts = {}
        for (name, family), chunk in zip(self.families.items(), params.split(sizes, dim=-1)):
            try:
                parts[name] = family.posterior(chunk)
            except PluginError as exc:  # a part's own error: which part of this latent it is
                raise PluginError(f"part '{name}' of the joint latent: {exc}") from None
        return JointPosterior(parts)

    @property
    def parts(self) -> dict[str, LatentFamily]:
        return dict(self.families.items())

    def reference_code(self) -> Tensor:
        """Each part's reference code in order, on the first part's device: a part whose prior is a buffer gives
        its code where the model is (a GPU), one that makes its code (a categorical's one-hot) on the CPU."""
        codes = [f.reference_code() for f in self.families.values()]
        device = next((code.device for code in codes if isinstance(code, Tensor)), None)
        return torch.cat([code.to(device) if isinstance(code, Tensor) else code for code in codes])

    def sample_prior(self, n, generator=None, device=None) -> Tensor:
        return torch.cat([f.sample_prior(n, generator, device) for f in self.families.values()], dim=-1)

    def layout(self) -> list[LatentPart]:
        """Each part's layout in order, named by its part (``part.inner`` for a part that has named parts)."""
        return [piece.model_copy(update={"name": name if piece.name is None else f"{name}.{piece.name}"})
                for name, family in self.families.items() for piece in family.layout()]

    def part_slices(self) -> dict[str, slice]:
        slices, start = {}, 0
        for name, family in self.families.items():
            slices[name] = slice(start, start + family.code_size)
            start += family.code_size
        return slices
