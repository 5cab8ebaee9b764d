"""A registered metric as a spec: its function, its direction, what it needs and its settings.

The core's metrics are written as ``function(evaluation, **settings) -> float`` and made specs with
:func:`metric_spec`; :func:`vaezoo.evaluation.measure.evaluate` hands each one the same
:class:`~vaezoo.metrics.evaluation.Evaluation`. A spec is also called as a plain metric,
``spec(model, dataset, device=None, batch_size=1024, **settings)``, on an evaluation of its own. A plugin may
register a plain function of that signature instead (with its needs stated by
:func:`~vaezoo.metrics.requirements.requires`): :meth:`MetricSpec.of` makes it a spec.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import annotated_types
import numpy as np
import torch

from vaezoo.context import check_arguments
from vaezoo.data import EVAL_BATCH_SIZE, DataInfo, ImageDataset
from vaezoo.errors import MetricError
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import Requirement, unmet
from vaezoo.store.locks import GENERATORS

MAX_COUNT = 10_000_000
Count = Annotated[int, annotated_types.Interval(ge=1, le=MAX_COUNT)]
"""The type of a metric's setting that counts points, samples, pairs or bins. The bounds are checked, with the
other settings, before any image is read: 0 fails at once instead of after an encoding pass, and a typo's
extra zeros (a thousand times any protocol's count) are refused instead of running for days."""

Points = Annotated[int, annotated_types.Interval(ge=2, le=MAX_COUNT)]
"""The type of a metric's setting that counts the points a classifier learns from or is tested on, or a statistic
compares (a mutual information, a covariance, a ROC AUC): one point holds one value of every factor and dimension, so
that the metric could only give a number that looks measured (modularity and the MIG of one point were 0.0, the
BetaVAE score of one training point 0.395, and an accuracy on one test point is 0 or 1 whatever the code)."""

Bins = Annotated[int, annotated_types.Interval(ge=2, le=MAX_COUNT)]
"""The type of a metric's setting that counts a histogram's bins: one bin holds every value, so that every mutual
information read from it is 0, a number that looks measured."""
Seed = Annotated[int, annotated_types.Interval(ge=0, le=2**63 - 1)]
"""The type of a metric's ``seed``: a whole number that seeds a ``numpy.random.Generator`` and scikit-learn, as a
card's seeds are (0 to 2^63 - 1)."""

_PLAIN_ARGUMENTS = ("model", "dataset", "device", "batch_size")  # batch_size: the results do not depend on it


@dataclass(frozen=True)
class MetricSpec:
    """A metric and what a caller needs to know of it.

    Attributes:
        function: ``function(evaluation, **settings) -> float``.
        higher_is_better: the direction a leaderboard ranks it in (False for a loss or a total correlation).
        needs: what it needs of a model and its data, checked before any image is read
            (:mod:`vaezoo.metrics.requirements`).
        settings: the settings it runs with by default (points, bins, seed, ...), recorded on a card.
        suite: the suite it belongs to, if any (``"disentanglement"``: the scores of the code against a dataset's
            ground-truth factors that a card of such a dataset lists).
        quick: settings, over :attr:`settings`, under which a trial run checks that the metric works on a model
            (the conformance kit's): the same computation at a smaller size, e.g. fewer samples.
        rounding: how far the value moves when nothing but the float rounding of the model's pass changes (another
            CPU kernel, memory order or device), where that is more than ``vaezoo eval --check``'s tolerance: the
            check allows at least this difference (0 for a metric whose value such rounding barely moves).
        not_finite: when, and why, the metric gives NaN or inf (a constant code dimension, a singular covariance),
            which ``vaezoo eval`` and training say beside such a value; "" for a metric that always gives a number.
    """

    function: Callable[..., float]
    higher_is_better: bool = True
    needs: tuple[Requirement, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    suite: str | None = None
    quick: Mapping[str, Any] = field(default_factory=dict)
    rounding: float = 0.0
    not_finite: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.higher_is_better, bool):  # a card records it, and takes only true or false
            raise TypeError(f"higher_is_better of metric '{getattr(self.function, '__name__', self.function)}' is "
                            f"True or False, got {self.higher_is_better!r}")
        if not isinstance(self.not_finite, str):  # a line vaezoo prints beside a NaN or an inf
            raise TypeError(f"not_finite of metric '{getattr(self.function, '__name__', self.function)}' is text, "
                            f"got {self.not_finite!r}")
        object.__setattr__(self, "__doc__", self.function.__doc__)

    def measure(self, evaluation: Evaluation, **settings: Any) -> float:
        """The metric on ``evaluation`` with :attr:`settings`, updated with ``settings``.

        Raises:
            MetricError: a setting the metric does not take, or a value outside its type (:meth:`check_settings`).
        """
        try:
            settings = self.check_settings(settings, f"metric '{self.function.__name__}'")
        except ValueError as exc:
            raise MetricError(str(exc)) from None
        with GENERATORS:  # the metric's seeded draws, from torch's global generators: one at a time in the process
            value = self.function(evaluation, **{**self.settings, **settings})
        try:
            if isinstance(value, bool | str | bytes) or _truth_values(value):  # float() takes True as 1, "0.5" as 0.5
                raise TypeError
            return float(value)
        except (TypeError, ValueError):
            shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:60]}..."
            raise TypeError(f"it returned {type(value).__name__} {shown}, not a number (a metric returns one "
                            f"float)") from None

    @property
    def takes_settings(self) -> bool:
        """Whether the metric takes any setting (an argument after the evaluation), defaulting to a value or to None
        alike: a card records the settings such a metric's value was measured with, ``{}`` for defaults that are all
        None (unset), which :attr:`settings` leaves out."""
        return len(inspect.signature(self.function).parameters) > 1

    def check_settings(self, settings: Mapping[str, Any], subject: str) -> dict[str, Any]:
        """Refuse ``settings`` unless the metric takes each of them, with a value of the type it states.

        Returns:
            ``settings``, a whole number given for an int (``numpy.int64(50)``) as that int, as a card records it.

        Raises:
            ValueError: one line naming ``subject`` (e.g. ``"metric 'elbo'"``), the setting and what it takes.
        """
        evaluation = next(iter(inspect.signature(self.function).parameters))
        return check_arguments(self.function, settings, subject, skip=(evaluation,))

    def __call__(self, model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE,
                 **settings: Any) -> float:
        """The metric of ``model`` on ``dataset``, alone (on an :class:`Evaluation` of its own), run on ``device``
        (``"auto"`` too: :func:`vaezoo.devices.usable_device`). ``batch_size`` is ``vaezoo eval``'s by default: a
        metric that draws samples batch by batch (``elbo``, ``importance_log_likelihood``) draws other samples, and
        gives another estimate, at another batch size.

        Raises:
            MetricError: what the metric needs (:attr:`needs`) that a vaezoo ``model`` or ``dataset`` lacks, named
                as ``vaezoo eval`` names it, before any image is read; or as :meth:`measure`.
        """
        from vaezoo.model import VAE

        evaluation = Evaluation(model, dataset, device, batch_size)
        # the needs are asked of a vaezoo model's latent family, likelihood and code size: a model of one's own with
        # an encode() alone has none to ask, and is measured unchecked
        if isinstance(model, VAE) and (reasons := unmet(self.needs, model, _facts(evaluation.dataset))):
            raise MetricError(f"metric '{self.function.__name__}' " + ". ".join(reasons))
        return self.measure(evaluation, **settings)

    @classmethod
    def of(cls, metric: MetricSpec | Callable[..., float]) -> MetricSpec:
        """``metric`` as a spec: a spec as it is; a plain function ``fn(model, dataset, device=None,
        batch_size=1024, **settings)`` with the needs :func:`~vaezoo.metrics.requirements.requires` gave it, its
        keyword defaults as settings, and higher taken as better."""
        if isinstance(metric, MetricSpec):
            return metric

        def plain(evaluation: Evaluation, **settings: Any) -> float:
            return metric(evaluation.model, evaluation.dataset, device=evaluation.device,
                          batch_size=evaluation.batch_size, **settings)

        plain.__doc__, plain.__name__ = metric.__doc__, getattr(metric, "__name__", "metric")  # messages name it
        signature = inspect.signature(metric)  # its settings, for check_settings: the function's own, typed
        plain.__signature__ = signature.replace(parameters=[
            inspect.Parameter("evaluation", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *(p for name, p in signature.parameters.items() if name not in _PLAIN_ARGUMENTS)])
        plain.__wrapped__ = metric  # where check_settings resolves the annotations
        return cls(plain, needs=tuple(getattr(metric, "requires", ())), settings=_defaults(metric, _PLAIN_ARGUMENTS))


def metric_spec(*, higher_is_better: bool = True, needs: Sequence[Requirement] = (), suite: str | None = None,
                quick: Mapping[str, Any] | None = None, rounding: float = 0.0,
                not_finite: str = "") -> Callable[[Callable[..., float]], MetricSpec]:
    """Make ``function(evaluation, **settings)`` a :class:`MetricSpec`; its settings are its keyword defaults."""
    def make(function: Callable[..., float]) -> MetricSpec:
        first = next(iter(inspect.signature(function).parameters))
        return MetricSpec(function, higher_is_better, tuple(needs), _defaults(function, (first,)), suite,
                          dict(quick or {}), rounding, not_finite)

    return make


def _facts(dataset: ImageDataset) -> DataInfo:
    """What the needs of a metric are checked against, of a dataset in hand: its factors by their names, or by their
    column numbers where it names none (a card's split always names them)."""
    columns = 0 if dataset.factors is None else dataset.factors.shape[-1]  # 1-d too: the metric refuses the shape
    channels, _, size = dataset.image_shape  # images' own shape is packed for some (dSprites': (N, 1, 64, 8))
    return DataInfo(size=len(dataset), image_size=size, channels=channels,
                    factor_names=dataset.factor_names or tuple(map(str, range(columns))),
                    nominal_factors=dataset.nominal_factors)


def _truth_values(value: Any) -> bool:
    """Whether ``value`` holds numpy's or torch's booleans (``np.True_``, a bool array or tensor)."""
    dtype = getattr(value, "dtype", None)
    return dtype is torch.bool or (isinstance(dtype, np.dtype) and dtype.kind == "b")


def _defaults(function: Callable, skip: Sequence[str]) -> dict[str, Any]:
    """``function``'s keyword defaults but those of ``skip`` and None ("unset", which a card cannot hold)."""
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if name not in skip and p.default not in (inspect.Parameter.empty, None)}
