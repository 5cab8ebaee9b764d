"""The training parts of a model's regularizers (FactorVAE's discriminator): their optimisers, their update step
after the model's, and their state in a checkpoint.

A regularizer declares them (:class:`vaezoo.regularizers.base.Regularizer`): the parts, one
:class:`~vaezoo.regularizers.base.OptimizerGroup` a part, and :meth:`~vaezoo.regularizers.base.Regularizer.update`.
After each step of the model, :meth:`TrainingParts.step` draws a second batch where a regularizer asks for one
(at random from the training set, from the run's own random streams, so that a resumed run draws the same), runs
each regularizer's update, back-propagates its losses into its own parts and steps their optimisers. Under DDP
their gradients are averaged over the processes, as the model's are. A stacked ensemble
(:class:`vaezoo.training.ensemble.Stack`) gives the optimisers its members' parts stacked, and draws each member's
second batch (:meth:`TrainingParts.second_images`) from the member's own streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from vaezoo.data import ImageDataset
from vaezoo.errors import PluginError
from vaezoo.model import VAE, VAEOutput
from vaezoo.regularizers.base import Regularizer, UpdateBatch
from vaezoo.regularizers.collectives import average_gradients, distributed
from vaezoo.store.weights import load_weights
from vaezoo.training.loop import optimizer_step

__all__ = ["TrainingParts"]


class TrainingParts:
    """The regularizers' training parts of ``model`` and one optimiser for each, as the regularizers ask.

    Args:
        model: the model; its training parts are already on its device.
        parameters: what each part's optimiser steps, by the part's place in the model
            (``regularizers.0.discriminator``), in the order of the part's ``parameters()``; default: the part's own
            parameters (a stacked ensemble gives the members' parameters stacked).

    Raises:
        PluginError: a regularizer names an optimiser of a part it does not have, a ``torch.optim`` class
            that does not exist, or settings its optimiser refuses (a negative learning rate, a beta of 2).
    """

    def __init__(self, model: VAE, parameters: Mapping[str, list[Tensor]] | None = None):
        self.regularizers = [(i, r) for i, r in enumerate(model.regularizers) if r.training_parts()]
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.named: dict[str, str] = {}
        self.where = {i: f"regularizer {type(r).__name__} (regularizers.{i}, {type(r).__module__})"
                      for i, r in self.regularizers}
        for i, regularizer in self.regularizers:
            parts = regularizer.training_parts()
            for group in regularizer.optimizers():
                where = self.where[i]
                if group.part not in parts:
                    raise PluginError(f"{where}: its optimiser is of part '{group.part}', which it does not have; "
                                      f"its training parts are {', '.join(parts)}")
                optimizer = getattr(torch.optim, group.name, None)
                if not (isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer)):
                    raise PluginError(f"{where}: its optimiser '{group.name}' is not a torch.optim optimiser")
                name = f"regularizers.{i}.{group.part}"
                tensors = parts[group.part].parameters() if parameters is None else parameters[name]
                self.named[name] = f"{where}: its optimiser {group.name} of part '{group.part}'"
                try:
                    self.optimizers[name] = optimizer(tensors, lr=group.lr, **dict(group.options))
                except (TypeError, ValueError) as exc:  # torch.optim refuses a learning rate, a beta, an option
                    raise PluginError(f"{where}: its optimiser {group.name} of part '{group.part}' refuses its "
                                      f"settings (lr {group.lr}, options {dict(group.options)}: {exc}); check "
                                      f"the regularizer's settings on the card") from None

    def __bool__(self) -> bool:
        return bool(self.regularizers)

    @property
    def second_batch(self) -> bool:
        """Whether a regularizer asks for a second batch of images each step (FactorVAE's permuted codes)."""
        return any(r.second_batch for _, r in self.regularizers)

    def step(self, model: VAE, out: VAEOutput, step: int, second: Tensor | None = None) -> dict[str, Tensor]:
        """Train the parts one step after the model's step ``step``, whose forward pass was ``out``.

        In a training loop of your own, call it after the model's optimiser step, with ``second``, a batch drawn
        at random from the training images, where :attr:`second_batch` says a regularizer asks for one.

        Returns:
            Their losses, detached (for a display; never part of the objective).

        Raises:
            ValueError: :attr:`second_batch` and no ``second`` batch given.
        """
        if second is None and self.second_batch:
            names = ", ".join(type(r).__name__ for _, r in self.regularizers if r.second_batch)
            raise ValueError(f"{names} asks for a second batch of images each step: give step(..., second=IMAGES), "
                             f"a batch drawn at random from the training images")
        batch = UpdateBatch(out.z.detach(), self.codes(model, second), step)
        shown = {}
        for i, regularizer in self.regularizers:
            mine = {name: o for name, o in self.optimizers.items() if name.startswith(f"regularizers.{i}.")}
            losses = self.losses(i, regularizer, batch)
            for o in mine.values():
                o.zero_grad(set_to_none=True)  # the model's loss reached them too (a term computed with a part)
            if losses:
                sum(losses.values()).backward()
            if distributed():  # in every process, as the others may have losses where this one has none
                average_gradients(p for o in mine.values() for group in o.param_groups for p in group["params"])
            for name, o in mine.items():
                optimizer_step(o, self.named[name])
            shown.update({name: value.detach() for name, value in losses.items()})
        return shown

    def losses(self, index: int, regularizer: Regularizer, batch: UpdateBatch) -> Mapping[str, Tensor]:
        """``regularizer.update(batch)`` (the regularizer at ``index`` of the model), refused unless it is a dict of
        named scalar tensors: anything else would reach the backward pass and stop training with torch's traceback.

        Raises:
            PluginError: naming the regularizer, its module and what its update returned.
        """
        losses = regularizer.update(batch)
        if not isinstance(losses, Mapping):
            raise PluginError(f"{self.where[index]}: update() returned a {type(losses).__name__}, not a dict of "
                              f"named scalar losses of its training parts; fix its update()")
        for name, value in losses.items():
            if not (isinstance(value, Tensor) and value.dim() == 0):
                said = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, Tensor) else (
                    f"a {type(value).__name__}")
                raise PluginError(f"{self.where[index]}: update()'s loss '{name}' is {said}, not a scalar tensor "
                                  f"of its training parts; fix its update()")
        return losses

    def second_images(self, store: ImageDataset, batch_size: int) -> Tensor | None:
        """The images of the step's second batch, ``batch_size`` drawn at random from ``store`` (on the global
        generators, as :meth:`~vaezoo.data.ImageDataset.draw_pixels` draws its pixels), or None when no regularizer
        asks for one (``second_batch``)."""
        if not self.second_batch:
            return None
        index = torch.randint(len(store), (batch_size,), device=store.images.device)
        return store.draw_pixels(store.batch(index))

    @staticmethod
    def codes(model: VAE, images: Tensor | None) -> Tensor | None:
        """Codes sampled from ``model``'s posterior of ``images`` (the second batch), without gradients; None for
        None."""
        if images is None:
            return None
        with torch.no_grad():
            return model.encode(images, checked=True).rsample()

    def state_dict(self, optimizers: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What a checkpoint keeps: each part's weights and each optimiser's state, by their place in the model;
        ``optimizers``, where given, in place of the optimisers' own states (a stacked ensemble's member's, sliced
        out of the stacked optimisers)."""
        return {"parts": {f"regularizers.{i}.{name}": part for i, r in self.regularizers
                          for name, part in r.training_state_dict().items()},
                "optimizers": dict(optimizers) if optimizers is not None else {
                    name: o.state_dict() for name, o in self.optimizers.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`state_dict`'s output back.

        Raises:
            KeyError, ValueError, RuntimeError: ``state`` is not of these parts (a part or optimiser missing or one
                more).
            WeightsError: a part's tensors are not its own (names, shapes) or values it cannot take (NaN, inf),
                naming them (:func:`vaezoo.store.weights.load_weights`).
        """
        parts = {f"regularizers.{i}.{name}" for i, r in self.regularizers for name in r.training_parts()}
        others = sorted(set(state["parts"]) - parts) + sorted(set(state["optimizers"]) - set(self.optimizers))
        if others:  # the state of another card's regularizers: loading the rest would resume a run it is not
            raise ValueError(f"it holds {', '.join(others)}, which this card's regularizers have not")
        for i, regularizer in self.regularizers:  # each part checked as a model's weights are: names, shapes, values
            for name, part in regularizer.training_parts().items():
                load_weights(part, state["parts"][f"regularizers.{i}.{name}"], f"training part '{name}'")
        for name, optimizer in self.optimizers.items():
            optimizer.load_state_dict(state["optimizers"][name])

