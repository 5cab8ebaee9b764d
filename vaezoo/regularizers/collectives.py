"""The rows of a batch from every process of a distributed (DDP) run, for estimators of the whole batch.

Under ``torchrun`` each process holds its share of the recipe's batch. A loss term that is a mean over
examples needs nothing more: DDP averages the gradients. A term that is not (a total-correlation estimate,
which sums densities over the whole batch; a capacity's ``|KL - C|`` of the batch's mean KL) must be taken
over the recipe's batch to train the recipe's objective, so its inputs are gathered first.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor


def distributed() -> bool:
    """Whether this process is one of several of a distributed run."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_rows(t: Tensor) -> Tensor:
    """``t`` (equal shapes in every process) concatenated over the processes along its first dimension, in rank
    order; a single process gets ``t`` itself.

    Gradients reach each process's own rows: the gradient of the rows of process ``r`` is the sum of what every
    process's loss sends them, so that DDP's average of the processes' gradients is the gradient of a term that
    every process computes alike from the gathered rows.
    """
    return _GatherRows.apply(t) if distributed() else t


class _GatherRows(torch.autograd.Function):
    # an all_reduce in the backward works on every backend (gloo has no reduce_scatter)
    @staticmethod
    def forward(ctx, t: Tensor) -> Tensor:
        t = t.contiguous()
        parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t)
        ctx.rows, ctx.rank = t.shape[0], dist.get_rank()
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad[ctx.rank * ctx.rows:(ctx.rank + 1) * ctx.rows]
