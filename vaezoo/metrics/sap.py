"""The SAP score (Kumar, Sattigeri & Balakrishnan, 2018, "Variational Inference of Disentangled Latent
Concepts from Unlabeled Observations", ICLR), as disentanglement_lib computes it for discrete
factors (``sap_score.py``, config ``sap_score``: 10,000 training and 5,000 test points,
``continuous_factors = False``).

For each code dimension j and factor k, a linear SVM (scikit-learn ``LinearSVC``, C = 0.01,
balanced class weights) predicts k from z_j alone, trained on the training points; S[j, k] is its
accuracy on the test points. The score is the mean over factors of the gap between the two
largest S[j, k] over j. Each dimension's SVMs are fitted in a worker process of their own (``jobs``:
:mod:`vaezoo.metrics.parallel`), the same fits as one after another. A code in which each factor is predictable from one
dimension only scores high, one that spreads a factor over two dimensions scores about 0 for it. A linear
classifier on one dimension separates two classes but not many, so the best dSprites score is
far below 1. A factor that takes one value on the training points has nothing to predict and is
left out. A one-dimensional code has no second dimension to measure a gap to, and is refused (disentanglement_lib's
code fails on it).
"""

from __future__ import annotations

import numpy as np

from vaezoo.errors import MetricError
from vaezoo.metrics.codes import require_factors
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.fits import sap_row
from vaezoo.metrics.parallel import process_map
from vaezoo.metrics.requirements import FACTORS, TWO_DIMENSIONS
from vaezoo.metrics.spec import Points, Seed, metric_spec
from vaezoo.metrics.sampling import QUICK_FIT, Codes, draw, sklearn_seed, varying_factors


def sap_matrix(train_codes: np.ndarray, train_factors: np.ndarray, test_codes: np.ndarray,
               test_factors: np.ndarray, random_state: int = 0) -> np.ndarray:
    """S[j, k]: the test accuracy of a linear SVM predicting factor k from code dimension j alone.

    Args:
        train_codes, test_codes: ``(n, D)`` codes.
        train_factors, test_factors: ``(n, K)`` their factor classes.
        random_state: the SVMs' seed.

    Returns:
        ``(D, K')``, for the K' factors with at least two values on the training points.

    Raises:
        MetricError: no factor takes two values on the training points.
    """
    varying = varying_factors(train_factors)
    # one code dimension's SVMs per worker process (vaezoo.metrics.parallel.get_jobs): the same fits, the same numbers
    rows = process_map(sap_row, [(train_codes[:, j:j + 1], train_factors[:, varying], test_codes[:, j:j + 1],
                                  test_factors[:, varying], random_state) for j in range(train_codes.shape[1])])
    return np.stack(rows) if rows else np.zeros((0, len(varying)))


def top_two_gap(scores: np.ndarray) -> float:
    """The mean over columns of the largest minus the second largest entry.

    Raises:
        MetricError: ``scores`` has a single row (a one-dimensional code, whose gap disentanglement_lib's
            ``_compute_avg_diff_top_two`` cannot take either: it fails on the second row it looks for).
    """
    if scores.shape[0] < 2:
        raise MetricError(f"the SAP score is the gap between the two code dimensions that best predict each factor, "
                          f"so it needs a code of 2 dimensions or more, got {scores.shape[0]}; leave sap_score out "
                          f"for this model")
    top = np.sort(scores, axis=0)
    return float(np.mean(top[-1] - top[-2]))


def sap_score_from_codes(codes: Codes, factors: np.ndarray, rng: np.random.Generator, points: int = 10_000,
                         test_points: int = 5_000) -> float:
    """The SAP score of a table of codes.

    Args:
        codes: ``codes[indices] -> (n, D)``, one row per image.
        factors: ``(N, K)`` the images' factor classes.
        rng: the generator of the draws and the SVMs' seed.
        points, test_points: images drawn to train and to test the SVMs.
    """
    train = draw(codes, factors, rng, points)
    test = draw(codes, factors, rng, test_points)
    return top_two_gap(sap_matrix(*train, *test, random_state=sklearn_seed(rng)))


@metric_spec(needs=(FACTORS, TWO_DIMENSIONS), suite="disentanglement", quick=QUICK_FIT)
def sap_score(evaluation: Evaluation, points: Points = 10_000,
              test_points: Points = 5_000, seed: Seed = 0) -> float:
    """The SAP score of the mean codes of ``evaluation``'s model on its images (see the module docstring).

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``.
        points, test_points: training and test images (10,000 and 5,000).
        seed: seed of the draws and of the SVMs.
    """
    factors = require_factors(evaluation.dataset, "sap_score").numpy()
    return sap_score_from_codes(evaluation.codes, factors,
                                np.random.default_rng(seed), points, test_points)
