"""Unsupervised scores of the mean representation, as disentanglement_lib computes them
(``unsupervised_metrics.py``, config ``unsupervised``: 10,000 points, 20-bin histograms). They
need no ground-truth factors: any dataset will do.

- ``gaussian_total_correlation``: the total correlation (nats) of a Gaussian with the codes'
  sample covariance C, KL(N(0, C) || N(0, diag C)) = (sum_j log C_jj - log det C) / 2. 0 for
  uncorrelated dimensions; it grows without bound as two dimensions become collinear. This is
  not the ``total_correlation`` metric, the sampling estimate of the aggregate posterior's TC
  (Chen et al., 2018; :mod:`vaezoo.metrics.entropy`). NaN when a dimension is constant (a zero
  variance, as a joint latent's one-hot columns give when every image takes one category), as
  disentanglement_lib's formula gives; infinite when dimensions are linearly dependent (a joint
  latent's one-hot columns sum to 1), where that formula returns the log of rounding noise.
- ``mutual_info_score``: each dimension discretised into 20 equal-width bins, the mutual
  information (nats, scikit-learn's ``mutual_info_score``) of every pair of distinct dimensions,
  averaged. 0 (up to the histogram's positive bias) for independent dimensions.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import mutual_info_score as discrete_mutual_info

from vaezoo.errors import MetricError
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.mig import discretize
from vaezoo.metrics.sampling import Codes, draw
from vaezoo.metrics.spec import Bins, Points, Seed, metric_spec


def gaussian_total_correlation_of(codes: np.ndarray) -> float:
    """The total correlation (nats) of a Gaussian with the sample covariance of ``codes`` ``(n, D)``: minus half
    the log determinant of their correlation matrix. NaN when a dimension is constant; infinite when the
    correlation matrix is singular to within the rounding of a covariance summed over ``n`` points.

    Raises:
        MetricError: no more codes than dimensions, whose covariance is singular whatever the code (one code has
            none: numpy's was NaN, and the eigenvalues failed; with 2 to D, the value was inf).
    """
    dims = codes.shape[1] if codes.ndim == 2 else 1
    if len(codes) <= dims:
        raise MetricError(f"the Gaussian total correlation of a {dims}-dimensional code needs the covariance of at "
                          f"least {dims + 1} points (fewer make it singular, the value inf), got {len(codes)}; draw "
                          f"more (the metric's points setting)")
    covariance = np.atleast_2d(np.cov(codes, rowvar=False))
    variances = np.diag(covariance)
    if np.any(variances == 0):
        return float("nan")
    eigenvalues = np.linalg.eigvalsh(covariance / np.sqrt(np.outer(variances, variances)))
    if eigenvalues[0] <= eigenvalues[-1] * len(codes) * np.finfo(float).eps:
        return float("inf")
    return float(-0.5 * np.sum(np.log(eigenvalues)))


def mean_pairwise_mutual_information(codes: np.ndarray, bins: int = 20) -> float:
    """The mutual information (nats) of the binned columns of ``codes`` ``(n, D)``, averaged over pairs (0 if D < 2).

    Raises:
        MetricError: fewer than 2 codes, whose every mutual information is 0 (the best score) whatever the code.
    """
    if len(codes) < 2:
        raise MetricError(f"the mutual information score needs at least 2 points, got {len(codes)} (one scored 0, "
                          f"the best, whatever the code); draw more (the metric's points setting)")
    binned = discretize(codes, bins)
    dims = binned.shape[1]
    pairs = [discrete_mutual_info(binned[:, i], binned[:, j]) for i in range(dims) for j in range(i + 1, dims)]
    return float(np.mean(pairs)) if pairs else 0.0


def gaussian_total_correlation_from_codes(codes: Codes, rng: np.random.Generator, points: int = 10_000) -> float:
    """:func:`gaussian_total_correlation_of` ``points`` codes drawn from a table of codes."""
    return gaussian_total_correlation_of(draw(codes, None, rng, points)[0])


def mutual_info_score_from_codes(codes: Codes, rng: np.random.Generator, points: int = 10_000,
                                 bins: int = 20) -> float:
    """:func:`mean_pairwise_mutual_information` of ``points`` codes drawn from a table of codes."""
    return mean_pairwise_mutual_information(draw(codes, None, rng, points)[0], bins)


@metric_spec(higher_is_better=False, suite="disentanglement",
             not_finite="NaN when a dimension of the mean code is constant over the points drawn (its correlation "
                        "with the others is undefined), inf when the code's correlation matrix is singular (a "
                        "dimension a linear function of others, as a joint latent's one-hot columns, which sum to 1)")
def gaussian_total_correlation(evaluation: Evaluation, points: Points = 10_000, seed: Seed = 0) -> float:
    """The Gaussian total correlation of the mean codes of ``evaluation``'s model on its images (see the module
    docstring); lower is better.

    Args:
        evaluation: a VAE (its code is the posterior's mode) on any images.
        points: images drawn (10,000), more than the code has dimensions.
        seed: seed of the draw.
    """
    return gaussian_total_correlation_from_codes(evaluation.codes, np.random.default_rng(seed), points)


@metric_spec(higher_is_better=False, suite="disentanglement")
def mutual_info_score(evaluation: Evaluation, points: Points = 10_000, bins: Bins = 20, seed: Seed = 0) -> float:
    """The mean mutual information between the dimensions of the mean codes of ``evaluation``'s model (see the
    module docstring); lower is better.

    Args:
        evaluation: a VAE (its code is the posterior's mode) on any images.
        points: images drawn (10,000).
        bins: histogram bins per code dimension (20).
        seed: seed of the draw.
    """
    return mutual_info_score_from_codes(evaluation.codes, np.random.default_rng(seed), points, bins)
