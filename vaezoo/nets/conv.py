"""Convolutional encoder and decoder that size themselves from ``image_size`` and ``channels``.

The layout generalises the JointVAE nets (Dupont, 2018): 4x4 convolutions with
stride 2 halve the image until it is 4x4, then a hidden linear layer. The
default widths are those of the original code: 32 then 64 channels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from torch import Tensor, nn


def _stages(image_size: int) -> int:
    """How many stride-2 layers take ``image_size`` down to 4."""
    stages = round(math.log2(image_size / 4)) if image_size > 0 else 0
    if image_size < 16 or 4 * 2**stages != image_size:
        raise ValueError(f"image_size must be a power of two >= 16, got {image_size}")
    return stages


def default_widths(image_size: int) -> list[int]:
    """Encoder conv widths: [32] * (stages - 2) + [64, 64] (JointVAE: 32x32 -> 32, 64, 64)."""
    stages = _stages(image_size)
    return ([32] * (stages - 2) + [64, 64])[-stages:]


class ConvEncoder(nn.Module):
    """Image -> feature vector of size ``hidden``.

    Args:
        channels: input channels.
        image_size: input height and width (a power of two >= 16).
        hidden: size of the output features.
        widths: channels of each stride-2 conv (one per halving); default :func:`default_widths`.
    """

    def __init__(self, channels: int, image_size: int, hidden: int = 256, widths: Sequence[int] | None = None):
        super().__init__()
        widths = list(widths or default_widths(image_size))
        if len(widths) != _stages(image_size):
            raise ValueError(f"{image_size}x{image_size} needs {_stages(image_size)} conv widths, got {widths}")
        layers: list[nn.Module] = []
        for c_in, c_out in zip([channels] + widths[:-1], widths):
            layers += [nn.Conv2d(c_in, c_out, 4, stride=2, padding=1), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.hidden = nn.Sequential(nn.Linear(widths[-1] * 16, hidden), nn.ReLU())
        self.out_features = hidden

    def forward(self, x: Tensor) -> Tensor:
        return self.hidden(self.features(x).flatten(1))


class ConvDecoder(nn.Module):
    """Code -> image-shaped decoder output (e.g. logits).

    Args:
        code_size: size of the latent code.
        channels: output channels.
        image_size: output height and width (a power of two >= 16).
        hidden: size of the hidden linear layer.
        widths: channels of each stride-2 transposed conv but the last, which outputs ``channels``;
            default: the encoder's widths reversed with the first 64 turned to 32 (as in JointVAE).
    """

    def __init__(self, code_size: int, channels: int, image_size: int, hidden: int = 256,
                 widths: Sequence[int] | None = None):
        super().__init__()
        stages = _stages(image_size)
        widths = list(widths or ([64] * (stages - 2) + [32, 32])[-stages:])
        if len(widths) != stages:
            raise ValueError(f"{image_size}x{image_size} needs {stages} transposed-conv widths, got {widths}")
        self.hidden = nn.Sequential(
            nn.Linear(code_size, hidden), nn.ReLU(), nn.Linear(hidden, widths[0] * 16), nn.ReLU()
        )
        layers: list[nn.Module] = []
        for c_in, c_out in zip(widths, widths[1:] + [channels]):
            layers += [nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1), nn.ReLU()]
        self.features = nn.Sequential(*layers[:-1])
        self.first_width = widths[0]

    def forward(self, z: Tensor) -> Tensor:
        return self.features(self.hidden(z).view(z.shape[0], self.first_width, 4, 4))
