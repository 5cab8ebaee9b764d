"""CelebA (Liu, Luo, Wang & Tang, 2015) through torchvision, at the 64x64 of the original JointVAE code.

torchvision's ``CelebA`` finds the aligned 178x218 faces and the split files in
``DATA_ROOT/celeba/`` (and downloads them from Google Drive into the default data folder). The
original JointVAE code read a folder of the faces "resized to be 64 by 64" (its README), without a
crop; vaezoo resizes each whole face to ``image_size`` x ``image_size`` with PIL's Lanczos filter.
"""

from __future__ import annotations

import contextlib
import sys

from vaezoo.data.base import DataInfo, Dataset, DataRoot, ImageDataset, ImageSize, data_root, download_advice
from vaezoo.data.images import read_images
from vaezoo.errors import DataError, first_line

URL = "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html"
SPLITS = {"train": 162_770, "valid": 19_867, "test": 19_962, "all": 202_599}
"""Images per split of ``list_eval_partition.txt``."""
SIZE = 64


class CelebA(Dataset):
    """The registered ``celeba`` dataset: the aligned faces, RGB, resized to ``image_size`` (default 64)."""

    def info(self, split: str = "train", image_size: ImageSize = SIZE) -> DataInfo:
        _check_split(split)
        return DataInfo(size=SPLITS[split], image_size=image_size, channels=3)

    def load(self, root=None, split: str = "train", image_size: ImageSize = SIZE) -> ImageDataset:
        import torchvision.datasets

        _check_split(split)
        where = data_root(root)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # torchvision reports downloads on stdout, vaezoo's data
                data = torchvision.datasets.CelebA(str(where.path), split=split, target_type=[],
                                                   download=where.download)
        except (RuntimeError, OSError, ImportError, ValueError) as exc:
            raise _not_found(where, exc) from None
        folder = where.path / data.base_folder / "img_align_celeba"
        return ImageDataset(read_images([folder / name for name in data.filename], "RGB", image_size, resize=True,
                                        name="celeba"))


def _not_found(where: DataRoot, exc: Exception) -> DataError:
    """The error saying where vaezoo looked for CelebA's files and how to get them."""
    from torchvision.datasets import CelebA as Torchvision

    folder = where.path / Torchvision.base_folder
    reason = first_line(exc) or type(exc).__name__
    if where.download:
        return DataError.about("could not download celeba into {folder} ({reason}); Google Drive often refuses it: "
                               "get img_align_celeba.zip and the list_*.txt and identity_CelebA.txt files from {url}, "
                               "unpack the zip into DIR/celeba/ and pass {data_root:DIR}",
                               folder=folder, reason=reason, url=URL)
    wanted = ["img_align_celeba/"] + [name for _, _, name in Torchvision.file_list if not name.endswith(".zip")]
    missing = [name for name in wanted if not (folder / name.rstrip("/")).exists()]
    hint = ""
    if where.path.name in (Torchvision.base_folder, "img_align_celeba"):
        hint = f" ({where.path} looks like the celeba folder itself: pass the folder that holds it)"
    if not missing:
        return DataError(f"celeba files in {folder} cannot be read ({reason}); replace them with fresh copies "
                         f"from {URL}")
    return DataError.about("celeba not found: vaezoo looked in {folder} (from {source}) and is missing "
                           "{missing}{hint}; get them from {url} into DIR/celeba/ and point {data_root} or "
                           "VAEZOO_DATA at DIR, or {download}", folder=folder, source=where.source,
                           missing=", ".join(missing), hint=hint, url=URL, download=download_advice(where))


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise DataError(f"celeba has splits {', '.join(map(repr, SPLITS))}, not '{split}'")
