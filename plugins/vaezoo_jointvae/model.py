"""The JointVAE model: conv nets, a continuous + categorical latent, capacity on each part."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from vaezoo.assemble import card_dataset
from vaezoo.context import BuildContext
from vaezoo.errors import VaezooError
from vaezoo.model import VAE, build_vae
from vaezoo.version import __version__
from vaezoo_jointvae.labels import labels_command
from vaezoo_jointvae.metrics import matching_of
from vaezoo_jointvae.sections import LabelMatching, Labels, card_labels


class JointVAE(VAE):
    """A VAE whose latent joins a Gaussian part (``continuous``) and categorical parts (``discrete0``, ...)."""

    @property
    def discrete_parts(self) -> list[str]:
        """Names of the categorical parts, in order."""
        return [name for name in self.part_slices if name.startswith("discrete")]

    def category_probs(self, x: Tensor) -> dict[str, Tensor]:
        """Each categorical part's category probabilities, differentiable with respect to ``x`` and the weights (as
        :meth:`encode` is: an attribution map or an adversarial image needs their gradient); call it under
        ``torch.no_grad()`` to keep no graph.

        Args:
            x: images ``(B, C, H, W)`` in [0, 1] (see :meth:`preprocess`).

        Returns:
            ``{part: (B, k)}``.
        """
        parts = self.encode(x).parts
        return {name: parts[name].probs for name in self.discrete_parts}

    @torch.no_grad()
    def predict_category(self, x: Tensor) -> Tensor:
        """The argmax category of each categorical part: a cluster id, not a label (see :meth:`predict_label`).

        Args:
            x: images ``(B, C, H, W)`` in [0, 1] (see :meth:`preprocess`).

        Returns:
            ``(B, number of categorical parts)`` int64.
        """
        parts = self.encode(x).parts
        return torch.stack([parts[name].logits.argmax(-1) for name in self.discrete_parts], dim=-1)

    def card_sections(self, card, ref: str, data_root=None, device=None) -> dict:
        """``[labels]``: the first categorical part's category -> label matching on the test split, as
        ``python -m vaezoo_jointvae.labels`` measures it; none when the dataset has no labels."""
        dataset = card_dataset(card, data_root, "test")
        if dataset.labels is None or not self.discrete_parts:
            return {}
        part, matching, _ = matching_of(self, dataset, device)
        return {"labels": Labels({part: LabelMatching(category_to_label=matching.tolist(), split="test",
                                                      command=labels_command(ref, data_root),
                                                      vaezoo_version=__version__)})}

    @torch.no_grad()
    def predict_label(self, x: Tensor, part: str | None = None) -> Tensor:
        """The dataset label of each image (a digit for MNIST): its category, mapped by the card's matching.

        The matching is the card's ``[labels.PART]``, measured on the test split by ``python -m
        vaezoo_jointvae.labels``; on that split these labels are as accurate as the card's ``cluster_accuracy``.

        Args:
            x: images ``(B, C, H, W)`` in [0, 1] (see :meth:`preprocess`).
            part: the categorical part; default the first (the one ``cluster_accuracy`` scores).

        Returns:
            ``(B,)`` int64 labels; -1 for a category the matching gave no label.

        Raises:
            VaezooError: the card stores no matching for the part, one of another size, or one that gives a label
                to several categories (a hand edit: the matching is one-to-one).
        """
        part = (self.discrete_parts or [None])[0] if part is None else part  # 0 or '' is no part's name
        if part not in self.discrete_parts:
            raise VaezooError(f"{part!r} is not a categorical part of this model; its categorical parts are "
                              f"{', '.join(self.discrete_parts) or 'none'}")
        matching = card_labels(self.card).get(part) if self.card is not None else None
        name = f"card '{self.card.name}'" if self.card is not None else "this model (built without a card)"
        if matching is None:
            raise VaezooError(f"{name} stores no category -> label matching for '{part}'; measure and write it with "
                              f"'python -m vaezoo_jointvae.labels CARD --data-root DIR --write'")
        categories = self.part_slices[part].stop - self.part_slices[part].start
        if len(matching.category_to_label) != categories:
            raise VaezooError(f"{name}: [labels.{part}] maps {len(matching.category_to_label)} categories but the "
                              f"part has {categories}; measure it again with 'python -m vaezoo_jointvae.labels'")
        labels = matching.category_to_label
        if repeated := sorted({label for label in labels if label >= 0 and labels.count(label) > 1}):
            raise VaezooError(f"{name}: [labels.{part}] gives labels {repeated} to several categories, where the "
                              f"matching gives each label to one category; measure it again with 'python -m "
                              f"vaezoo_jointvae.labels'")
        table = torch.tensor(matching.category_to_label, device=self.head.weight.device)
        return table[self.encode(x).parts[part].logits.argmax(-1)]


def build_jointvae(context: BuildContext, image_size: int, channels: int, continuous: int, discrete: Sequence[int],
                   temperature: float = 0.67, capacity: dict[str, Sequence[float]] | None = None,
                   hidden: int = 256) -> JointVAE:
    """Build a JointVAE.

    Args:
        context: builds the parts (given by vaezoo's assembly).
        image_size: 32 or 64 (any power of two >= 16).
        channels: image channels.
        continuous: number of Gaussian dimensions (0 for none).
        discrete: the category count of each categorical part, e.g. ``[10]``.
        temperature: Gumbel-softmax temperature.
        capacity: ``{"continuous": [min, max, iterations, gamma], "discrete": [...]}``; the discrete
            capacity applies to the sum of the categorical KLs and is capped at the sum of their log k.
        hidden: width of the hidden linear layer of encoder and decoder.
    """
    if continuous < 0:
        raise ValueError(f"continuous is a number of Gaussian dimensions, at least 0, got {continuous}")
    if continuous == 0 and not discrete:
        raise ValueError("a JointVAE needs continuous > 0 or at least one discrete part")
    parts = [{"type": "gaussian", "name": "continuous", "dim": continuous}] if continuous else []
    parts += [{"type": "gumbel_categorical", "name": f"discrete{i}", "categories": k, "temperature": temperature}
              for i, k in enumerate(discrete)]
    groups = {"continuous": [p["name"] for p in parts if p["type"] == "gaussian"],
              "discrete": [p["name"] for p in parts if p["type"] != "gaussian"]}
    capacity = capacity or {}
    unknown = set(capacity) - set(groups)
    if unknown:
        raise ValueError(f"capacity has unknown groups {sorted(unknown)}; use 'continuous' and 'discrete'")
    specs = []
    for name, schedule in capacity.items():
        if len(schedule) != 4 or not float(schedule[2]).is_integer():  # iterations 2.5 was cut to 2
            raise ValueError(f"capacity.{name} takes [min, max, iterations, gamma], iterations a whole number, got "
                             f"{list(schedule)}")
        if not groups[name]:
            continue
        low, high, iterations, gamma = schedule
        specs.append({"name": name, "parts": groups[name], "min": low, "max": high,
                      "iterations": int(iterations), "gamma": gamma})
    model = build_vae(
        context, image_size, channels, latent={"type": "joint", "parts": parts},
        regularizers=[{"type": "capacity", "groups": specs}] if specs else [],
        encoder={"type": "conv_encoder", "hidden": hidden},
        decoder={"type": "conv_decoder", "hidden": hidden}, cls=JointVAE,
    )
    model.decoder.apply(_init_like_original)
    return model


@torch.no_grad()
def _init_like_original(module: nn.Module) -> None:
    """Initialise a transposed conv as the original code's torch 0.3.1 did.

    That torch drew weights and biases from U(-b, b) with b = 1 / sqrt(in_channels * k * k); today's
    torch takes the fan from the output channels, which makes the last layer's bound 0.25 instead
    of 0.044. Other layers initialise the same in both.
    """
    if isinstance(module, nn.ConvTranspose2d):
        bound = 1 / math.sqrt(module.in_channels * math.prod(module.kernel_size))
        module.weight.uniform_(-bound, bound)
        module.bias.uniform_(-bound, bound)
