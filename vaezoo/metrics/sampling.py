"""Drawing images as disentanglement_lib draws ground-truth factors, and their codes, encoded once.

disentanglement_lib samples factor combinations uniformly and renders one image per combination.
On a dataset that holds every combination once (dSprites), drawing an image index uniformly is
the same draw; fixing factor k at a value and drawing the rest is drawing an image uniformly among
those with that value of k. :class:`FactorGroups` does the latter for any dataset with factors.

The metrics read codes through a table of the dataset's codes, ``codes[indices] -> (n, D)``: a
numpy array in the tests, and for a model the :class:`~vaezoo.metrics.evaluation.CodeTable` of its
evaluation, which encodes each image the first time a metric asks for it. The suite draws about three
million images from dSprites' 737,280, so encoding each once makes the encoder's share of the work
that of one pass; and when the evaluation encodes the whole dataset (for ``mig_chen``'s posteriors, or
``vaezoo eval``'s losses) the same pass fills the table.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from vaezoo.data import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.errors import MetricError
from vaezoo.metrics.codes import check_table, finite_codes
from vaezoo.metrics.evaluation import CodeTable, Evaluation


class Codes(Protocol):
    """A table of codes, one row per image of a dataset: an ``(N, D)`` array or a
    :class:`~vaezoo.metrics.evaluation.CodeTable`."""

    def __len__(self) -> int: ...

    def __getitem__(self, indices: np.ndarray) -> np.ndarray: ...


def code_table(model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE) -> CodeTable:
    """The mean codes of ``model`` on ``dataset``, encoded on first use on ``device`` (``"auto"`` too:
    :func:`vaezoo.devices.usable_device`): the :attr:`~vaezoo.metrics.evaluation.Evaluation.codes` of an
    evaluation of their own."""
    return Evaluation(model, dataset, device, batch_size).codes


class FactorGroups:
    """The images of a dataset grouped by the value of each factor, to draw images that share one.

    Args:
        factors: ``(N, K)`` factor classes (any integers, or any values that sort).
    """

    def __init__(self, factors: np.ndarray):
        self.factors = np.asarray(factors)
        self._order, self._start, self._count, self._rank = [], [], [], []
        for column in self.factors.T:
            # by rank among the column's values, not by value: ids far apart (10**11) need no table of that size
            _, rank, count = np.unique(column, return_inverse=True, return_counts=True)
            self._order.append(np.argsort(rank, kind="stable"))
            self._start.append(np.cumsum(count) - count)
            self._count.append(count)
            self._rank.append(rank)

    @property
    def num_factors(self) -> int:
        """K, the number of factors."""
        return self.factors.shape[1]

    @property
    def varying(self) -> np.ndarray:
        """The factors that take at least two values, in order: holding one of the others fixed holds nothing."""
        return np.flatnonzero([len(count) > 1 for count in self._count])

    def sharing(self, factor: np.ndarray, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each anchor image, an image drawn uniformly among those with its value of a factor.

        Args:
            factor: ``(P,)`` the factor to share, per row of ``anchors``.
            anchors: ``(P, M)`` image indices.
            rng: the draw's generator.

        Returns:
            ``(P, M)`` image indices.
        """
        out = np.empty(anchors.shape, dtype=np.int64)
        for k in range(self.num_factors):
            rows = np.flatnonzero(factor == k)
            value = self._rank[k][anchors[rows]]
            position = self._start[k][value] + rng.integers(0, self._count[k][value])
            out[rows] = self._order[k][position]
        return out


def draw(codes: Codes, factors: np.ndarray | None, rng: np.random.Generator,
         points: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``points`` images drawn uniformly with replacement (disentanglement_lib's ``generate_batch_factor_code``).

    Returns:
        Their codes ``(points, D)`` float64 and factors ``(points, K)`` (None when ``factors`` is None).
    """
    factors = check_table(codes, factors)
    indices = rng.integers(0, len(codes), points)
    return finite_codes(codes[indices]), None if factors is None else factors[indices]


def varying_factors(factors: np.ndarray, drawn: str = "training point(s)",
                    so: str = "there is nothing to predict") -> list[int]:
    """The columns of ``factors`` ``(n, K)``, the factor classes of the points drawn, that take at least two values:
    the factors a classifier can learn, or that a mutual information can be other than 0 for.

    Args:
        factors: the factor classes of the points drawn.
        drawn, so: what the points are, and what a single value of every factor leaves, for the message.

    Raises:
        MetricError: none does (too few points drawn, e.g. ``points = 1``), where the metric's mean over the
            factors was NaN or an error of scipy's, or every mutual information 0.
    """
    varying = [k for k in range(factors.shape[1]) if len(np.unique(factors[:, k])) > 1]
    if not varying:
        raise MetricError(f"no factor takes two values on the {len(factors):,} {drawn} drawn, so {so}; "
                          f"draw more (the metric's points setting)")
    return varying


QUICK_FIT = {"points": 500, "test_points": 250}
"""The ``quick`` settings (:attr:`vaezoo.metrics.spec.MetricSpec.quick`) of a metric that fits classifiers on drawn
points and scores them on others: a trial run fits the same classifiers on fewer points (its defaults, 10,000 and
5,000, took 9 of a trial's 10 seconds)."""


def sklearn_seed(rng: np.random.Generator) -> int:
    """A seed for a scikit-learn estimator's ``random_state``, drawn from the metric's generator."""
    return int(rng.integers(2**31 - 1))
