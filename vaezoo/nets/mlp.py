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
    """Flattened image -> features through ReLU layers of the given ``hidden`` sizes (none: the flattened image)."""

    def __init__(self, channels: int, image_size: int, hidden: Sequence[int] = (1200, 1200)):
        super().__init__()
        sizes = [channels * image_size * image_size, *hidden]
        self.net = _mlp(sizes)
        self.out_features = sizes[-1]

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x.flatten(1))


class MLPDecoder(nn.Module):
    """Code -> image-shaped output through ReLU layers of the given ``hidden`` sizes (none: one linear layer)."""

    def __init__(self, code_size: int, channels: int, image_size: int, hidden: Sequence[int] = (1200, 1200)):
        super().__init__()
        self.shape = (channels, image_size, image_size)
        sizes = [code_size, *hidden]
        self.net = nn.Sequential(_mlp(sizes), nn.Linear(sizes[-1], channels * image_size**2))

    def forward(self, z: Tensor) -> Tensor:
        return self.net(z).view(z.shape[0], *self.shape)
