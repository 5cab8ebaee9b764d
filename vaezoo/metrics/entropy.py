"""Entropies of the aggregate posterior q(z) = (1/N) sum_n q(z|x_n), by the sampling estimator of Chen,
Li, Grosse & Duvenaud (2018), "Isolating Sources of Disentanglement in Variational Autoencoders"
(rtqichen/beta-tcvae, ``elbo_decomposition.py`` and ``disentanglement_metrics.py``).

Draw one code z ~ q(z|x_n) for each of ``samples`` images picked without replacement;
H(z_j) is the mean of -log q(z_j), where q(z_j) sums the Gaussian densities of all N
posteriors. H(z_j | v_k) is the mean of -log q(z_j | v_k), the sum running over the
images that share the sample's value of factor k. H(z) uses the full product density.

The reference code draws fresh samples for each value of each factor (10,000 each); here
the conditional entropies reuse the marginal's samples, so one pass over all (sample, image)
pairs serves every factor: the same estimand, with the marginal and conditional errors
correlated (which steadies their difference, the mutual information) and 1/5 of the work
on dSprites.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution, Normal

from vaezoo.data import ImageDataset
from vaezoo.devices import usable_device
from vaezoo.errors import MetricError, VaezooError
from vaezoo.metrics.codes import dataset_factors, has_density_matrix, require_posteriors
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.parallel import parallel_map
from vaezoo.metrics.requirements import DENSITY_MATRIX
from vaezoo.metrics.spec import Count, Seed, metric_spec

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
ROWS = 512  # images per block of work, at least (a block spans whole runs of the innermost factors)
# Below log(float32's smallest normal number), -87.34, torch's float32 exp takes a slow path (20-50 times slower)
# and gives a denormal or 0. Exponents are raised to this floor first: each term then adds at most 1.7e-38, which no
# sum changes by (every density sum holds its own posterior's term, the joint's the block's largest, 1).
EXP_FLOOR = -87.0


def chen_columns(dataset: ImageDataset) -> tuple[int, ...]:
    """The factor columns Chen et al.'s MIG conditions on: the ordered ones (they leave dSprites' shape, a
    nominal factor, out), as the dataset's ``nominal_factors`` says."""
    if dataset.factors is None:
        return ()
    names = dataset.factor_names or tuple(str(k) for k in range(np.shape(dataset.factors)[1]))
    return tuple(k for k, name in enumerate(names) if name not in dataset.nominal_factors)


@dataclass(frozen=True)
class Entropies:
    """Estimated entropies (nats) of the aggregate posterior.

    Attributes:
        marginal: ``(D,)`` H(z_j).
        conditional: ``(K, D)`` H(z_j | v_k), averaged over the images' values of factor k.
        joint: H(z).
        factor_sizes: ``(K,)`` the number of distinct values of each factor.
    """

    marginal: Tensor
    conditional: Tensor
    joint: float
    factor_sizes: Tensor

    @property
    def mutual_information(self) -> Tensor:
        """``(K, D)`` I(z_j; v_k) = H(z_j) - H(z_j | v_k)."""
        return self.marginal.unsqueeze(0) - self.conditional

    @property
    def total_correlation(self) -> float:
        """TC = KL(q(z) || prod_j q(z_j)) = sum_j H(z_j) - H(z)."""
        return float(self.marginal.sum()) - self.joint


def _grid_order(values: list[Tensor], sizes: list[int]) -> Tensor | None:
    """If every combination of factor values occurs equally often, the order that arranges the
    images as an array of shape ``(repeats, *sizes)`` in C order; else None."""
    if not values:
        return None
    key = torch.zeros_like(values[0])
    for inverse, size in zip(values, sizes):
        key = key * size + inverse
    counts = torch.bincount(key, minlength=math.prod(sizes))
    if counts.min() != counts.max():
        return None
    by_key = torch.argsort(key, stable=True)
    repeat = torch.empty_like(key)
    repeat[by_key] = torch.arange(len(key)) % int(counts[0])  # which occurrence of its combination
    return torch.argsort(repeat * math.prod(sizes) + key)


def estimate_entropies(mean: Tensor, logvar: Tensor, factors: Tensor | None = None, samples: int = 10_000,
                       seed: Seed = 0, block: int | None = None, use_grid: bool = True,
                       family: type[Distribution] = Normal, device=None) -> Entropies:
    """Estimate H(z_j), H(z_j | v_k) and H(z) for the mixture of N factorised posteriors.

    The posteriors are of one location-scale ``family`` (a ``torch.distributions`` class taking
    ``loc`` and ``scale``, such as ``Normal`` or ``Laplace``), as the latent protocol's ``location_scale()``
    gives them. Gaussian posteriors take a closed-form path; others evaluate ``family``'s standard density.

    Args:
        mean, logvar: ``(N, D)`` location and twice the log-scale of q(z|x_n) (for a Gaussian: its mean
            and log-variance).
        factors: ``(N, K)`` factor classes of the images (any integers), or None for no conditionals.
        samples: how many codes to draw (at most N; Chen et al. use 10,000).
        seed: seed of the draw.
        block: (image, code) pairs per block of work; default: 65,536 on a CPU (a core's cache), 16,777,216 on
            an accelerator (large operations).
        use_grid: when the factors form a complete grid (as dSprites' do), sum over each factor's
            values by reshaping rather than scattering, which is faster; same result.
        family: the posteriors' distribution class.
        device: where the density sums run (``"auto"`` too: :func:`vaezoo.devices.usable_device`; default the
            CPU, its blocks of codes shared out over torch's threads). The draw is made on the CPU whatever the
            device, so that the seed picks the same codes everywhere.

    Returns:
        The :class:`Entropies`.
    """
    mean, logvar = mean.double(), logvar.double()
    broken = ~(torch.isfinite(mean) & torch.isfinite(logvar)).all(1)
    if broken.any():  # the sums would be NaN, and every entropy and MIG with them
        raise MetricError(f"the posteriors of {int(broken.sum()):,} of the {len(broken):,} images hold NaN or "
                          f"infinite locations or scales; the entropies need finite ones (check the model's encoder, "
                          f"or the posteriors given)")
    n, dims = mean.shape
    factors = torch.zeros(n, 0, dtype=torch.long) if factors is None else factors
    columns = [torch.unique(factors[:, k], return_inverse=True) for k in range(factors.shape[1])]
    values = [inverse for _, inverse in columns]
    sizes = [len(unique) for unique, _ in columns]
    generator = torch.Generator().manual_seed(seed)
    picked = torch.randperm(n, generator=generator)[:samples]
    std = torch.exp(0.5 * logvar)
    gaussian = family is Normal
    if gaussian:
        z = mean[picked] + std[picked] * torch.randn(len(picked), dims, generator=generator, dtype=torch.float64)
    else:  # by the inverse CDF, so that the seeded generator decides the draw
        uniform = torch.rand(len(picked), dims, generator=generator, dtype=torch.float64).clamp_(1e-12, 1 - 1e-12)
        z = family(mean[picked], std[picked]).icdf(uniform)
        standard = family(torch.tensor(0.0), torch.tensor(1.0))
        peak = float(standard.log_prob(torch.tensor(0.0)))
    own = [inverse[picked] for inverse in values]
    device = torch.device(usable_device(device) or "cpu")
    on_cpu = device.type == "cpu"
    block = block or (1 << 16 if on_cpu else 1 << 24)

    grid = _grid_order(values, sizes) if use_grid else None
    if grid is not None:  # the posteriors in grid order: every factor's values sit in regular runs
        mean, std, values = mean[grid], std[grid], [inverse[grid] for inverse in values]
        # a block of rows spans the innermost factors whole (at least ROWS rows); the outer ones are constant in it
        inner = max([k for k in range(len(sizes)) if math.prod(sizes[k:]) >= ROWS], default=0)
        rows_per_block = math.prod(sizes[inner:])
    else:
        rows_per_block = ROWS
    # blocks of many images and few codes: each operation is large enough to outweigh its Python overhead,
    # and there are many blocks of codes for the threads to share
    codes_per_block = max(1, block // rows_per_block)

    # In float32, terms exp(log(s_min / s_n) - ((z - m_n) / (s_n sqrt 2))^2) <= 1 per dimension: the
    # largest density any posterior can have is factored out, so their sums cannot overflow. Their
    # exponents summed over dimensions give the joint density, summed with a running maximum.
    log_min_std = std.log().amin(0)
    offset = (log_min_std - std.log()).float()
    scale = (1 / (std * (math.sqrt(2) if gaussian else 1.0))).float()
    shift = (-mean * scale.double()).float()

    sums = torch.zeros(dims, len(picked), dtype=torch.float64, device=device)
    group_sums = [torch.zeros(dims, size, len(picked), dtype=torch.float64, device=device) for size in sizes]
    joint = torch.full((len(picked),), -math.inf, dtype=torch.float64, device=device)
    # dimension-major copies, so that each dimension's slice of a block is contiguous
    scale, shift, offset, z = (x.T.contiguous().to(device) for x in (scale, shift, offset, z.float()))
    inverses = [inverse.to(device) for inverse in values]
    if grid is not None:
        outer = range(inner)  # factors constant over a block of rows
        axes = {k: [a for a in range(len(sizes) - inner) if a != k - inner] for k in range(inner, len(sizes))}

    def code_block(s0: int) -> None:
        """Sum the densities of every posterior at the codes ``s0, ...``: their own columns of the sums."""
        codes = slice(s0, s0 + codes_per_block)
        width = len(range(*codes.indices(len(picked))))
        buffer = torch.empty(dims, rows_per_block, width, device=device)  # reused: no allocation per block of rows
        exponents = torch.empty(rows_per_block, width, device=device)
        # float32 within a block of codes, float64 across them
        block_sums, totals = torch.zeros(dims, width, device=device), torch.empty(dims, width, device=device)
        block_groups = [torch.zeros(dims, size, width, device=device) for size in sizes]
        block_joint = torch.full((width,), -math.inf, dtype=torch.float64, device=device)
        block_z = z[:, None, codes]
        for n0 in range(0, n, rows_per_block):
            rows = slice(n0, n0 + rows_per_block)
            height = len(range(*rows.indices(n)))
            w, exponent = buffer[:, :height], exponents[:height]
            # every dimension at once: w[j, n, s] = log q(z_sj | x_n) up to the dimension's constant
            torch.mul(scale[:, rows, None], block_z, out=w).add_(shift[:, rows, None])  # (addcmul broadcasts slowly)
            if gaussian:
                torch.addcmul(offset[:, rows, None], w, w, value=-1, out=w)
            else:  # log q - log(peak density of the narrowest posterior) <= 0, as in the Gaussian case
                torch.add(standard.log_prob(w), offset[:, rows, None] - peak, out=w)
            torch.sum(w, 0, out=exponent)
            w.clamp_(min=EXP_FLOOR).exp_()
            if grid is None:
                torch.sum(w, 1, out=totals)
                for groups, inverse in zip(block_groups, inverses):
                    groups.index_add_(1, inverse[rows], w)
            else:
                cube = w.view(dims, *sizes[inner:], width)
                torch.sum(w, 1, out=totals)
                for k, summed in axes.items():
                    block_groups[k] += cube.sum([a + 1 for a in summed]) if summed else cube
            block_sums += totals
            if grid is not None:
                for k in outer:
                    block_groups[k][:, int(values[k][n0])] += totals
            top = exponent.amax(0)
            rows_joint = exponent.sub_(top).clamp_(min=EXP_FLOOR).exp_().sum(0).log_().add_(top)
            block_joint = torch.logaddexp(block_joint, rows_joint.double())
        joint[codes] = block_joint
        sums[:, codes] += block_sums
        for k, groups in enumerate(block_groups):
            group_sums[k][:, :, codes] += groups

    starts = range(0, len(picked), codes_per_block)
    if on_cpu:
        parallel_map(code_block, starts)
    else:  # the device runs each block's operations in parallel
        for s0 in starts:
            code_block(s0)
    sums, joint, group_sums = sums.cpu(), joint.cpu(), [groups.cpu() for groups in group_sums]

    log_norm = log_min_std + (HALF_LOG_2PI if gaussian else -peak)  # per dimension: -log(peak density)
    marginal = -(sums.log() - log_norm[:, None] - math.log(n)).mean(1)
    conditional = torch.empty(len(values), dims, dtype=torch.float64)
    for k, inverse in enumerate(values):
        counts = torch.bincount(inverse, minlength=sizes[k]).double()
        log_q = group_sums[k][:, own[k], torch.arange(len(picked))].log() - log_norm[:, None] - counts[own[k]].log()
        conditional[k] = -log_q.mean(1)
    log_q_joint = joint - float(log_norm.sum()) - math.log(n)
    return Entropies(marginal, conditional, float(-log_q_joint.mean()), torch.tensor(sizes))


def estimate_entropies_from_posteriors(batches: Sequence[Mapping[str, Any]], factors: Tensor | None = None,
                                       samples: int = 10_000, seed: Seed = 0, chunk: int = 1024) -> Entropies:
    """:func:`estimate_entropies` for posteriors of any family, through the latent protocol only.

    One code is drawn from each picked image's posterior (``rsample()``, seeded) and the density of every
    image's posterior at it comes from ``log_density_matrix()``. The parts without one (a categorical) are left
    out, as :func:`estimate_entropies` leaves out the parts that are not location-scale.

    Args:
        batches: the posterior parts of each batch of the dataset, in order (``{part: Posterior}``).
        factors: ``(N, K)`` factor classes of the images, or None for no conditionals.
        samples: how many codes to draw (at most N).
        seed: seed of the draw.
        chunk: codes whose densities are summed at a time (bounds the memory: ``chunk x batch x D``).

    Returns:
        The :class:`Entropies`.

    Raises:
        VaezooError: no part has a ``log_density_matrix``.
    """
    names = [name for name, part in batches[0].items() if has_density_matrix(part)]
    if not names:
        raise VaezooError("the entropies need a latent part whose posterior has a log_density_matrix() "
                          "(docs/plugins.md)")
    with torch.random.fork_rng(devices=_devices(batches[0][names[0]].rsample())):
        torch.manual_seed(seed)
        codes = {name: torch.cat([batch[name].rsample() for batch in batches]) for name in names}
    n = len(codes[names[0]])
    factors = torch.zeros(n, 0, dtype=torch.long) if factors is None else factors
    values = [torch.unique(factors[:, k], return_inverse=True)[1] for k in range(factors.shape[1])]
    picked = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:samples]
    sums = []  # per chunk of codes: log sum_n q(z_s,j | x_n), the same per factor value, and the joint's
    for c0 in range(0, len(picked), chunk):
        rows = picked[c0:c0 + chunk]
        z = {name: codes[name][rows.to(codes[name].device)] for name in names}
        own = [inverse[rows] for inverse in values]
        marginal, joint = torch.tensor(-math.inf), torch.tensor(-math.inf)
        conditional = [torch.tensor(-math.inf)] * len(values)
        start = 0
        for batch in batches:
            w = torch.cat([batch[name].log_density_matrix(z[name]) for name in names], -1).double().cpu()
            images = slice(start, start + w.shape[1])
            start += w.shape[1]
            marginal = torch.logaddexp(marginal, torch.logsumexp(w, 1))
            joint = torch.logaddexp(joint, torch.logsumexp(w.sum(-1), 1))
            for k, inverse in enumerate(values):
                same = (own[k][:, None] == inverse[images][None, :]).unsqueeze(-1)
                conditional[k] = torch.logaddexp(conditional[k], torch.logsumexp(w.masked_fill(~same, -math.inf), 1))
        sums.append((marginal, conditional, joint, own))
    log_n = math.log(n)
    marginal = -(torch.cat([m for m, _, _, _ in sums]) - log_n).mean(0)
    conditional = torch.empty(len(values), marginal.shape[0], dtype=torch.float64)
    for k, inverse in enumerate(values):
        counts = torch.bincount(inverse).double()
        log_q = torch.cat([c[k] - counts[o[k]].log()[:, None] for _, c, _, o in sums])
        conditional[k] = -log_q.mean(0)
    joint = -(torch.cat([j for _, _, j, _ in sums]) - log_n).mean()
    sizes = [int(inverse.max()) + 1 for inverse in values]
    return Entropies(marginal, conditional, float(joint), torch.tensor(sizes))


def _devices(t: Tensor) -> list:
    return [t.device] if t.device.type == "cuda" else []


def dataset_entropies(evaluation: Evaluation, columns: tuple[int, ...], samples: int = 10_000,
                      seed: Seed = 0) -> Entropies:
    """:func:`estimate_entropies` of the posteriors of ``evaluation``'s model over its dataset, conditioning on
    factor ``columns``.

    Made once per evaluation and arguments: the metrics that need it (``mig_chen``, ``total_correlation``) share
    one encoding of the dataset and one estimate, and that pass gives the metrics that draw mean codes theirs.
    """
    def estimate() -> Entropies:
        factors = torch.as_tensor(evaluation.dataset.factors)[:, list(columns)] if columns else None
        encoding = evaluation.encoding()
        if encoding.batches:  # a part only log_density_matrix reaches: every part through it
            return estimate_entropies_from_posteriors(encoding.batches, factors, samples, seed)
        posteriors = require_posteriors(encoding)
        return estimate_entropies(posteriors.loc, 2 * posteriors.scale.log(), factors, samples, seed,
                                  family=posteriors.family, device=evaluation.device)

    return evaluation.shared(("entropies", columns, samples, seed), estimate)


@metric_spec(higher_is_better=False, needs=(DENSITY_MATRIX,), suite="disentanglement")
def total_correlation(evaluation: Evaluation, samples: Count = 10_000, seed: Seed = 0) -> float:
    """Total correlation (nats) of the aggregate posterior of the factorised (continuous) dimensions over the
    dataset; lower is better.

    The sampling estimate of KL(q(z) || prod_j q(z_j)) that Chen et al. report; it shares its
    work with ``mig_chen`` when both are computed on one evaluation.

    Args:
        evaluation: a VAE whose latent (or some of its parts) has a per-dimension density, on any images.
        samples: codes drawn for the estimate, at most (10,000; a dataset of fewer images gives one code of each,
            as :func:`~vaezoo.metrics.mig.mig_chen` says).
        seed: seed of that draw.
    """
    dataset_factors(evaluation.dataset, "total_correlation")  # factors it conditions on, if any, are a table
    columns = chen_columns(evaluation.dataset)
    return dataset_entropies(evaluation, columns, samples, seed).total_correlation
