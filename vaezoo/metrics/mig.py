"""The mutual information gap (MIG) in its two published variants.

For each ground-truth factor v_k, the gap between the two code dimensions with the
largest mutual information with v_k, normalised, averaged over factors:

- ``mig_chen`` (Chen, Li, Grosse & Duvenaud, 2018, "Isolating Sources of Disentanglement in
  Variational Autoencoders"): I(z_j; v_k) by the sampling estimator of
  :mod:`vaezoo.metrics.entropy` over the whole dataset, from the factorised (continuous) posteriors;
  normalised by ln |V_k|; nominal factors (the dataset says which: dSprites' shape) are left out, as in the reference
  code.
- ``mig_dlib`` (Locatello et al., 2019, "Challenging Common Assumptions in the Unsupervised
  Learning of Disentangled Representations", disentanglement_lib ``mig.py``): the mean code of
  10,000 random images, each dimension discretised into 20 equal-width bins, discrete mutual
  information with every factor, normalised by the factor's entropy.

The two differ in estimator, normalisation and factors, so their numbers are not comparable;
a card names which one it reports.
"""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy
from torch import Tensor

from vaezoo.errors import MetricError
from vaezoo.metrics.codes import check_table, finite_codes, require_factors
from vaezoo.metrics.entropy import Entropies, chen_columns, dataset_entropies, estimate_entropies
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import DENSITY_MATRIX, FACTORS
from vaezoo.metrics.sampling import varying_factors
from vaezoo.metrics.spec import Bins, Count, Points, Seed, metric_spec


def gaps(mutual_information: np.ndarray, normaliser: np.ndarray) -> np.ndarray:
    """Per factor: (largest - second largest mutual information over code dimensions) / normaliser.

    Args:
        mutual_information: ``(K, D)`` I(z_j; v_k).
        normaliser: ``(K,)``, e.g. H(v_k).
    """
    mi = np.asarray(mutual_information, dtype=np.float64)
    if mi.shape[1] < 2:  # one dimension: the runner-up holds no information
        mi = np.concatenate([mi, np.zeros_like(mi)], axis=1)
    top = -np.sort(-mi, axis=1)
    return (top[:, 0] - top[:, 1]) / np.asarray(normaliser, dtype=np.float64)


def chen_gaps(entropies: Entropies) -> np.ndarray:
    """Chen et al.'s per-factor gaps: mutual information clamped at 0, normalised by ln |V_k|.

    A factor with a single value (ln |V_k| = 0) has no gap to measure and scores 0, as in :func:`dlib_mig_gaps`.
    """
    mi = entropies.mutual_information.clamp(min=0).numpy()
    sizes = entropies.factor_sizes.double().numpy()
    constant = sizes < 2
    return np.where(constant, 0.0, gaps(mi, np.where(constant, 1.0, np.log(sizes))))


def chen_mig_gaps(mean: Tensor, logvar: Tensor, factors: Tensor, samples: int = 10_000, seed: Seed = 0) -> np.ndarray:
    """Chen et al.'s per-factor gaps from posterior parameters ``(N, D)`` and factor classes ``(N, K)``."""
    return chen_gaps(estimate_entropies(mean, logvar, factors, samples, seed))


def discretize(codes: np.ndarray, bins: int = 20) -> np.ndarray:
    """Each column of ``codes`` ``(n, D)`` as the index of its equal-width histogram bin (disentanglement_lib).

    Raises:
        MetricError: fewer than 2 bins (one holds every value, and every mutual information read from it is 0).
    """
    if bins < 2:
        raise MetricError(f"bins = {bins} puts every value of a dimension in one bin, so every mutual information "
                          f"is 0; give 2 or more (the metric's bins setting)")
    codes = finite_codes(codes)
    out = np.empty(codes.shape, dtype=np.int64)
    for j in range(codes.shape[1]):
        edges = np.histogram(codes[:, j], bins)[1]
        out[:, j] = np.digitize(codes[:, j], edges[:-1])
    return out


def discrete_mutual_information(a: np.ndarray, b: np.ndarray) -> float:
    """Mutual information (nats) of two discrete sequences from their contingency table."""
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    joint = np.bincount(a * (b.max() + 1) + b, minlength=(a.max() + 1) * (b.max() + 1))
    joint = joint.reshape(a.max() + 1, b.max() + 1) / len(a)
    independent = np.outer(joint.sum(1), joint.sum(0))
    ratio = np.divide(joint, independent, out=np.ones_like(joint), where=joint > 0)
    return max(float(xlogy(joint, ratio).sum()), 0.0)


def dlib_mig_gaps(codes: np.ndarray, factors: np.ndarray, bins: int = 20) -> np.ndarray:
    """disentanglement_lib's per-factor gaps from codes ``(n, D)`` and factor classes ``(n, K)``.

    A factor with a single value (zero entropy) has no gap to measure and scores 0.

    Raises:
        MetricError: no factor takes two values on the points (a mean of such zeros looked measured).
    """
    factors = check_table(codes, factors)
    varying_factors(factors, "point(s)", so="there is no gap to measure")
    binned = discretize(codes, bins)
    mi = np.array([[discrete_mutual_information(factors[:, k], binned[:, j]) for j in range(binned.shape[1])]
                   for k in range(factors.shape[1])])
    entropy = np.array([discrete_mutual_information(f, f) for f in factors.T])
    constant = entropy == 0
    return np.where(constant, 0.0, gaps(mi, np.where(constant, 1.0, entropy)))


@metric_spec(needs=(FACTORS, DENSITY_MATRIX), suite="disentanglement")
def mig_chen(evaluation: Evaluation, samples: Count = 10_000, seed: Seed = 0) -> float:
    """MIG as Chen et al. compute it, over the whole dataset (see the module docstring).

    Args:
        evaluation: a VAE whose latent (or some of its parts) has a per-dimension density (the latent protocol),
            on images with ground-truth ``factors``.
        samples: codes drawn for the entropy estimates, at most (10,000, as in the reference code, which draws
            ``randperm(N)[:samples]`` too): a dataset of fewer images gives one code of each, the same draw and the
            same value as ``samples`` = its size. A card records the setting, which measures the value again.
        seed: seed of that draw.

    Raises:
        MetricError: no factor it scores (the ordered ones) takes two values, so there is no gap to measure.
    """
    dataset = evaluation.dataset
    factors = require_factors(dataset, "mig_chen")
    columns = chen_columns(dataset)
    if not any((factors[:, k] != factors[0, k]).any() for k in columns):
        raise MetricError("no ordered factor of the dataset takes two values (Chen et al.'s MIG leaves nominal "
                          "factors out), so there is no gap to measure")
    entropies = dataset_entropies(evaluation, columns, samples, seed)
    return float(chen_gaps(entropies).mean())


@metric_spec(needs=(FACTORS,), suite="disentanglement")
def mig_dlib(evaluation: Evaluation, points: Points = 10_000, bins: Bins = 20, seed: Seed = 0) -> float:
    """MIG as disentanglement_lib computes it (see the module docstring).

    Args:
        evaluation: a VAE (its code is the posterior's mode) on images with ground-truth ``factors``; all of
            them are scored.
        points: images drawn (with replacement, as disentanglement_lib samples factors).
        bins: histogram bins per code dimension.
        seed: seed of the draw.
    """
    factors = require_factors(evaluation.dataset, "mig_dlib")
    indices = np.random.default_rng(seed).integers(0, len(factors), points)
    codes = evaluation.codes[indices]
    return float(dlib_mig_gaps(codes, factors[indices].numpy(), bins).mean())
