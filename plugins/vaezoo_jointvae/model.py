"""The JointVAE model: conv nets, a continuous + categorical latent, capacity on each part."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from vaezoo.context import BuildContext
from vaezoo.model import VAE, build_vae


class JointVAE(VAE):
    """A VAE whose latent joins a Gaussian part (``continuous``) and categorical parts (``discrete0``, ...)."""

    @property
    def discrete_parts(self) -> list[str]:
        """Names of the categorical parts, in order."""
        return [name for name in self.part_slices if name.startswith("discrete")]

    @torch.no_grad()
    def category_probs(self, x: Tensor) -> dict[str, Tensor]:
        """Each categorical part's class probabilities for ``x``, shape ``(B, k)``."""
        parts = self.encode(x).parts
        return {name: parts[name].probs for name in self.discrete_parts}

    @torch.no_grad()
    def predict_category(self, x: Tensor) -> Tensor:
        """The argmax class of each categorical part, shape ``(B, number of categorical parts)``."""
        parts = self.encode(x).parts
        return torch.stack([parts[name].logits.argmax(-1) for name in self.discrete_parts], dim=-1)


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
    if continuous < 0 or continuous == 0 and not discrete:
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
