"""Encoding a dataset for the metrics: posterior parameters and mean codes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.distributions import Normal

from vaezoo.data import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.errors import VaezooError


@contextmanager
def _eval_mode(model) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def require_factors(dataset: ImageDataset, metric: str) -> Tensor:
    """The dataset's ``(N, K)`` factor classes; a clear error when it has none."""
    if dataset.factors is None:
        raise VaezooError(f"{metric} needs a dataset with ground-truth factors (e.g. dsprites)")
    return dataset.factors


def _gaussian_parts(posterior) -> list:
    """The parts whose posterior is a diagonal Gaussian (the entropy estimator's closed form is Gaussian)."""
    return [part for part in posterior.parts.values() if isinstance(part.distribution, Normal)]


def gaussian_posteriors(model, dataset: ImageDataset, device=None,
                        batch_size: int = EVAL_BATCH_SIZE) -> tuple[Tensor, Tensor]:
    """Mean and log-variance of the Gaussian dimensions of q(z|x) for every image.

    For a joint latent these are its Gaussian parts, side by side; categorical parts are left out.

    Returns:
        ``(mean, logvar)``, each ``(N, D)`` float32 on the CPU.
    """
    means, logvars = [], []
    with _eval_mode(model):
        for _, x in dataset.batches(batch_size, device):
            parts = _gaussian_parts(model.encode(x))
            if not parts:
                raise VaezooError("this metric needs a latent with a Gaussian part")
            means.append(torch.cat([p.distribution.loc for p in parts], -1).float().cpu())
            logvars.append(torch.cat([2 * p.distribution.scale.log() for p in parts], -1).float().cpu())
    return torch.cat(means), torch.cat(logvars)


def mean_codes(model, dataset: ImageDataset, indices: Tensor, device=None, batch_size: int = EVAL_BATCH_SIZE) -> Tensor:
    """The deterministic code (the posterior's mode: the mean, or a one-hot argmax) of the images at ``indices``.

    Returns:
        ``(len(indices), code_size)`` float32 on the CPU.
    """
    codes = []
    with _eval_mode(model):
        for start in range(0, len(indices), batch_size):
            x = dataset.batch(indices[start:start + batch_size], device)
            codes.append(model.encode(x).mode.float().cpu())
    return torch.cat(codes)
