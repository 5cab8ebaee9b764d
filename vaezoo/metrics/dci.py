"""DCI disentanglement, completeness and informativeness (Eastwood & Williams, 2018, "A Framework for
the Quantitative Evaluation of Disentangled Representations", ICLR), as disentanglement_lib computes
them (``dci.py``, config ``dci``: 10,000 training and 5,000 test points).

For each factor k, scikit-learn's ``GradientBoostingClassifier`` (default settings: 100 trees of
depth 3 per class, learning rate 0.1) predicts k from the whole code, trained on the training
points. R[j, k] is the importance of code dimension j in that model (its impurity-based
``feature_importances_``, which sum to 1 over j).

- disentanglement: 1 - H_K(P_j.), the entropy (base K) of dimension j's importances normalised
  over factors, averaged over dimensions weighted by each dimension's share of the total importance;
- completeness: 1 - H_D(P_.k), the same over dimensions for each factor, weighted by factor;
- informativeness: the classifiers' mean accuracy on the test points (disentanglement_lib's
  ``informativeness_test``; higher is better, unlike the paper's prediction error).

The three share one fit: computing them one after another for the same model, dataset and
parameters fits the classifiers once, one factor per worker process (``jobs``:
:mod:`vaezoo.metrics.parallel`). A factor that takes one value on the
training points has nothing to predict and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import entropy

from vaezoo.metrics.codes import require_factors
from vaezoo.metrics.fits import gbt_fit
from vaezoo.metrics.parallel import process_map
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import FACTORS
from vaezoo.metrics.spec import Points, Seed, metric_spec
from vaezoo.metrics.sampling import QUICK_FIT, Codes, draw, sklearn_seed, varying_factors


@dataclass(frozen=True)
class DCI:
    """The DCI scores of a code, and the importances they come from.

    Attributes:
        disentanglement, completeness: in [0, 1].
        informativeness: mean test accuracy of the per-factor classifiers.
        informativeness_train: the same on the training points.
        importance: ``(D, K')`` R[j, k].
    """

    disentanglement: float
    completeness: float
    informativeness: float
    informativeness_train: float
    importance: np.ndarray


def importance_gbt(train_codes: np.ndarray, train_factors: np.ndarray, test_codes: np.ndarray,
                   test_factors: np.ndarray, random_state: int = 0) -> tuple[np.ndarray, float, float]:
    """Gradient-boosted trees per factor: the importance matrix and the mean train and test accuracies.

    Args:
        train_codes, test_codes: ``(n, D)`` codes.
        train_factors, test_factors: ``(n, K)`` their factor classes.
        random_state: the trees' seed.

    Returns:
        ``(R, train_accuracy, test_accuracy)``, R of shape ``(D, K')`` for the K' factors with at least
        two values on the training points.

    Raises:
        MetricError: no factor takes two values on the training points.
    """
    classes = [len(np.unique(column)) for column in train_factors.T]
    varying = varying_factors(train_factors)

    # a factor's fit costs in proportion to its classes (a tree per class and round): the largest go first,
    # one factor per worker process (vaezoo.metrics.parallel.get_jobs)
    largest_first = sorted(varying, key=lambda k: -classes[k])
    fits = dict(zip(largest_first, process_map(gbt_fit, [
        (train_codes, train_factors[:, k], test_codes, test_factors[:, k], random_state) for k in largest_first])))
    importance = np.stack([fits[k][0] for k in varying], 1)
    return (importance, float(np.mean([fits[k][1] for k in varying])),
            float(np.mean([fits[k][2] for k in varying])))


def _weighted_specificity(importance: np.ndarray) -> float:
    """Sum over rows of (1 - entropy of the row, base = its length) times the row's share of the total."""
    with np.errstate(divide="ignore", invalid="ignore"):  # base 1: the NaN ONE_FACTOR and ONE_DIMENSION explain
        per_row = 1.0 - entropy(importance.T + 1e-11, base=importance.shape[1])
    weights = importance if importance.sum() > 0 else np.ones_like(importance)
    return float(np.sum(per_row * weights.sum(1) / weights.sum()))


def disentanglement(importance: np.ndarray) -> float:
    """DCI disentanglement of an importance matrix R ``(D, K)``: 1 if each dimension matters to one factor."""
    return _weighted_specificity(importance)


def completeness(importance: np.ndarray) -> float:
    """DCI completeness of an importance matrix R ``(D, K)``: 1 if each factor is captured by one dimension."""
    return _weighted_specificity(importance.T)


def dci_from_codes(codes: Codes, factors: np.ndarray, rng: np.random.Generator, points: int = 10_000,
                   test_points: int = 5_000) -> DCI:
    """The DCI scores of a table of codes.

    Args:
        codes: ``codes[indices] -> (n, D)``, one row per image.
        factors: ``(N, K)`` the images' factor classes.
        rng: the generator of the draws and the trees' seed.
        points, test_points: images drawn to train and to test the classifiers.
    """
    train = draw(codes, factors, rng, points)
    test = draw(codes, factors, rng, test_points)
    importance, train_accuracy, test_accuracy = importance_gbt(*train, *test, random_state=sklearn_seed(rng))
    return DCI(disentanglement(importance), completeness(importance), test_accuracy, train_accuracy, importance)


ROUNDING = 5e-3
"""How far DCI's scores move when only the float rounding of the codes changes: the trees split on the tiny
variations of collapsed dimensions, so codes apart by float rounding (the encoder in another memory order) moved
betatcvae-dsprites' scores by up to 2.2e-3 (docs/metrics.md); ``vaezoo eval --check`` allows this much."""


ONE_FACTOR = ("NaN when a single factor takes two values on the training points: the entropy of a dimension's "
              "importances is taken in base K, the number of such factors, and base 1 has no logarithm")
ONE_DIMENSION = ("NaN when the code has a single dimension: the entropy of a factor's importances is taken in base D, "
                 "the number of code dimensions, and base 1 has no logarithm")


def dci(evaluation: Evaluation, points: int = 10_000, test_points: int = 5_000, seed: Seed = 0) -> DCI:
    """The :class:`DCI` of the mean codes of ``evaluation``'s model on its images, computed once per evaluation
    and settings.

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``.
        points, test_points: training and test images (10,000 and 5,000).
        seed: seed of the draws and of the trees.
    """
    factors = require_factors(evaluation.dataset, "dci").numpy()
    return evaluation.shared(("dci", points, test_points, seed), lambda: dci_from_codes(
        evaluation.codes, factors, np.random.default_rng(seed), points, test_points))


@metric_spec(needs=(FACTORS,), suite="disentanglement", rounding=ROUNDING, quick=QUICK_FIT,
             not_finite=ONE_FACTOR)
def dci_disentanglement(evaluation: Evaluation, points: Points = 10_000, test_points: Points = 5_000,
                        seed: Seed = 0) -> float:
    """DCI disentanglement of ``evaluation``'s model on its images (arguments as :func:`dci`)."""
    return dci(evaluation, points, test_points, seed).disentanglement


@metric_spec(needs=(FACTORS,), suite="disentanglement", rounding=ROUNDING, quick=QUICK_FIT,
             not_finite=ONE_DIMENSION)
def dci_completeness(evaluation: Evaluation, points: Points = 10_000, test_points: Points = 5_000,
                     seed: Seed = 0) -> float:
    """DCI completeness of ``evaluation``'s model on its images (arguments as :func:`dci`)."""
    return dci(evaluation, points, test_points, seed).completeness


@metric_spec(needs=(FACTORS,), suite="disentanglement", rounding=ROUNDING, quick=QUICK_FIT)
def dci_informativeness(evaluation: Evaluation, points: Points = 10_000, test_points: Points = 5_000,
                        seed: Seed = 0) -> float:
    """DCI informativeness (mean test accuracy) of ``evaluation``'s model on its images (arguments as :func:`dci`)."""
    return dci(evaluation, points, test_points, seed).informativeness
