"""MNIST and FashionMNIST through torchvision, resized to the recipe's ``image_size``."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import sys
from pathlib import Path

import numpy as np
import torch

from vaezoo.data.base import (DataInfo, DataRoot, Dataset, ImageDataset, ImageSize, check_folders_readable, data_root,
                              download_advice)
from vaezoo.errors import DataError
from vaezoo.store.limits import check_torch_zip, expanded, not_dense


def _load(cls, name: str, root, split: str, image_size: int | None, count: int) -> ImageDataset:
    if split not in ("train", "test"):
        raise DataError(f"{name} has splits 'train' and 'test', not '{split}'")
    where = data_root(root)
    check_folders_readable((where.path, where.path / cls.__name__, where.path / cls.__name__ / "raw"), name)
    _check_idx(where.path / cls.__name__ / "raw", "train" if split == "train" else "t10k", count, name,
               cls.mirrors[0])
    legacy = _legacy_files(where.path / cls.__name__ / "processed", name)
    made = [p for p in (where.path / cls.__name__ / "raw", where.path / cls.__name__) if not os.path.lexists(p)]
    try:
        with contextlib.redirect_stdout(sys.stderr):  # torchvision reports downloads on stdout, vaezoo's data stream
            data = cls(root=str(where.path), train=split == "train", download=where.download)
    except Exception as exc:  # noqa: BLE001 (torch.load of legacy files fails in many ways)
        if legacy is not None:
            raise DataError(f"{name}: the legacy files in {legacy} are not the (images, labels) pairs of plain "
                            f"tensors torchvision wrote ({type(exc).__name__}); {_LEGACY_FIX}") from None
        if not isinstance(exc, RuntimeError | OSError):
            raise
        for folder in made:  # the empty folders a failed download made; a folder holding a file stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise _not_found(cls, name, where, exc) from None
    images = data.data
    _check_loaded(images, data.targets, count, name, legacy)
    if image_size is not None and image_size != images.shape[-1]:
        images = _resize(images, image_size)
    return ImageDataset(images.unsqueeze(1).contiguous(), 255.0, labels=data.targets.clone())


IDX_IMAGES, IDX_LABELS, SIDE = 2051, 2049, 28  # the magic numbers of IDX image and label files; 28x28 images
CLASSES = 10  # digits, or Fashion-MNIST's ten kinds of clothing


def _check_idx(raw: Path, prefix: str, count: int, name: str, mirror: str) -> None:
    """Refuse the split's IDX files in ``raw`` unless each is a regular file whose header announces ``count``
    items and whose size is what its header announces; read before torchvision reads them whole.

    Files that do not exist are left to torchvision (which downloads them or says they are missing).
    """
    for suffix, magic, item in (("images-idx3-ubyte", IDX_IMAGES, SIDE * SIDE), ("labels-idx1-ubyte", IDX_LABELS, 1)):
        path = raw / f"{prefix}-{suffix}"
        if not os.path.lexists(path):
            continue
        header = (magic, count, SIDE, SIDE) if magic == IDX_IMAGES else (magic, count)
        fix = f"replace it with a fresh copy from {mirror}"
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO opens without blocking
            with os.fdopen(fd, "rb") as file:
                info = os.fstat(file.fileno())
                if not stat.S_ISREG(info.st_mode):
                    raise DataError(f"{name} file {path} is not a regular file; {fix}")
                found = struct.unpack(f">{len(header)}i", file.read(4 * len(header)).ljust(4 * len(header), b"\0"))
        except OSError as exc:
            if exc.errno == errno.EACCES:  # the file is sound: it is its mode that stops vaezoo
                fix = "make it readable (chmod u+r), or give a copy you can read"
            raise DataError(f"{name} file {path} cannot be read ({exc.strerror or exc}); {fix}") from None
        size = 4 * len(header) + count * item
        if found != header or info.st_size != size:
            raise DataError(f"{name} file {path} is not the {count:,}-{'image' if item > 1 else 'label'} IDX file "
                            f"of that split (header {found}, {info.st_size:,} bytes; expected {header}, "
                            f"{size:,} bytes); {fix}")


def _legacy_files(processed: Path, name: str) -> Path | None:
    """``processed``, when it holds the legacy files of old torchvision versions (``training.pt`` and ``test.pt``),
    which torchvision reads instead of the IDX files; refused if their records inflate beyond their size."""
    files = [processed / "training.pt", processed / "test.pt"]
    if not all(path.is_file() for path in files):
        return None
    for path in files:
        try:
            check_torch_zip(path)
        except (ValueError, OSError) as exc:
            raise DataError(f"{name} file {path} is not a file torch.save wrote ({exc}); {_LEGACY_FIX}") from None
    return processed


_LEGACY_FIX = "remove that processed/ folder, which old torchvision versions wrote, so that the IDX files are read"


def _check_loaded(images: torch.Tensor, labels: torch.Tensor, count: int, name: str, legacy: Path | None) -> None:
    """Refuse a split that is not ``count`` dense 8-bit 28x28 images with as many labels of the ten classes: the
    IDX files' sizes are checked before they are read, but their labels and legacy files only once read."""
    def plain(t, dtype) -> bool:
        return torch.is_tensor(t) and t.dtype == dtype and not not_dense({"t": t}) and not expanded({"t": t})

    if not (plain(images, torch.uint8) and tuple(images.shape) == (count, SIDE, SIDE)
            and plain(labels, torch.int64) and tuple(labels.shape) == (count,)):
        where = f"the legacy files in {legacy}" if legacy else "its files"
        fix = _LEGACY_FIX if legacy else "replace them with fresh copies"
        shape = tuple(images.shape) if torch.is_tensor(images) else type(images).__name__
        raise DataError(f"{name}: {where} hold images of shape {shape}, not the split's {count:,} dense 8-bit "
                        f"{SIDE}x{SIDE} images with their labels; {fix}")
    if count and not (0 <= labels.min() and labels.max() < CLASSES):
        where = f"the legacy files in {legacy} hold" if legacy else "its label file holds"
        fix = _LEGACY_FIX if legacy else "replace it with a fresh copy"
        raise DataError(f"{name}: {where} labels from {labels.min().item()} to {labels.max().item()}, not "
                        f"classes 0 to {CLASSES - 1}; {fix}")


def _not_found(cls, name: str, where: DataRoot, exc: Exception) -> DataError:
    """The error saying where vaezoo looked for ``cls``'s files and how to get them."""
    raw = where.path / cls.__name__ / "raw"
    files = [os.path.splitext(os.path.basename(url))[0] for url, _ in cls.resources]
    reason = " ".join(str(exc).split()) or type(exc).__name__  # torchvision's reasons run over several lines
    if where.download:
        return DataError.about("could not download {name} into {raw} ({reason}); check the network, or fetch {files} "
                               "from {mirror} yourself, unpack them into DIR/{folder}/raw/ and pass {data_root:DIR}",
                               name=name, raw=raw, reason=reason, files=", ".join(f + ".gz" for f in files),
                               mirror=cls.mirrors[0], folder=cls.__name__)
    missing = [f for f in files if not (raw / f).is_file()]
    if not missing:
        return DataError(f"{name} files in {raw} cannot be read ({reason}); replace them with fresh copies from "
                         f"{cls.mirrors[0]}")
    hint = ""
    if where.path.name in (cls.__name__, "raw"):
        hint = f" ({where.path} looks like the {cls.__name__} folder itself: pass the folder that holds it)"
    elif all((raw / f"{f}.gz").is_file() for f in missing):  # downloaded from the mirror, not unpacked
        hint = f" (their .gz files are there: unpack them, e.g. gunzip {raw}/*.gz)"
    elif all((raw.parent / f).is_file() for f in missing):
        hint = f" ({raw.parent} holds them: move them into {raw})"
    return DataError.about("{name} not found: vaezoo looked in {raw} (from {source}) and is missing {missing}{hint}; "
                           "point {data_root} or VAEZOO_DATA at a folder holding {folder}/raw/ in torchvision's "
                           "layout, or {download}", name=name, raw=raw, source=where.source,
                           missing=", ".join(missing), hint=hint, folder=cls.__name__, download=download_advice(where))


def _resize(images: torch.Tensor, size: int) -> torch.Tensor:
    """Resize 8-bit images with PIL's bilinear filter, as ``transforms.Resize`` does on PIL images."""
    from PIL import Image

    out = np.empty((images.shape[0], size, size), dtype=np.uint8)
    for i, image in enumerate(images.numpy()):
        out[i] = np.asarray(Image.fromarray(image).resize((size, size), Image.BILINEAR))
    return torch.from_numpy(out)


class TorchvisionDigits(Dataset):
    """A 28x28 grey-level torchvision dataset (MNIST or Fashion-MNIST), resized to the recipe's ``image_size``.

    Args:
        name: the registered name, for messages.
        torchvision_class: the class's name in ``torchvision.datasets``.
        sizes: images per split.
    """

    def __init__(self, name: str, torchvision_class: str, sizes: dict[str, int]):
        self.name, self.torchvision_class, self.sizes = name, torchvision_class, sizes

    def info(self, split: str = "train", image_size: ImageSize | None = None, binarize: str | None = None) -> DataInfo:
        if split not in self.sizes:
            raise DataError(f"{self.name} has splits {' and '.join(map(repr, self.sizes))}, not '{split}'")
        _check_binarize(self.name, binarize)
        return DataInfo(size=self.sizes[split], image_size=image_size or 28, channels=1)

    def load(self, root=None, split: str = "train", image_size: ImageSize | None = None,
             binarize: str | None = None) -> ImageDataset:
        """Load ``split``; ``binarize="dynamic"`` binarises it (see :data:`BINARIZE_SEED`)."""
        import torchvision.datasets

        _check_binarize(self.name, binarize)
        data = _load(getattr(torchvision.datasets, self.torchvision_class), self.name, root, split, image_size,
                     self.sizes.get(split, 0))
        if binarize is None:
            return data
        if split == "train":
            data.binarize = True
            return data
        drawn = torch.bernoulli(data.batch(slice(None)), generator=torch.Generator().manual_seed(BINARIZE_SEED))
        return ImageDataset(drawn.to(torch.uint8), 1.0, labels=data.labels)


BINARIZE_SEED = 0
"""With ``binarize="dynamic"``, the training split draws every batch afresh as Bernoulli(grey level) (Burda et al.
2016); other splits are binarised once, by a generator seeded with this, so that evaluations repeat."""


def _check_binarize(name: str, binarize: str | None) -> None:
    if binarize not in (None, "dynamic"):
        raise DataError(f"{name} option binarize is {binarize!r}; the one binarisation is 'dynamic' "
                        "(leave the option out for grey levels)")


mnist = TorchvisionDigits("mnist", "MNIST", {"train": 60_000, "test": 10_000})
"""MNIST digits (LeCun et al., 1998); ``image_size`` 32 reproduces the JointVAE input."""

fashion_mnist = TorchvisionDigits("fashion_mnist", "FashionMNIST", {"train": 60_000, "test": 10_000})
"""Fashion-MNIST (Xiao et al., 2017)."""
