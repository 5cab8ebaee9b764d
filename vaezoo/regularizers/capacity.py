"""Annealed capacity (Burgess et al., 2018, "Understanding disentangling in beta-VAE"), per part as in
JointVAE (Dupont, 2018)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from torch import Tensor

from vaezoo.context import batch_mean
from vaezoo.errors import CardError
from vaezoo.regularizers.base import Regularizer
from vaezoo.regularizers.collectives import gather_rows


def at_most(value: float | Tensor, high: float) -> float | Tensor:
    """``min(value, high)``, on the device when ``value`` is a tensor (no wait for it)."""
    return value.clamp(max=high) if isinstance(value, Tensor) else min(value, high)


class CapacityGroup(BaseModel):
    """One capacity target: ``gamma * |KL(parts) - C(step)|``, C rising linearly from min to max (in nats; like
    gamma, finite and at least 0, and ``gamma * max`` finite), over parts named once each."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    parts: list[str] = Field(min_length=1)
    min: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    max: float = Field(ge=0, allow_inf_nan=False)
    iterations: int = Field(gt=0)
    gamma: float = Field(ge=0, allow_inf_nan=False)

    @field_validator("parts")
    @classmethod
    def _each_part_once(cls, parts: list[str]) -> list[str]:
        if len(set(parts)) != len(parts):  # a part named twice would weigh its KL twice
            raise ValueError(f"names a part more than once ({parts}); name each part once")
        return parts

    @model_validator(mode="after")
    def _finite_term(self) -> CapacityGroup:
        if not math.isfinite(self.gamma * max(self.max, self.min)):  # the term would be inf from the first step
            raise ValueError(f"gamma * max is {self.gamma * max(self.max, self.min)}, beyond a float; lower gamma or "
                             f"max")
        return self

    def capacity(self, step: int | Tensor) -> float | Tensor:
        """C(step), before any cap; a tensor when ``step`` is one (a captured step reads it on the device).

        Steps count from 0, so the first step trains at ``min``: Dupont's code counts the step before its loss
        and runs one step ahead, by ``(max - min) / iterations`` nats.
        """
        return at_most(self.min + (self.max - self.min) * step / self.iterations, self.max)


def _group(spec: Mapping | CapacityGroup) -> CapacityGroup:
    """``spec`` as a :class:`CapacityGroup`; a ValueError of one line naming the first field that does not fit."""
    try:
        return CapacityGroup.model_validate(spec)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "(group)"
        raise ValueError(f"regularizer 'capacity': group {spec!r}: field {field!r}: {error['msg']}") from None


class Capacity(Regularizer):
    """``gamma * |KL_group - C_group(step)|`` for each group of parts.

    A group's capacity is capped at the largest KL its parts can hold (for a
    k-way categorical, log k), as in JointVAE's discrete capacity.

    Args:
        groups: each ``{name, parts, min, max, iterations, gamma}``; at least one, each of its own name (the name
            of its term, ``capacity_NAME``).
    """

    example = {"groups": [{"name": "discrete", "parts": ["cat"], "max": 5.0, "iterations": 100, "gamma": 30.0}],
               "latent": {"type": "joint", "parts": [{"type": "gaussian", "name": "cont", "dim": 2},
                                                     {"type": "gumbel_categorical", "name": "cat", "categories": 3}]}}

    def __init__(self, groups: Sequence[Mapping | CapacityGroup]):
        super().__init__()
        self.groups = [_group(g) for g in groups]
        names = [g.name for g in self.groups]
        if not names or len(set(names)) != len(names):  # no term at all, or one group's term replacing another's
            raise ValueError(f"regularizer 'capacity': groups must be one or more, each of its own name, got the "
                             f"names {names}")

    def _check_parts(self, posterior) -> None:
        """Refuse a group that names a part ``posterior`` does not have (a KeyError inside, at the first step)."""
        for group in self.groups:
            if missing := [p for p in group.parts if p not in posterior.parts]:
                raise CardError(f"regularizer 'capacity': group '{group.name}' names the part(s) {', '.join(missing)}, "
                                f"which the latent does not have; its parts are {', '.join(posterior.parts)}")

    def _capacity(self, group: CapacityGroup, posterior, step: int | Tensor) -> float | Tensor:
        return at_most(group.capacity(step), sum(posterior.parts[p].max_kl for p in group.parts))

    def forward(self, posterior, z, step) -> dict[str, Tensor]:
        self._check_parts(posterior)
        kl = posterior.kl_parts()
        if self.training:  # under DDP, |KL - C| of the recipe's whole batch: the parts a group weighs, gathered
            kl = {part: gather_rows(kl[part]) for group in self.groups for part in group.parts}
        terms = {}
        for group in self.groups:
            group_kl = sum(batch_mean(kl[p]) for p in group.parts)
            terms[f"capacity_{group.name}"] = group.gamma * (group_kl - self._capacity(group, posterior, step)).abs()
        return terms

    def targets(self, posterior, step: int) -> dict[str, float]:
        self._check_parts(posterior)
        return {f"C_{g.name}": self._capacity(g, posterior, step) for g in self.groups}

    def extra_repr(self) -> str:
        return ", ".join(f"{g.name}: {g.parts} {g.min}->{g.max} over {g.iterations}, gamma {g.gamma}"
                         for g in self.groups)
