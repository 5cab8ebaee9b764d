"""Reading a list of image files into one uint8 tensor, for datasets stored as folders of images."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from vaezoo.errors import DataError
from vaezoo.progress import progress


def read_images(paths: Sequence[Path], mode: str, size: int, resize: bool, name: str, how: str = "") -> torch.Tensor:
    """Read image files as ``(N, C, size, size)`` uint8, showing progress on stderr.

    Args:
        paths: the files, in the dataset's order.
        mode: the PIL mode to convert each image to: ``"L"`` (grey levels, as ``transforms.Grayscale``)
            or ``"RGB"``.
        size: height and width of the result.
        resize: resize each image to ``size`` x ``size`` with PIL's Lanczos filter; without it an image
            of another size is an error.
        name: the dataset, for messages.
        how: how to prepare images of the right size, for the error an image of another size gets.

    Returns:
        The images, channels first.
    """
    from PIL import Image, UnidentifiedImageError

    channels = len(mode)
    out = np.empty((len(paths), size, size, channels), dtype=np.uint8)
    with progress(f"reading {name}", len(paths)) as task:
        for i, path in enumerate(paths):
            try:
                with Image.open(path) as image:
                    image = image.convert(mode)
                    if resize and image.size != (size, size):
                        image = image.resize((size, size), Image.LANCZOS)
                    pixels = np.asarray(image)
            except (OSError, UnidentifiedImageError) as exc:
                raise DataError(f"{name} image {path} cannot be read ({exc}); replace it with a fresh copy") from None
            if pixels.shape[:2] != (size, size):
                raise DataError(f"{name} image {path} is {pixels.shape[1]}x{pixels.shape[0]}, not {size}x{size}; "
                                f"{how or f'{name} expects images prepared at {size}x{size}'}")
            out[i] = pixels.reshape(size, size, channels)
            task.advance()
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()
