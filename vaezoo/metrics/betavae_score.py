"""The BetaVAE score (Higgins et al., 2017, "beta-VAE: Learning Basic Visual Concepts with a
Constrained Variational Framework", ICLR), as disentanglement_lib computes it (``beta_vae.py``,
config ``beta_vae_sklearn``: batch 64, 10,000 training and 5,000 evaluation points).

One point: pick a factor k uniformly; draw ``batch`` pairs of images, the two of a pair sharing
their value of k and otherwise independent; the point's features are the mean over the pairs of
|code(x1) - code(x2)| per code dimension, its label is k. A linear classifier (logistic
regression) learns k from the features of the training points; the score is its accuracy on
the evaluation points. A code that keeps each factor in its own dimensions scores 1; chance is
1 / K.

The classifier is scikit-learn's ``LogisticRegression`` as disentanglement_lib ran it (scikit-learn
0.20's defaults: liblinear, one-vs-rest, C = 1) on the unscaled features.

The score tells factors apart, so it needs a dataset of two factors or more, at least one of which takes two
values (with a single factor, or none that varies, every classifier scores 1 or chance whatever the code), and
training points that hold two factors fixed or more (``points`` 2 at least; one point, or an unlucky draw of a few,
gave the classifier a single class, and a score that looked measured).
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier

from vaezoo.errors import MetricError
from vaezoo.metrics.codes import check_table, finite_codes, require_factors
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import FACTORS
from vaezoo.metrics.spec import Count, Points, Seed, metric_spec
from vaezoo.metrics.sampling import Codes, FactorGroups, sklearn_seed

FEATURE_LIMIT = 1e30
"""The largest feature scikit-learn's liblinear fits (above it, it refuses: ``... results in a frozen fit``)."""


def betavae_features(codes: Codes, groups: FactorGroups, rng: np.random.Generator, points: int,
                     batch: int) -> tuple[np.ndarray, np.ndarray]:
    """``points`` labelled points of the BetaVAE score (see the module docstring).

    Returns:
        Features ``(points, D)`` and labels ``(points,)``, the factor each point held fixed.
    """
    labels = rng.integers(0, groups.num_factors, points)
    first = rng.integers(0, len(codes), (points, batch))
    second = groups.sharing(labels, first, rng)
    differences = np.abs(finite_codes(codes[first]) - finite_codes(codes[second]))
    features = differences.mean(1)
    if features.max(initial=0.0) > FEATURE_LIMIT:
        raise MetricError(f"the codes of a pair of images differ by {features.max():.3g} on average, beyond the "
                          f"{FEATURE_LIMIT:.0e} the BetaVAE score's classifier (liblinear) fits; the metric needs "
                          f"codes of smaller magnitude (check the model's encoder, or the codes given)")
    return features, labels


def betavae_score_from_codes(codes: Codes, factors: np.ndarray, rng: np.random.Generator, points: int = 10_000,
                             test_points: int = 5_000, batch: int = 64) -> float:
    """The BetaVAE score of a table of codes.

    Args:
        codes: ``codes[indices] -> (n, D)``, one row per image.
        factors: ``(N, K)`` the images' factor classes.
        rng: the generator of every draw.
        points, test_points: points the classifier is trained and evaluated on.
        batch: pairs of images averaged into one point.

    Returns:
        The evaluation accuracy, in [0, 1].

    Raises:
        MetricError: the dataset has a single factor, or none that takes two values, or the training points drawn
            hold a single factor fixed.
    """
    groups = FactorGroups(check_table(codes, factors))
    if groups.num_factors < 2:
        raise MetricError("the BetaVAE score tells which factor a point held fixed, so it needs a dataset of 2 "
                          "factors or more, got 1 (any code would score 1)")
    if not len(groups.varying):
        raise MetricError("no factor of the dataset takes two values, so there is none to hold fixed")
    train = betavae_features(codes, groups, rng, points, batch)
    if len(held := np.unique(train[1])) < 2:
        raise MetricError(f"the {points:,} training point(s) drawn all hold factor {held[0]} fixed, so the classifier "
                          f"has one class to learn; draw more (the metric's points setting)")
    test = betavae_features(codes, groups, rng, test_points, batch)
    classifier = OneVsRestClassifier(LogisticRegression(solver="liblinear", random_state=sklearn_seed(rng)))
    return float(classifier.fit(*train).score(*test))


@metric_spec(needs=(FACTORS,), suite="disentanglement")
def betavae_score(evaluation: Evaluation, points: Points = 10_000, test_points: Points = 5_000, batch: Count = 64,
                  seed: Seed = 0) -> float:
    """The BetaVAE score of the mean codes of ``evaluation``'s model on its images (see the module docstring).

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``.
        points, test_points: classifier training and evaluation points (10,000 and 5,000).
        batch: pairs of images per point (64).
        seed: seed of the draws and of the classifier.
    """
    factors = require_factors(evaluation.dataset, "betavae_score").numpy()
    return betavae_score_from_codes(evaluation.codes, factors,
                                    np.random.default_rng(seed), points, test_points, batch)
