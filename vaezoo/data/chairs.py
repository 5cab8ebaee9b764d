"""3D Chairs (Aubry et al., 2014, "Seeing 3D chairs") as the original JointVAE code read them.

The renders (``rendered_chairs.tar``: 1,393 chair models seen from 62 viewpoints, 600x600) come
from :data:`URL`. The original code's README says they were center-cropped and resized to 64x64;
its loader then read the folder ``rendered_chairs_64`` with ``torchvision.datasets.ImageFolder``
(one subfolder per chair, images anywhere inside) and ``transforms.Grayscale``. vaezoo reads that
same folder, ``DATA_ROOT/rendered_chairs_64/``, in the same order. There are no labelled factors
and no test split: "test" is the same images, as the original code evaluated none.
"""

from __future__ import annotations

from pathlib import Path

from vaezoo.data.base import DataInfo, Dataset, ImageDataset, data_root
from vaezoo.data.images import class_folders, read_images
from vaezoo.errors import DataError

URL = "https://www.di.ens.fr/willow/research/seeing3Dchairs/"
FOLDER = "rendered_chairs_64"
IMAGES = 86_366
"""1,393 chairs x 62 views."""
SIZE = 64
PREPARE = (f"center-crop the renders of rendered_chairs.tar ({URL}) and resize them to {SIZE}x{SIZE}, as the "
           f"original JointVAE code's README says")


class Chairs(Dataset):
    """The registered ``chairs`` dataset: 86,366 grey-level 64x64 renders of chairs."""

    def info(self, split: str = "train") -> DataInfo:
        _check_split(split)
        return DataInfo(size=IMAGES, image_size=SIZE, channels=1)

    def load(self, root=None, split: str = "train") -> ImageDataset:
        _check_split(split)
        return ImageDataset(read_images(image_files(root), "L", SIZE, resize=False, name="chairs", how=PREPARE))


def image_files(root=None) -> list[Path]:
    """The chair images under ``ROOT/rendered_chairs_64/``, in ``ImageFolder``'s order.

    Args:
        root: the data folder (``data_root``), or None for ``VAEZOO_DATA`` or the default folder.
    """
    where = data_root(root)
    folder = where.path / FOLDER
    hint = ""
    if where.path.name == FOLDER:
        hint = f" ({where.path} looks like the {FOLDER} folder itself: pass the folder that holds it)"
    if not folder.is_dir():
        raise DataError.about("chairs not found: vaezoo looked for {folder} (from {source}){hint}; {prepare}, one "
                              "subfolder per chair, into DIR/{name}/ and pass {data_root:DIR} or set VAEZOO_DATA",
                              folder=folder, source=where.source, hint=hint, prepare=PREPARE, name=FOLDER)
    try:
        files = [file for files in class_folders(folder).values() for file in files]
    except OSError as exc:
        raise DataError(f"chairs: {folder} cannot be read ({exc.strerror or exc}); {PREPARE} into it") from None
    if not files:
        raise DataError(f"chairs: {folder} holds no images in one subfolder per chair; {PREPARE} into it")
    if len(files) != IMAGES:
        raise DataError(f"chairs: found {len(files):,} images in {folder}, expected {IMAGES:,} (1,393 chairs x 62 "
                        f"views); {PREPARE}, every render of rendered_chairs.tar")
    return files


def _check_split(split: str) -> None:
    if split not in ("train", "test"):
        raise DataError(f"chairs has splits 'train' and 'test' (the same images), not '{split}'")
