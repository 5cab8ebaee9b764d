"""The protocol every regularizer follows.

A regularizer maps the posterior, the sampled code and the training step to
named loss terms (scalars). The step is always passed in explicitly, so a
schedule is a pure function of it and resumes exactly from a checkpoint's step.

A regularizer may also own *training parts*: networks trained beside the model, such as FactorVAE's
discriminator, with optimisers of their own (:class:`OptimizerGroup`) and an update step of their own
(:meth:`Regularizer.update`), run by the trainer after the model's step. They are kept out of the model's
``parameters()`` and ``state_dict()``, so published weights and a card's parameter count hold the model
alone; checkpoints hold them and their optimisers' states (:meth:`Regularizer.training_state_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

from torch import Tensor, nn

from vaezoo.errors import VaezooError

if TYPE_CHECKING:
    from vaezoo.latents.base import Posterior


@dataclass(frozen=True)
class OptimizerGroup:
    """An optimiser a regularizer asks for, over the parameters of one of its training parts.

    Attributes:
        part: the training part's name (as given to :meth:`Regularizer.add_training_part`).
        name: a ``torch.optim`` class (``"Adam"``, ``"AdamW"``, ``"SGD"``, ``"RMSprop"``).
        lr: its learning rate.
        options: its other keyword arguments (``betas``, ``eps``, ``weight_decay``, ...).
    """

    part: str
    name: str = "Adam"
    lr: float = 1e-4
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateBatch:
    """What the trainer hands :meth:`Regularizer.update` after the model's step.

    Attributes:
        z: the codes the model's step sampled, ``(batch, code_size)``, detached.
        second: codes sampled (without gradients) from a second batch of images drawn at random from the
            training set after the model's step, when the regularizer sets ``second_batch``; else None.
        step: the training step.
    """

    z: Tensor
    second: Tensor | None
    step: int


class Regularizer(nn.Module):
    """Base class. Subclasses implement :meth:`forward` and may override :meth:`targets`.

    Each sets the class attribute ``example``: the keyword arguments of
    :func:`vaezoo.testing.check_regularizer` for a small instance, that is its own
    arguments and, when the default Gaussian latent does not fit it, ``latent``: the
    spec of a family it does fit. vaezoo's registry-driven tests check every
    registered regularizer, a plugin's included, with it.

    A regularizer that needs the latent's size takes an argument ``code_size`` (or ``part_sizes``, each part's
    size by name) and is given it when the model is built, so a card never states it twice.

    A stateful regularizer (a network of its own trained beside the model) registers it with
    :meth:`add_training_part`, names its optimisers in :meth:`optimizers` and its losses in :meth:`update`; it
    sets ``second_batch`` when :meth:`update` needs codes of a second batch. A term of :meth:`forward` computed
    with a training part is returned in training mode only: a published model has no training parts, and its
    objective (``vaezoo eval``'s) is the model's alone.
    """

    example: ClassVar[dict[str, Any] | None] = None
    second_batch: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        # a plain dict, not submodules: kept out of the model's parameters() and state_dict()
        self.__dict__["_training_parts"] = {}

    def add_training_part(self, name: str, module: nn.Module) -> nn.Module:
        """Keep ``module`` as a training part called ``name``, trained by :meth:`update` with the optimisers of
        :meth:`optimizers`; it follows the model's device, dtype and train/eval mode, and reads as the attribute
        ``name`` (do not assign it to one: an attribute holding a module makes it part of the model). Returns
        ``module``."""
        self.training_parts()[name] = module
        return module

    def __getattr__(self, name: str) -> Any:
        parts = self.__dict__.get("_training_parts", {})
        return parts[name] if name in parts else super().__getattr__(name)

    def training_parts(self) -> dict[str, nn.Module]:
        """The training parts, by name (none for a plain regularizer)."""
        return self.__dict__.setdefault("_training_parts", {})

    def optimizers(self) -> list[OptimizerGroup]:
        """The optimisers of the training parts, one a part (default: ``Adam(1e-4)`` for each)."""
        return [OptimizerGroup(name) for name in self.training_parts()]

    def update(self, batch: UpdateBatch) -> dict[str, Tensor]:
        """The losses of the training parts after the model's step, named scalars, back-propagated into the
        training parts alone; they are left out of the objective, the loss display and the card."""
        if self.training_parts():
            raise NotImplementedError(f"{type(self).__name__} has training parts but no update()")
        return {}

    def training_state_dict(self) -> dict[str, dict[str, Tensor]]:
        """Each training part's ``state_dict()``, by name (what a checkpoint keeps of them)."""
        return {name: part.state_dict() for name, part in self.training_parts().items()}

    def load_training_state_dict(self, state: Mapping[str, Mapping[str, Tensor]]) -> None:
        """Load :meth:`training_state_dict`'s output back.

        Raises:
            KeyError: ``state`` lacks a training part.
        """
        for name, part in self.training_parts().items():
            part.load_state_dict(state[name])

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)
        for part in self.training_parts().values():
            part._apply(fn, *args, **kwargs)
        return self

    def train(self, mode: bool = True) -> Self:
        super().train(mode)
        for part in self.training_parts().values():
            part.train(mode)
        return self

    def forward(self, posterior: Posterior, z: Tensor, step: int) -> dict[str, Tensor]:
        """Named loss terms (scalars, already averaged over the batch)."""
        raise NotImplementedError

    def targets(self, posterior: Posterior, step: int) -> dict[str, float]:
        """Schedule values at ``step`` worth showing while training (e.g. capacities)."""
        return {}


def unregistered_parts(regularizer: Regularizer) -> str | None:
    """What is wrong with a regularizer that defines :meth:`~Regularizer.update` and holds parameters of its own but
    no training parts (a network assigned to an attribute, as in a plain ``nn.Module``): nothing would call its
    update, and the model's optimiser would train the network on the model's loss. None when that is not so."""
    if (regularizer.training_parts() or type(regularizer).update is Regularizer.update
            or next(regularizer.parameters(), None) is None):
        return None
    held = sorted({name.split(".")[0] for name, _ in regularizer.named_parameters()})
    return (f"it defines update() but has no training parts, and holds {', '.join(held)} as part of the model (trained "
            f"by the model's optimiser on the model's loss, and published with it); register each network it trains "
            f"in update() with self.add_training_part(name, module) instead of assigning it")


def check_weight(regularizer: str, name: str, value: float) -> float:
    """``value``, refused unless it is a finite number of at least 0, as a loss term's weight must be: a NaN or
    infinite weight makes the loss NaN at the first step, a negative one rewards what the term penalises.

    Raises:
        ValueError: naming the regularizer (as registered), the argument ``name`` and the value.
    """
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"regularizer '{regularizer}': {name} must be a finite number of at least 0, got {value}")
    return value


def select_part(posterior: Posterior, z: Tensor, part: str | None) -> tuple[Posterior, Tensor]:
    """The posterior (and code) of one part of a joint latent, or the whole thing when ``part`` is None."""
    if part is None:
        return posterior, z
    start = 0
    for name, p in posterior.parts.items():
        if name == part:
            return p, z[:, start : start + p.code_size]
        start += p.code_size
    raise VaezooError(f"the latent has no part '{part}'; its parts are {', '.join(posterior.parts)}")

