"""Fully connected encoder and decoder."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class MLPEncoder(nn.Module):
    """Flattened image -> features through ReLU layers of the given ``hidden`` sizes."""

    def __init__(self, channels: int, image_size: int, hidden: Sequence[int] = (1200, 1200)):
        super().__init__()
        self.net = _mlp([channels * image_size * image_size, *hidden])
        self.out_features = hidden[-1]

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x.flatten(1))


class MLPDecoder(nn.Module):
    """Code -> image-shaped output through ReLU layers of the given ``hidden`` sizes."""

    def __init__(self, code_size: int, channels: int, image_size: int, hidden: Sequence[int] = (1200, 1200)):
        super().__init__()
        self.shape = (channels, image_size, image_size)
        self.net = nn.Sequential(_mlp([code_size, *hidden]), nn.Linear(hidden[-1], channels * image_size**2))

    def forward(self, z: Tensor) -> Tensor:
        return self.net(z).view(z.shape[0], *self.shape)
