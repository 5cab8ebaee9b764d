"""Modularity and explicitness (Ridgeway & Mozer, 2018, "Learning Deep Disentangled Embeddings With
the F-Statistic Loss", NeurIPS), as disentanglement_lib computes them
(``modularity_explicitness.py``, config ``modularity_explicitness``: 10,000 training and 5,000
test points, 20-bin histograms).

- modularity: each code dimension is discretised into 20 equal-width bins over the training
  points and its mutual information m_jk with every factor computed from the contingency table
  (scikit-learn's ``mutual_info_score``). A dimension's deviation from an ideal one-factor
  dimension is delta_j = sum_{k != k*} m_jk^2 / ((K - 1) m_jk*^2), k* its most informative
  factor; modularity is the mean of 1 - delta_j (a dimension with no information scores 0).
  It asks only that each dimension be about one factor: a code that ignores a factor loses
  nothing, and a random code's small, unequal histogram biases give it a middling score.
- explicitness: the training codes are standardised (per dimension, by the training mean and
  standard deviation); for each factor, a logistic regression on the whole code, one-vs-rest,
  predicts its class probabilities; the factor's score is the ROC AUC of each class against the
  rest on the test points, averaged over classes; explicitness is the mean over factors. The
  classifier is scikit-learn's ``LogisticRegression`` as disentanglement_lib ran it (scikit-learn
  0.20's defaults: liblinear, one-vs-rest, C = 1). 1 is a code from which every factor's classes
  are linearly ranked; 0.5 is chance.

Both draw the same training points when given the same seed, as disentanglement_lib computes them
from one draw. Conventions where disentanglement_lib would fail: a constant dimension is left
unscaled (it would divide by 0); a factor with one value on the training points, and a class that
is absent from the test points or fills them, are left out of explicitness (disentanglement_lib
would raise). A factor left with no class to rank (one that takes a single value on the test points, though it
took more on the training points) is left out of the mean over factors, as a factor with a single value on the
training points is; explicitness is refused only when no factor is left. Modularity is refused when no factor
takes two values on the points drawn (every mutual information would be 0, and so the score). Settings that
cannot measure anything (one point; for modularity, one bin) are refused before any image is read.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import mutual_info_score

from vaezoo.metrics.codes import require_factors
from vaezoo.metrics.mig import discretize
from vaezoo.metrics.fits import explicitness_auc
from vaezoo.metrics.parallel import process_map
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import FACTORS
from vaezoo.metrics.spec import Bins, Points, Seed, metric_spec
from vaezoo.errors import MetricError
from vaezoo.metrics.sampling import QUICK_FIT, Codes, draw, sklearn_seed, varying_factors


def mutual_information_matrix(binned: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """``(D, K)`` the mutual information (nats) of each discrete code column with each factor column."""
    return np.array([[mutual_info_score(factor, column) for factor in factors.T] for column in binned.T])


def modularity_of(mutual_information: np.ndarray) -> float:
    """Ridgeway & Mozer's modularity of a ``(D, K)`` mutual information matrix, ``K >= 2``."""
    squared = np.square(mutual_information)
    top = squared.max(1)
    with np.errstate(invalid="ignore"):  # K = 1: 0 / 0, the NaN the spec's not_finite explains
        delta = np.divide(squared.sum(1) - top, top * (squared.shape[1] - 1), out=np.ones_like(top), where=top > 0)
    return float(np.mean(np.where(top > 0, 1.0 - delta, 0.0)))


def explicitness_of(train_codes: np.ndarray, train_factors: np.ndarray, test_codes: np.ndarray,
                    test_factors: np.ndarray, random_state: int = 0) -> float:
    """Ridgeway & Mozer's explicitness: the mean over factors of a linear classifier's one-vs-rest test AUC.

    A factor with no class both present and absent among the test points (it takes one value on them) has no
    AUC to give and is left out of the mean, as a factor that takes one value on the training points is.

    Args:
        train_codes, test_codes: ``(n, D)`` codes.
        train_factors, test_factors: ``(n, K)`` their factor classes.
        random_state: the classifiers' seed.

    Raises:
        MetricError: no factor takes two values on the training points, or no factor has a class that is both
            present and absent among the test points.
    """
    mean, std = train_codes.mean(0), train_codes.std(0)
    std = np.where(std > 0, std, 1.0)
    train_codes, test_codes = (train_codes - mean) / std, (test_codes - mean) / std
    classes = [len(np.unique(column)) for column in train_factors.T]

    # one classifier per class: the factors with the most classes go first, one factor per worker process
    largest_first = sorted(varying_factors(train_factors), key=lambda k: -classes[k])
    scores = dict(zip(largest_first, process_map(explicitness_auc, [
        (train_codes, train_factors[:, k], test_codes, test_factors[:, k], random_state) for k in largest_first])))
    measured = [scores[k] for k in sorted(scores) if not np.isnan(scores[k])]
    if not measured:
        raise MetricError(f"no class of factor(s) {', '.join(map(str, sorted(scores)))} is both present and absent "
                          f"among the {len(test_factors):,} test point(s) drawn, so no AUC can be measured; draw more "
                          f"(the metric's test_points setting)")
    return float(np.mean(measured))


def modularity_from_codes(codes: Codes, factors: np.ndarray, rng: np.random.Generator, points: int = 10_000,
                          bins: int = 20) -> float:
    """The modularity of a table of codes.

    Args:
        codes: ``codes[indices] -> (n, D)``, one row per image.
        factors: ``(N, K)`` the images' factor classes, ``K >= 2``.
        rng: the generator of the draw.
        points: images drawn.
        bins: histogram bins per code dimension.

    Raises:
        MetricError: no factor takes two values on the points drawn.
    """
    train_codes, train_factors = draw(codes, factors, rng, points)
    varying_factors(train_factors, "point(s)", so="every mutual information is 0")
    return modularity_of(mutual_information_matrix(discretize(train_codes, bins), train_factors))


def explicitness_from_codes(codes: Codes, factors: np.ndarray, rng: np.random.Generator, points: int = 10_000,
                            test_points: int = 5_000) -> float:
    """The explicitness of a table of codes.

    Args:
        codes: ``codes[indices] -> (n, D)``, one row per image.
        factors: ``(N, K)`` the images' factor classes.
        rng: the generator of the draws and the classifiers' seed.
        points, test_points: images drawn to train and to test the classifiers.
    """
    train = draw(codes, factors, rng, points)
    test = draw(codes, factors, rng, test_points)
    return explicitness_of(*train, *test, random_state=sklearn_seed(rng))


@metric_spec(needs=(FACTORS,), suite="disentanglement",
             not_finite="NaN when the dataset has a single factor: a dimension's deviation from one factor's is "
                        "divided by K - 1, the number of other factors, which is 0")
def modularity(evaluation: Evaluation, points: Points = 10_000,
               bins: Bins = 20, seed: Seed = 0) -> float:
    """Ridgeway & Mozer's modularity of the mean codes of ``evaluation``'s model on its images (see the module
    docstring).

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``.
        points: images drawn (10,000).
        bins: histogram bins per code dimension (20).
        seed: seed of the draw.
    """
    factors = require_factors(evaluation.dataset, "modularity").numpy()
    return modularity_from_codes(evaluation.codes, factors,
                                 np.random.default_rng(seed), points, bins)


@metric_spec(needs=(FACTORS,), suite="disentanglement", quick=QUICK_FIT)
def explicitness(evaluation: Evaluation, points: Points = 10_000, test_points: Points = 5_000,
                 seed: Seed = 0) -> float:
    """Ridgeway & Mozer's explicitness of the mean codes of ``evaluation``'s model on its images (see the module
    docstring).

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``.
        points, test_points: training and test images (10,000 and 5,000).
        seed: seed of the draws and of the classifiers.
    """
    factors = require_factors(evaluation.dataset, "explicitness").numpy()
    return explicitness_from_codes(evaluation.codes, factors,
                                   np.random.default_rng(seed), points, test_points)
