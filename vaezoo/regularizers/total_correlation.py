"""Total-correlation decomposition of the KL (Chen, Li, Grosse & Duvenaud, 2018, "Isolating Sources of
Disentanglement in Variational Autoencoders").

KL = index-code MI + total correlation + dimension-wise KL; the aggregate
posterior q(z) is estimated on the minibatch by minibatch-weighted sampling
("mws") or minibatch-stratified sampling ("mss") over a dataset of size N.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from vaezoo.errors import InputError, LatentError
from vaezoo.regularizers.base import Regularizer, check_weight, select_part
from vaezoo.regularizers.collectives import gather_rows


def log_importance_weights(batch_size: int, dataset_size: int, device=None, dtype: torch.dtype | None = None) -> Tensor:
    """The (batch, batch) log-weights of minibatch-stratified sampling (Chen et al., appendix C.2).

    Row ``i`` weighs the posteriors that estimate q(z_i): ``1/N`` on its own example, ``(N - M) / (N M)``
    on the next one (``(i + 1) mod B``) and ``1/M`` on the other ``M - 1``, with ``M = B - 1``; each row
    sums to 1. (The reference code strides the matrix by ``B`` instead of ``B + 1``, which puts these
    weights on columns 0 and 1 rather than on the diagonals; rtqichen/beta-tcvae pull request 1.)

    Args:
        batch_size: B, at least 2.
        dataset_size: N, the number of training examples.
        device: where to make them (they are made there, so a captured CUDA graph can hold them).
        dtype: their floating-point type (default: torch's default).
    """
    if batch_size < 2:
        raise ValueError(f"minibatch-stratified sampling needs a batch of at least 2, got {batch_size}")
    n, m = dataset_size, batch_size - 1
    w = torch.full((batch_size, batch_size), 1 / m, dtype=dtype, device=device)
    w.diagonal().fill_(1 / n)
    w.diagonal(1).fill_((n - m) / (n * m))
    w[-1, 0].fill_((n - m) / (n * m))  # the last row's next example is the first
    return w.log()


def decompose_kl(log_qz_matrix: Tensor, log_qz_x: Tensor, log_pz: Tensor, dataset_size: int, sampling: str):
    """Estimate (MI, TC, dimension-wise KL), each averaged over the batch.

    Args:
        log_qz_matrix: log q(z_i | x_j) per dimension, shape (B, B, D).
        log_qz_x: log q(z_i | x_i) per dimension, shape (B, D).
        log_pz: log p(z_i) per dimension, shape (B, D).
        dataset_size: N, the number of training examples.
        sampling: "mss" or "mws". MWS (Chen et al.'s first estimator) weighs each posterior by 1/(N M), so
            its weights sum to 1/N, not 1: each log q(z) it gives is between log M and log N too low, by an
            amount that depends on how the posteriors overlap. Its three terms still add up to the KL, but are
            not estimates of the MI, the TC and the dimension-wise KL one by one; MSS's are.
    """
    # at least float32: bfloat16 holds a log-density near 100 nats to steps of 0.5
    dtype = torch.promote_types(log_qz_matrix.dtype, torch.float32)
    log_qz_matrix, log_qz_x, log_pz = log_qz_matrix.to(dtype), log_qz_x.to(dtype), log_pz.to(dtype)
    batch, device = log_qz_matrix.shape[0], log_qz_matrix.device
    if sampling == "mws":
        log_w = torch.full((batch, batch), -math.log(batch * dataset_size), dtype=dtype, device=device)
    elif sampling == "mss":
        log_w = log_importance_weights(batch, dataset_size, device, dtype)
    else:
        raise ValueError(f"sampling must be 'mws' or 'mss', got {sampling!r}")
    log_qz = torch.logsumexp(log_w + log_qz_matrix.sum(2), dim=1)
    log_prod_qzi = torch.logsumexp(log_w.unsqueeze(2) + log_qz_matrix, dim=1).sum(1)
    log_qz_x, log_pz = log_qz_x.sum(1), log_pz.sum(1)
    return (log_qz_x - log_qz).mean(), (log_qz - log_prod_qzi).mean(), (log_prod_qzi - log_pz).mean()


class TotalCorrelation(Regularizer):
    """``alpha * MI + beta * TC + gamma * dimension-wise KL`` on a latent (or part) with a per-dimension density.

    It uses only the latent protocol's ``log_density_matrix`` and ``prior_log_prob``, so it applies to any
    factorised family (Gaussian, or a plugin's, such as a Laplace latent).

    Args:
        dataset_size: N, the size of the training set.
        alpha, beta, gamma: weights of the index-code MI, the TC and the dimension-wise KL (finite, at least 0).
        sampling: "mws" (minibatch-weighted) or "mss" (minibatch-stratified).
        part: apply to this part of a joint latent only (default: the whole latent).
    """

    example = {"dataset_size": 100, "sampling": "mss", "part": "cont",
               "latent": {"type": "joint", "parts": [{"type": "gaussian", "name": "cont", "dim": 2},
                                                     {"type": "gumbel_categorical", "name": "cat", "categories": 3}]}}

    def __init__(self, dataset_size: int, alpha: float = 1.0, beta: float = 6.0, gamma: float = 1.0,
                 sampling: str = "mws", part: str | None = None):
        super().__init__()
        if sampling not in ("mws", "mss"):
            raise ValueError(f"sampling must be 'mws' or 'mss', got {sampling!r}")
        if dataset_size < 2:
            raise ValueError(f"dataset_size must be at least 2, got {dataset_size}")
        self.dataset_size, self.sampling, self.part = dataset_size, sampling, part
        self.alpha = check_weight("total_correlation", "alpha", alpha)
        self.beta = check_weight("total_correlation", "beta", beta)
        self.gamma = check_weight("total_correlation", "gamma", gamma)

    def forward(self, posterior, z, step) -> dict[str, Tensor]:
        posterior, z = select_part(posterior, z, self.part)
        codes = gather_rows(z) if self.training else z  # under DDP, the codes of the recipe's whole batch
        if self.sampling == "mss" and len(codes) < 2:
            raise InputError(f"regularizer 'total_correlation' estimates q(z) by minibatch-stratified sampling, "
                             f"which needs batches of at least 2 images, got {len(codes)}: pass 2 or more "
                             f"(encode() and reconstruct() take one)")
        try:
            matrix, log_pz = posterior.log_density_matrix(codes), posterior.prior_log_prob(z)
        except NotImplementedError as exc:
            raise LatentError(f"regularizer 'total_correlation' needs densities of the latent{self._of_part}: {exc}; "
                              f"or give it a part that has them with 'part'") from None
        if codes is not z:  # every code against every process's posteriors
            matrix, log_pz = gather_rows(matrix.transpose(0, 1)).transpose(0, 1), gather_rows(log_pz)
        log_qz_x = torch.diagonal(matrix, dim1=0, dim2=1).T
        mi, tc, dwkl = decompose_kl(matrix, log_qz_x, log_pz, self.dataset_size, self.sampling)
        suffix = f"_{self.part}" if self.part else ""  # as beta's kl_PART: one such regularizer a part
        return {f"mi{suffix}": self.alpha * mi, f"tc{suffix}": self.beta * tc, f"dwkl{suffix}": self.gamma * dwkl}

    @property
    def _of_part(self) -> str:
        return "" if self.part is None else f" part '{self.part}'"

    def extra_repr(self) -> str:
        return (f"alpha={self.alpha}, beta={self.beta}, gamma={self.gamma}, sampling={self.sampling}, "
                f"dataset_size={self.dataset_size}, part={self.part}")
