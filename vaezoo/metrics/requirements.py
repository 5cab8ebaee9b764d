"""What a metric needs of a model and its data, stated on the metric and checked before any data is read.

A metric states its needs on its spec (:attr:`vaezoo.metrics.spec.MetricSpec.needs`; a plain function with
:func:`requires`). :func:`vaezoo.evaluation.measure.check_metrics` matches a card's
``eval_metrics`` against the model the card describes (at step 0 of training, and before ``vaezoo eval``
reads an image) and refuses a metric the model cannot serve, naming the metric and what is missing, rather
than failing after the encoding. A plugin's metric states the same needs, or its own
:class:`Requirement`. Every need is checked through the latent protocol only (docs/plugins.md): a posterior
built from zero parameters is asked for what the metric will ask of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from vaezoo.data import DataInfo
from vaezoo.context import layout_text
from vaezoo.errors import VaezooError
from vaezoo.latents.base import distribution_checks

M = TypeVar("M", bound=Callable[..., float])


@dataclass(frozen=True)
class Requirement:
    """One thing a metric needs.

    Attributes:
        needs: what it is, in words (completes "the metric needs ...").
        missing: ``missing(model, info)`` -> why ``model``, evaluated on a split described by ``info`` (a
            :class:`~vaezoo.data.DataInfo`), lacks it; None when it has it.
    """

    needs: str
    missing: Callable[[Any, DataInfo], str | None]


def requires(*needs: Requirement) -> Callable[[M], M]:
    """Decorate a plain metric function with what it needs (kept as its ``requires`` attribute, which
    :meth:`vaezoo.metrics.spec.MetricSpec.of` reads)."""
    def mark(metric: M) -> M:
        metric.requires = tuple(needs)
        return metric

    return mark


def unmet(needs: Sequence[Requirement], model, info: DataInfo) -> list[str]:
    """Which of a metric's ``needs`` ``model`` (on a split described by ``info``) lacks, each as
    ``"needs WHAT; WHY"``; empty when nothing is missing."""
    reasons = []
    for requirement in needs:
        why = requirement.missing(model, info)
        if why is not None:
            reasons.append(f"needs {requirement.needs}; {why}")
    return reasons


@contextmanager
def _probe(model) -> Iterator[Any]:
    """A posterior of ``model``'s latent built from zero parameters (batch of 2), drawn without touching the
    global random state, so a check at step 0 leaves the training run as it would have been; with
    ``torch.distributions``' argument checks on, whatever they were, so a density outside its support raises."""
    parameter = next(model.parameters())
    devices = [parameter.device] if parameter.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), torch.no_grad(), distribution_checks(True):
        yield model.latent.posterior(torch.zeros(2, model.latent.param_size, device=parameter.device,
                                                 dtype=parameter.dtype))


def _factors_missing(model, info: DataInfo) -> str | None:
    return None if info.factor_names else "its dataset has none"


def _density_matrix_missing(model, info: DataInfo) -> str | None:
    problems = []
    with _probe(model) as posterior:
        for name, part in posterior.parts.items():
            if part.location_scale() is not None:
                return None
            try:
                matrix = part.log_density_matrix(part.rsample())
            except Exception as exc:  # noqa: BLE001 - a plugin's family may raise anything; report it
                problems.append(f"{type(part).__name__}.log_density_matrix() of part {name!r} raised "
                                f"{type(exc).__name__}")
                continue
            if bool(torch.isfinite(matrix).all()):
                return None
            problems.append(f"{type(part).__name__}.log_density_matrix() of part {name!r} is not finite")
    return f"the latent {layout_text(model.latent.layout())} has none ({'; '.join(problems)})"


def _density_missing(model, info: DataInfo) -> str | None:
    problems = []
    with _probe(model) as posterior:
        for name, part in posterior.parts.items():
            z = part.rsample()
            for method in ("log_prob", "prior_log_prob"):
                try:
                    value = getattr(part, method)(z)
                except Exception as exc:  # noqa: BLE001 - a plugin's family may raise anything; report it
                    problems.append(f"{type(part).__name__}.{method}() of part {name!r} raised "
                                    f"{type(exc).__name__}: {_problem(exc)}")
                    break
                if not bool(torch.isfinite(value).all()):
                    problems.append(f"{type(part).__name__}.{method}() of part {name!r} is not finite at the "
                                    f"posterior's samples")
                    break
    return "; ".join(problems) or None


def _problem(exc: Exception) -> str:
    """The first line of ``exc``'s message; of vaezoo's own ("problem; fix"), the problem only: its fix is for the
    family's author ("set 'prior' ... or override prior_log_prob()"), which a user of the family cannot do."""
    line = str(exc).splitlines()[0] if str(exc) else ""
    return line.split("; ")[0] if isinstance(exc, VaezooError) else line


def _likelihood_missing(model, info: DataInfo) -> str | None:
    if getattr(model.likelihood, "normalised", False):
        return None
    return f"{type(model.likelihood).__name__} scores images up to a constant"


def _second_dimension_missing(model, info: DataInfo) -> str | None:
    return None if model.code_size >= 2 else f"its code has {model.code_size} dimension"


FACTORS = Requirement("a dataset with ground-truth factors (e.g. dsprites)", _factors_missing)
DENSITY_MATRIX = Requirement("a latent part whose posterior has a density at any code (Posterior.location_scale() "
                             "or log_density_matrix())", _density_matrix_missing)
DENSITY = Requirement("a posterior and a prior density at the posterior's samples "
                      "(Posterior.log_prob() and prior_log_prob(), finite)", _density_missing)
TWO_DIMENSIONS = Requirement("a code of 2 dimensions or more (a gap between the two that best predict a factor)",
                             _second_dimension_missing)
NORMALISED_LIKELIHOOD = Requirement("a likelihood whose nll is a log-density (e.g. bernoulli)", _likelihood_missing)
