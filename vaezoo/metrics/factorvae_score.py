"""The FactorVAE score (Kim & Mnih, 2018, "Disentangling by Factorising", ICML), as
disentanglement_lib computes it (``factor_vae.py``, config ``factor_vae_metric``: batch 64,
10,000 training and 5,000 evaluation votes, global variances from 10,000 images,
``prune_dims.threshold = 0.05``).

Each code dimension's variance over 10,000 random images is its global variance; a dimension
whose global standard deviation is below ``prune_std`` has collapsed and is left out (note:
disentanglement_lib compares the threshold with the standard deviation, not the variance). One
vote: pick a factor k uniformly and a value of it (that of a random image); draw ``batch``
images with that value; the active dimension with the smallest variance over the batch,
relative to its global variance, votes for k (a factor with a single value, which no batch can hold fixed apart
from the others, is left out, as SAP and DCI leave it out; a dataset with fewer than two factors that take two
values is refused, since every vote would name the one factor and any code score 1). The classifier maps each
dimension to the factor it got most training votes for; the score is the share of evaluation votes it classifies
right. Training votes that all hold one factor fixed (``points`` 2 at least; one vote, or an unlucky draw of a few)
are refused: the classifier would have one class, and a perfect code scored 0.33 to 0.67 on one vote.
A code that keeps each factor in its own dimensions scores 1. A code with no active dimension
scores 0.
"""

from __future__ import annotations

import math
from typing import Annotated

import annotated_types
import numpy as np

from vaezoo.errors import MetricError
from vaezoo.metrics.codes import check_table, finite_codes, require_factors
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import FACTORS
from vaezoo.metrics.spec import MAX_COUNT, Points, Seed, metric_spec
from vaezoo.metrics.sampling import Codes, FactorGroups


def factorvae_votes(codes: Codes, groups: FactorGroups, rng: np.random.Generator, points: int, batch: int,
                    global_variances: np.ndarray, active: np.ndarray) -> np.ndarray:
    """``points`` votes of the FactorVAE score (see the module docstring).

    Returns:
        ``(K, D)`` counts: how often dimension j had the smallest relative variance with factor k fixed.
    """
    varying = groups.varying  # a factor with a single value has no votes to give (as SAP and DCI leave it out)
    labels = varying[rng.integers(0, len(varying), points)]
    anchors = np.repeat(rng.integers(0, len(codes), (points, 1)), batch, axis=1)
    batches = finite_codes(codes[groups.sharing(labels, anchors, rng)])
    relative = batches[..., active].var(1, ddof=1) / global_variances[active]
    winners = np.flatnonzero(active)[relative.argmin(1)]
    votes = np.zeros((groups.num_factors, len(active)), dtype=np.int64)
    np.add.at(votes, (labels, winners), 1)
    return votes


def factorvae_score_from_codes(codes: Codes, factors: np.ndarray, rng: np.random.Generator, points: int = 10_000,
                               test_points: int = 5_000, batch: int = 64, variance_points: int = 10_000,
                               prune_std: float = 0.05) -> float:
    """The FactorVAE score of a table of codes.

    Args:
        codes: ``codes[indices] -> (n, D)``, one row per image.
        factors: ``(N, K)`` the images' factor classes.
        rng: the generator of every draw.
        points, test_points: training and evaluation votes.
        batch: images per vote.
        variance_points: images the global variances are estimated on.
        prune_std: dimensions whose global standard deviation is below this are left out.

    Returns:
        The evaluation accuracy of the majority-vote classifier, in [0, 1].

    Raises:
        MetricError: fewer than two factors take two values, or the training votes drawn all hold one factor fixed
            (every dimension's vote would name it, and any code score the share of that factor's test votes).
    """
    groups = FactorGroups(check_table(codes, factors))
    sample = finite_codes(codes[rng.integers(0, len(codes), variance_points)])
    global_variances = sample.var(0, ddof=1)
    active = np.sqrt(global_variances) >= prune_std
    if not len(groups.varying):
        raise MetricError("no factor of the dataset takes two values, so there is none to hold fixed")
    if len(groups.varying) < 2:
        raise MetricError(f"a single factor of the dataset ({groups.varying[0]}) takes two values, so every vote holds "
                          f"it fixed and any code scores 1; the FactorVAE score tells 2 or more such factors apart")
    if not active.any():
        return 0.0
    train = factorvae_votes(codes, groups, rng, points, batch, global_variances, active)
    if len(held := np.flatnonzero(train.sum(1))) < 2:  # every dimension would name that factor: ~1 / K, any code
        raise MetricError(f"the {points:,} training vote(s) drawn all hold factor {held[0]} fixed, so the classifier "
                          f"has one class to learn; draw more (the metric's points setting)")
    test = factorvae_votes(codes, groups, rng, test_points, batch, global_variances, active)
    classifier = train.argmax(0)  # per dimension, the factor it votes for most
    return float(test[classifier, np.arange(test.shape[1])].sum() / test.sum())


VarianceCount = Annotated[int, annotated_types.Interval(ge=2, le=MAX_COUNT)]
"""The type of ``batch`` and ``variance_points``: the images a variance is taken over, 2 or more; over one it is NaN
(variance_points=1 pruned every dimension and scored 0, batch=1 gave every vote to the first active dimension),
without a word."""


StandardDeviation = Annotated[float, annotated_types.Interval(ge=0, lt=math.inf)]
"""The type of ``prune_std``: a standard deviation, 0 (prune nothing) or more; NaN pruned every dimension and -1 none,
each scored without a word."""


@metric_spec(needs=(FACTORS,), suite="disentanglement")
def factorvae_score(evaluation: Evaluation, points: Points = 10_000, test_points: Points = 5_000,
                    batch: VarianceCount = 64, variance_points: VarianceCount = 10_000,
                    prune_std: StandardDeviation = 0.05, seed: Seed = 0) -> float:
    """The FactorVAE score of the mean codes of ``evaluation``'s model on its images (see the module docstring).

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``.
        points, test_points: training and evaluation votes (10,000 and 5,000).
        batch: images per vote (64).
        variance_points: images the global variances are estimated on (10,000).
        prune_std: global standard deviation below which a dimension counts as collapsed (0.05).
        seed: seed of the draws.
    """
    factors = require_factors(evaluation.dataset, "factorvae_score").numpy()
    return factorvae_score_from_codes(evaluation.codes, factors,
                                      np.random.default_rng(seed), points, test_points, batch, variance_points,
                                      prune_std)
