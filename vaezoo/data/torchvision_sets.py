"""MNIST and FashionMNIST through torchvision, resized to the recipe's ``image_size``."""

from __future__ import annotations

import numpy as np
import torch

from vaezoo.data.base import ImageDataset, data_root
from vaezoo.errors import DataError


def _load(cls, name: str, root, split: str, image_size: int | None) -> ImageDataset:
    if split not in ("train", "test"):
        raise DataError(f"{name} has splits 'train' and 'test', not '{split}'")
    directory, download = data_root(root)
    try:
        data = cls(root=str(directory), train=split == "train", download=download)
    except RuntimeError as exc:
        how = "pass --data-root DIR (or set VAEZOO_DATA) pointing at a folder holding " \
              f"{cls.__name__}/raw/ in torchvision's layout, or run without either to download it"
        raise DataError(f"{name} {split} split not found under {directory} ({exc}); {how}") from None
    images = data.data
    if image_size is not None and image_size != images.shape[-1]:
        images = _resize(images, image_size)
    return ImageDataset(images.unsqueeze(1).contiguous(), 255.0, labels=data.targets.clone())


def _resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize 8-bit images with PIL's bilinear filter, as ``transforms.Resize`` does on PIL images."""
    from PIL import Image

    out = np.empty((images.shape[0], size, size), dtype=np.uint8)
    for i, image in enumerate(images.numpy()):
        out[i] = np.asarray(Image.fromarray(image).resize((size, size), Image.BILINEAR))
    return torch.from_numpy(out)


def mnist(root=None, split: str = "train", image_size: int | None = None) -> ImageDataset:
    """MNIST digits (LeCun et al., 1998); ``image_size`` 32 reproduces the JointVAE input."""
    from torchvision.datasets import MNIST

    return _load(MNIST, "mnist", root, split, image_size)


def fashion_mnist(root=None, split: str = "train", image_size: int | None = None) -> ImageDataset:
    """Fashion-MNIST (Xiao et al., 2017)."""
    from torchvision.datasets import FashionMNIST

    return _load(FashionMNIST, "fashion_mnist", root, split, image_size)
