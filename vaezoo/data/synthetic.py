"""A tiny dataset drawn in memory, with ground-truth factors and labels: for trying a recipe or a plugin's part
(the conformance kit, :func:`vaezoo.testing.check_training`, trains on it) without a download.

Each image holds one shape (a square, a horizontal bar or a vertical bar) at one of 4 x 4 positions, in
every channel. Its factors are ``shape`` (nominal), ``x`` and ``y``; its label is the shape. Any image size
and number of channels can be asked for, so a model is tried at the geometry of its own card.
"""

from __future__ import annotations

import torch

from vaezoo.data.base import DataInfo, Dataset, ImageDataset
from vaezoo.errors import DataError

FACTOR_NAMES = ("shape", "x", "y")
NOMINAL_FACTORS = ("shape",)
SHAPES = ("square", "horizontal bar", "vertical bar")
POSITIONS = 4
SPLIT_SEEDS = {"train": 0, "test": 1}


class Synthetic(Dataset):
    """The registered ``synthetic`` dataset; its options are ``image_size``, ``channels`` and ``size``."""

    def info(self, split: str = "train", image_size: int = 16, channels: int = 1, size: int = 64) -> DataInfo:
        _check_options(split, image_size, channels, size)
        return DataInfo(size=size, image_size=image_size, channels=channels, factor_names=FACTOR_NAMES,
                        nominal_factors=NOMINAL_FACTORS)

    def load(self, root=None, split: str = "train", image_size: int = 16, channels: int = 1,
             size: int = 64) -> ImageDataset:
        return synthetic(split, image_size, channels, size)


def _check_options(split: str, image_size: int, channels: int, size: int) -> None:
    if split not in SPLIT_SEEDS:
        raise DataError(f"synthetic has splits 'train' and 'test', not '{split}'")
    for option, value, least in (("image_size", image_size, POSITIONS), ("channels", channels, 1), ("size", size, 1)):
        if not isinstance(value, int) or value < least:
            raise DataError(f"synthetic {option} must be an integer of at least {least}, got {value!r}")


def synthetic(split: str = "train", image_size: int = 16, channels: int = 1, size: int = 64) -> ImageDataset:
    """``size`` binary images ``(size, channels, image_size, image_size)``, the same ones for the same arguments.

    Args:
        split: "train" or "test" (drawn from different seeds).
        image_size: height and width, at least 4.
        channels: channels; every channel holds the same shape.
        size: number of images.
    """
    _check_options(split, image_size, channels, size)
    generator = torch.Generator().manual_seed(SPLIT_SEEDS[split])
    factors = torch.stack([torch.randint(len(SHAPES), (size,), generator=generator),
                           torch.randint(POSITIONS, (size,), generator=generator),
                           torch.randint(POSITIONS, (size,), generator=generator)], dim=1)
    side = max(1, image_size // 4)
    thin = max(1, side // 3)
    step = (image_size - side) / (POSITIONS - 1)
    images = torch.zeros(size, channels, image_size, image_size, dtype=torch.uint8)
    for image, (shape, x, y) in zip(images, factors.tolist()):
        top, left = round(y * step), round(x * step)
        height, width = {0: (side, side), 1: (thin, side), 2: (side, thin)}[shape]
        image[:, top:top + height, left:left + width] = 1
    return ImageDataset(images, scale=1.0, labels=factors[:, 0].clone(), factors=factors,
                        factor_names=FACTOR_NAMES, nominal_factors=NOMINAL_FACTORS)
