"""The protocol every latent family follows, modelled on ``torch.distributions``.

A family turns the encoder's parameter vector into a :class:`Posterior`. The
posterior can ``rsample()`` (reparameterised), give its ``mode`` (the code used
in eval), its log-density and KL to the family's prior per latent dimension (a
tensor of shape ``(batch, dims)``), and the log-density of every code under every
posterior of the batch (what total-correlation estimators need). The family says
how to sweep its dimensions for a traversal (by default inside its prior's
support) and which code is its reference. viz, the metrics and the regularizers
use only this protocol (docs/plugins.md lists it: what is required, what is
optional and what each default does), so a family a plugin registers gets all
of them with no code of its own; a metric that needs an optional part of it
says so before it runs (:mod:`vaezoo.metrics.requirements`).

Nothing here reduces over the batch: that happens once, in
:func:`vaezoo.context.batch_mean`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn
from torch.distributions import Distribution, Normal, constraints

from vaezoo.context import LatentPart
from vaezoo.errors import LatentError, PluginError


class LocationScale(NamedTuple):
    """A posterior that is a location-scale density per dimension: q(z_j|x) = f((z_j - loc_j) / scale_j) / scale_j.

    Attributes:
        loc, scale: ``(batch, code_size)``.
        family: the ``torch.distributions`` class of f, built as ``family(loc, scale)`` (``Normal``, ``Laplace``).
    """

    loc: Tensor
    scale: Tensor
    family: type[Distribution]


class Posterior:
    """q(z|x) for a batch. Subclasses set ``code_size`` and implement the methods below.

    A family whose posterior factorises over dimensions sets ``distribution`` (a
    ``torch.distributions`` object of batch shape ``(batch, code_size)``) and ``prior``
    (broadcastable to it); :meth:`log_prob`, :meth:`prior_log_prob` and
    :meth:`log_density_matrix` then work without more code.

    Required: ``code_size``, :meth:`rsample`, :attr:`mode`, :meth:`kl`. Optional, with defaults: :meth:`kl_parts`
    (one part), the densities (:meth:`log_prob` and :meth:`log_density_matrix` from ``distribution``,
    :meth:`prior_log_prob` from ``prior``; without the one it reads, each raises a :class:`LatentError`, a
    ``NotImplementedError``), :meth:`location_scale` (None) and :attr:`parts` (itself).
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
        return self._log_prob("distribution", "log_prob", z)

    def prior_log_prob(self, z: Tensor) -> Tensor:
        """log p(z) per dimension, shape ``(batch, code_size)``."""
        return self._log_prob("prior", "prior_log_prob", z)

    def log_density_matrix(self, z: Tensor) -> Tensor:
        """log q(z_i | x_j) per dimension of every code ``z_i`` of ``z`` under every posterior ``j`` of the batch.

        ``z`` holds any number of codes (the batch's own, those of a whole DDP batch, or a metric's draws):
        the shape is ``(len(z), batch, code_size)``.
        """
        return self._log_prob("distribution", "log_density_matrix", z.unsqueeze(1))

    def location_scale(self) -> LocationScale | None:
        """This posterior as a :class:`LocationScale` density, or None (the default) when it is not one.

        The entropy metrics (``mig_chen``, ``total_correlation``) need it: their estimator over a whole dataset
        sums the densities of every posterior, which a location-scale family makes fast and exact.
        """
        return None

    def _log_prob(self, attribute: str, what: str, z: Tensor) -> Tensor:
        """The default ``what``: ``log_prob(z)`` of the ``distribution`` or ``prior``. Codes outside its support (a
        Bernoulli prior at relaxed samples), which torch refuses while its argument checks are on, are a
        :class:`LatentError` naming this posterior, as a missing density is."""
        distribution = self._set(attribute, what)
        try:
            return distribution.log_prob(z)
        except ValueError:
            if not _outside_support(distribution, z):
                raise
            raise LatentError(f"{type(self).__name__} has no {what} at these codes: they lie outside the support "
                              f"of its '{attribute}' ({type(distribution).__name__}, support "
                              f"{distribution.support}); override {what}() to give one") from None

    def _set(self, attribute: str, what: str) -> Distribution:
        """The per-dimension ``distribution`` or ``prior`` that the default ``what`` reads, refused when unset."""
        value = getattr(self, attribute)
        if value is None:
            raise LatentError(f"{type(self).__name__} sets no '{attribute}', so it has no {what}; set "
                              f"'{attribute}' (a torch.distributions object per dimension) or override {what}()")
        return value

    @property
    def parts(self) -> dict[str, Posterior]:
        """The posterior of each part, by name."""
        return {"z": self}

    def __repr__(self) -> str:
        parts = self.parts
        inner = "" if list(parts.values()) == [self] else ", parts={" + ", ".join(
            f"{name!r}: {part!r}" for name, part in parts.items()) + "}"
        return f"{type(self).__name__}(batch={self.mode.shape[0]}, code_size={self.code_size}{inner})"


def _outside_support(distribution: Distribution, z: Tensor) -> bool:
    """Whether some of ``z`` lies outside ``distribution``'s support; False when that cannot be told (a support that
    depends on the value, or ``z`` of another shape: torch's own error says more)."""
    try:
        return not bool(distribution.support.check(z).all())
    except (ValueError, RuntimeError, NotImplementedError):
        return False


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
    registered_name: str | None = None
    """The name the family was built by (``vaezoo.assemble.build_part`` sets it): the default :meth:`layout`'s."""

    def posterior(self, params: Tensor) -> Posterior:
        """Build q(z|x) from the encoder's parameters, shape ``(batch, param_size)``."""
        raise NotImplementedError

    def sample_prior(self, n: int, generator: torch.Generator | None = None,
                     device: torch.device | None = None) -> Tensor:
        """Draw ``n`` codes from the prior, shape ``(n, code_size)``, on ``device`` (a torch device, as torch's
        factories take it: vaezoo passes the model's, never ``"auto"``)."""
        raise NotImplementedError

    @property
    def prior(self) -> Distribution:
        """The prior p(z), a ``torch.distributions`` object per dimension, of batch shape ``()`` or
        ``(code_size,)``; its support defines the default traversal (:meth:`sweeps`) and reference code."""
        raise NotImplementedError

    @property
    def parts(self) -> dict[str, LatentFamily]:
        """The family of each part, by name; a single-part family is its own part ``"z"``."""
        return {"z": self}

    def part_slices(self) -> dict[str, slice]:
        """Each part's slice of the code."""
        return {"z": slice(0, self.code_size)}

    def reference_code(self) -> Tensor:
        """The code a traversal holds still when it has no image to start from: the prior's mean when it lies in
        the prior's support, else the first value of a discrete support (0 for a Bernoulli prior)."""
        prior = self._prior_per_dimension()
        if prior.has_enumerate_support:
            return prior.enumerate_support(expand=True)[0].float().clone()
        return prior.mean.clone()

    def sweeps(self, steps: int, span: tuple[float, float]) -> list[Sweep]:
        """What each row of a traversal varies: one row per dimension, each value inside the prior's support.

        The default follows the prior (:attr:`prior`, per dimension):

        - a discrete prior with an enumerable support (``Bernoulli``): each value of the support in turn;
        - a prior on the whole real line (``Normal``, ``Laplace``): ``steps`` values from ``span[0]`` to
          ``span[1]`` prior standard deviations around the prior mean;
        - any other continuous prior (a bounded support): its ``icdf`` at the standard normal quantiles of
          those ``steps`` offsets, so the values stay inside the support.

        Families whose dimensions do not move independently (a categorical) override it; so does a family whose
        prior is none of these.

        Args:
            steps: values per row (a discrete support gives as many as it has).
            span: the range of the offsets, in prior standard deviations.
        """
        prior = self._prior_per_dimension()
        if prior.has_enumerate_support:
            values = prior.enumerate_support(expand=True).float()  # (support size, code_size)
        else:
            offsets = torch.linspace(span[0], span[1], steps, device=prior.mean.device)
            if prior.support is constraints.real:
                values = prior.mean + offsets[:, None] * prior.stddev
            else:
                standard = Normal(torch.zeros((), device=offsets.device), torch.ones((), device=offsets.device))
                quantiles = standard.cdf(offsets).clamp(1e-6, 1 - 1e-6)[:, None]
                try:
                    values = prior.icdf(quantiles.expand(steps, self.code_size))
                except NotImplementedError:
                    raise LatentError(f"latent family {type(self).__qualname__} ({type(self).__module__}): its prior, "
                                      f"{type(prior).__name__}, has no icdf, which the default sweeps() needs on a "
                                      f"bounded support; override sweeps()") from None
        return [Sweep(i, slice(i, i + 1), i, values[:, i:i + 1]) for i in range(self.code_size)]

    def _prior_per_dimension(self) -> Distribution:
        """The prior with batch shape ``(code_size,)``."""
        return self.prior.expand((self.code_size,))

    def layout(self) -> list[LatentPart]:
        """The family's parts as a card states them (its ``latent``), in code order.

        The default is one part: the name the family is registered and built by (else, built directly, its class
        name in lower case), of ``code_size`` dimensions (``laplace`` of ``dim=8`` gives ``laplace(8)``). A
        family listings should show under another name, or whose code is not one part, overrides it.
        """
        return [LatentPart(family=self.registered_name or type(self).__name__.lower(), size=self.code_size)]


def require_params(family: LatentFamily, params: Tensor, reads: int, counted: str) -> None:
    """Refuse ``params`` unless they hold the ``reads`` parameters per image ``family.posterior()`` reads: a family
    whose ``param_size`` says another number (a subclass that changed one and not the other) would fail inside the
    split, or build a posterior of another width, naming no part.

    Args:
        family: the family whose ``posterior()`` is reading ``params``.
        params: ``(batch, param_size)`` from the encoder's head.
        reads: how many parameters per image ``posterior()`` reads.
        counted: how it counts them, as a message says it (``"2 * dim"``).

    Raises:
        PluginError: naming the family, its module and the number ``param_size`` must be.
    """
    if params.shape[-1] != reads:
        declared = " (its param_size)" if params.shape[-1] == family.param_size else ""
        raise PluginError(f"latent family {type(family).__qualname__} ({type(family).__module__}): posterior() reads "
                          f"{counted} = {reads} parameters per image, got {params.shape[-1]}{declared}; param_size "
                          f"must be {reads}")


@contextmanager
def distribution_checks(on: bool) -> Iterator[None]:
    """``torch.distributions``' argument checks on or off for the block, whatever they were, restored after it.

    On, a value outside a distribution's support raises, which is how a family's default densities find codes
    they have none at; checks that rely on that turn them on, since the first ``torch.compile`` of a process
    turns them off for the rest of it. Off, training saves their cost each step, and a loss gone NaN is named by
    the training loop with its step and last good checkpoint rather than raised from inside the model.
    """
    previous = Distribution._validate_args
    Distribution.set_default_validate_args(on)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(previous)
