"""dSprites (Matthey, Higgins, Hassabis & Lerchner, 2017, https://github.com/deepmind/dsprites-dataset).

Two sources give its factor grid (:mod:`~vaezoo.data.dsprites.renderer`): the official npz
(:mod:`~vaezoo.data.dsprites.official`) and a deterministic renderer, which needs no download.
Images are kept bit-packed in memory and unpacked per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from vaezoo.data.base import DataInfo, Dataset, ImageDataset
from vaezoo.data.dsprites.official import OFFICIAL_FILE, OFFICIAL_MD5, OFFICIAL_URL, load_official, official_path
from vaezoo.data.dsprites.renderer import (FACTOR_NAMES, FACTOR_SIZES, GRID_SIZE, NOMINAL_FACTORS, SHAPES, SIZE,
                                           factor_classes, factor_values, render, render_block, render_grid,
                                           unpack)
from vaezoo.devices import usable_device, usable_dtype
from vaezoo.errors import DataError

__all__ = [
    "DSprites", "DSpritesDataset", "dsprites", "FACTOR_NAMES", "FACTOR_SIZES", "GRID_SIZE", "NOMINAL_FACTORS",
    "SHAPES", "SIZE", "OFFICIAL_FILE", "OFFICIAL_MD5", "OFFICIAL_URL", "factor_classes", "factor_values",
    "render", "render_block", "render_grid", "unpack",
]


@dataclass(eq=False, repr=False)  # as ImageDataset
class DSprites(ImageDataset):
    """dSprites images, bit-packed in memory.

    Attributes:
        images: ``(N, 1, 64, 8)`` uint8, each row packed by ``np.packbits``; :meth:`batch` unpacks.
        factors: ``(N, 5)`` factor classes, columns :data:`FACTOR_NAMES`.
        factor_values: ``(N, 5)`` factor values (shape 1, 2, 3; scale; orientation in radians; posX; posY).
        indices: ``(N,)`` each image's index in the full grid.
    """

    factor_values: Tensor | None = None
    indices: Tensor | None = None

    def batch(self, index: int | slice | Sequence[int] | np.ndarray | Tensor, device: str | torch.device | None = None,
              dtype: torch.dtype | str = torch.float32) -> Tensor:
        """Images at ``index`` as floats in {0, 1} on ``device`` (``"auto"`` too:
        :func:`vaezoo.devices.usable_device`), shape ``(B, 1, 64, 64)``, of ``dtype``, a model's
        (:func:`vaezoo.devices.usable_dtype`)."""
        packed = self._stored(index).to(usable_device(device))
        shifts = torch.arange(7, -1, -1, dtype=torch.uint8, device=packed.device)
        return ((packed.unsqueeze(-1) >> shifts) & 1).flatten(-2).to(usable_dtype(dtype))


def _from_packed(packed: np.ndarray, indices: np.ndarray) -> DSprites:
    classes = factor_classes(indices)
    values = np.stack([v[c] for v, c in zip(factor_values(), classes.T)], axis=1)
    return DSprites(images=torch.from_numpy(packed).unsqueeze(1), scale=1.0,
                    factors=torch.from_numpy(classes), factor_names=FACTOR_NAMES, nominal_factors=NOMINAL_FACTORS,
                    factor_values=torch.from_numpy(values), indices=torch.from_numpy(np.asarray(indices)))


class DSpritesDataset(Dataset):
    """The registered ``dsprites`` dataset: :func:`dsprites` with the options of a card's recipe."""

    def info(self, split: str = "train", source: str = "render", subset: int | None = None,
             subset_seed: int = 0) -> DataInfo:
        _check_options(split, source, subset)
        return DataInfo(size=subset or GRID_SIZE, image_size=SIZE, channels=1, factor_names=FACTOR_NAMES,
                        nominal_factors=NOMINAL_FACTORS)

    def load(self, root=None, split: str = "train", source: str = "render", subset: int | None = None,
             subset_seed: int = 0) -> DSprites:
        return dsprites(root, split, source, subset, subset_seed)


def _check_options(split: str, source: str, subset: int | None) -> None:
    if split not in ("train", "test"):
        raise DataError(f"dsprites has splits 'train' and 'test' (the same images), not '{split}'")
    if source not in ("render", "official"):
        raise DataError(f"dsprites source must be 'render' or 'official', not '{source}'")
    if subset is not None and not 0 < subset <= GRID_SIZE:
        raise DataError(f"dsprites subset must be between 1 and {GRID_SIZE}, got {subset}")


def dsprites(root=None, split: str = "train", source: str = "render", subset: int | None = None,
             subset_seed: int = 0) -> DSprites:
    """The dSprites dataset.

    dSprites has no held-out split: "train" and "test" are the same images, as in the
    disentanglement literature, which scores models on the data they were trained on.

    Args:
        root: for ``source = "official"``, the npz file or a folder holding it (``FOLDER/dsprites/`` or
            ``FOLDER/``); None looks in ``VAEZOO_DATA`` or downloads into the default data folder.
        split: "train" or "test".
        source: "render" (the built-in renderer, no download) or "official" (the npz).
        subset: keep this many images, drawn without replacement (the same ones for both splits).
        subset_seed: seed of that draw.
    """
    _check_options(split, source, subset)
    chosen = None
    if subset is not None:
        chosen = np.sort(np.random.default_rng(subset_seed).choice(GRID_SIZE, subset, replace=False))
    if source == "render":
        if chosen is None:
            return _from_packed(render_grid(), np.arange(GRID_SIZE))
        return _from_packed(render(chosen), chosen)
    packed, indices = load_official(official_path(root))
    if chosen is not None:
        position = np.full(GRID_SIZE, -1)
        position[indices] = np.arange(len(indices))
        keep = position[chosen]
        if (keep < 0).any():
            raise DataError("the dSprites npz lacks some of the images the subset asks for; use the full file")
        packed, indices = packed[keep], chosen
    return _from_packed(packed, indices)
