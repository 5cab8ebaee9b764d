"""A recipe's ``compile = true``: the training step's forward pass through ``torch.compile``, for one run
(:mod:`vaezoo.training.single`) and for an ensemble's stacked step (:mod:`vaezoo.training.ensemble`) alike.

The backward pass follows the compiled forward (AOTAutograd compiles both); the optimiser's step is not compiled.
The compiler is inductor in its default mode, which brings no CUDA graphs of its own, so an ensemble's compiled
step is still captured whole in the engine's graph on CUDA. Random numbers are drawn by torch's own operators
(``fallback_random``), from the global generators as without compile: a compiled run draws the same sampling
noise and differs only at float rounding. The step's number goes in as a tensor (:func:`step_tensor`), so that
one compiled graph serves every step (as a Python int each step's value would be compiled anew, up to
torch's limit of recompilations, and the rest run uncompiled).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from vaezoo.errors import TrainingError, first_line

__all__ = ["Compiled", "step_tensor"]


class Compiled:
    """``fn`` through ``torch.compile``, called as ``fn`` is.

    Raises:
        TrainingError: torch.compile is not available here (a Python version or platform it does not support),
            or, when called, cannot compile ``fn`` (naming the backend's error by its first line); both say to
            train without it.
    """

    def __init__(self, fn: Callable):
        try:
            self.fn = torch.compile(fn, options={"fallback_random": True})
        except RuntimeError as exc:  # torch.compile refuses Python versions and platforms it does not support
            raise TrainingError.about("the recipe asks for torch.compile, which is not available here ({problem}); "
                                      "train without it: {compile:False} (or compile = false in the card's [train])",
                                      problem=exc) from None

    def __call__(self, *args, **kwargs):
        try:
            return self.fn(*args, **kwargs)
        except torch._dynamo.exc.BackendCompilerFailed as exc:  # its own first line is only "backend=... raised:"
            cause = getattr(exc, "inner_exception", exc)
            said = first_line(cause)
            problem = f"{getattr(exc, 'backend_name', 'the backend')} raised {type(cause).__name__}" + (
                f": {said}" if said else "")
            raise TrainingError.about("torch.compile cannot compile the model here ({problem}); train without it: "
                                      "{compile:False} (or compile = false in the card's [train])",
                                      problem=problem) from None


def step_tensor(step: int, device: torch.device) -> Tensor:
    """``step`` as a 0-d float64 tensor on ``device``: how a compiled or a captured step takes its number (a
    regularizer's schedule computes from it in double precision, as from the int)."""
    return torch.full((), float(step), dtype=torch.float64, device=device)
