"""The collectives of a distributed (DDP) run: the processes' gradients averaged, and the rows of a batch from
every process for estimators of the whole batch.

Under ``torchrun`` each process holds its share of the recipe's batch. A loss term that is a mean over
examples needs nothing more: the processes' gradients are averaged (:func:`average_gradients`). A term that is
not (a total-correlation estimate, which sums densities over the whole batch; a capacity's ``|KL - C|`` of the
batch's mean KL) must be taken over the recipe's batch to train the recipe's objective, so its inputs are
gathered first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

import torch
import torch.distributed as dist
from torch import Tensor

from vaezoo.errors import TrainingError


def distributed() -> bool:
    """Whether this process is one of several of a distributed run."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def average_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """The gradients of ``params`` averaged over the processes, in place: one ``all_reduce`` for each dtype of
    them, as DDP averages them. A parameter without a gradient in any process is left out; one that has a gradient
    in some processes only (a branch one process's step took, a part another's left unused) is averaged with zeros
    for the processes without one, which then have that gradient too.

    Every process of the run calls it with the same parameters, in the same order (one model's, built alike).
    """
    params = list(params)
    if not params:  # a training part no optimiser steps: no collective (NCCL takes no CPU tensor)
        return
    world = dist.get_world_size()
    device = params[0].device
    # the processes agree first on which gradients there are: reduced as each has them, one process's flat tensor
    # would meet another's of other parameters (averaged silently) or of another size (gloo aborts)
    having = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=device)
    dist.all_reduce(having)
    for p, have in zip(params, having.tolist()):
        if have and p.grad is None:
            p.grad = torch.zeros_like(p)

    def average(flat: Tensor) -> None:
        dist.all_reduce(flat)
        flat /= world

    _flattened([p.grad for p in params if p.grad is not None], average)


def same_weights(module: torch.nn.Module) -> None:
    """``module``'s parameters and buffers made those of process 0 in every process, in place (as DDP starts).

    Raises:
        TrainingError: a process's module has other parameters or buffers than process 0's (by name, shape or
            dtype), as DDP refused it: a broadcast of other sizes aborted a process.
    """
    named = [*module.named_parameters(), *module.named_buffers()]
    mine = [f"{name} {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for name, t in named]
    told: list[list[str] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(told, mine)
    for rank, other in enumerate(told):
        if other != told[0]:
            first, then = next((a, b) for a, b in itertools.zip_longest(told[0], other) if a != b)
            raise TrainingError(f"process {rank} of this run builds another model than process 0 ({then or 'nothing'}"
                                f" where process 0 has {first or 'nothing'}); install the same versions of vaezoo "
                                f"and its plugins for every process")
    _from_process_0([t for _, t in named])


def same_buffers(module: torch.nn.Module) -> None:
    """``module``'s buffers made those of process 0 in every process, in place, as DDP does before each forward pass
    in training: state a part keeps in a buffer from the data it sees (a running mean) is process 0's in all."""
    _from_process_0(list(module.buffers()))


def _from_process_0(tensors: list[Tensor]) -> None:
    """``tensors`` set to process 0's, in place: one ``broadcast`` for each dtype and device of them."""
    with torch.no_grad():
        _flattened(tensors, lambda flat: dist.broadcast(flat, 0))


def _flattened(tensors: list[Tensor], collective: Callable[[Tensor], object]) -> None:
    """``collective`` applied in place to ``tensors``, as one flat tensor for each dtype and device of them (one
    message each, not one per tensor), the result copied back into them."""
    alike: dict[tuple[torch.dtype, torch.device], list[Tensor]] = {}
    for t in tensors:
        alike.setdefault((t.dtype, t.device), []).append(t)
    for same in alike.values():
        flat = torch.cat([t.reshape(-1) for t in same])
        collective(flat)
        for t, part in zip(same, flat.split([t.numel() for t in same])):
            t.copy_(part.view_as(t))


def gather_rows(t: Tensor) -> Tensor:
    """``t`` (equal shapes in every process) concatenated over the processes along its first dimension, in rank
    order; a single process gets ``t`` itself.

    Gradients reach each process's own rows: the gradient of the rows of process ``r`` is the sum of what every
    process's loss sends them, so that the average of the processes' gradients is the gradient of a term that
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
