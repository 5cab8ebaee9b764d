"""A folder of your own images as a dataset, as ``torchvision.datasets.ImageFolder`` reads one: the registered
``image_folder``.

A card names the folder (``folder``: an absolute path, or one starting with ``~``), the size its images are resized
to (``image_size``) and their colours (``channels``: 1 for grey levels, 3 for RGB). A folder holding ``train/`` and
``test/`` is split by them; any other folder is split by holding out ``test_share`` of its images (10% by default),
chosen by a hash of each file's path inside the folder, so the split depends on neither the file system's order nor
the machine. Class subfolders (``cats/``, ``dogs/``, in each split folder where there are ones) give labels as
ImageFolder gives them, their indices in the sorted class names; images with no class subfolder have no labels.
Hidden files and folders (``._photo.jpg``, ``.ipynb_checkpoints/``) are neither images nor classes.

A run's card records the number of images of each split (``split_sizes``, :meth:`ImageFolder.record`), the fact a
model is built from (beta-TCVAE's estimator weighs its batches by it), so the card loads with its weights where the
folder is not; training on it again checks the folder still holds those images. A card shared with others
leaves out the folder's path (:meth:`ImageFolder.published`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import torch

from vaezoo.data.base import DataInfo, Dataset, ImageDataset, ImageSize
from vaezoo.data.images import class_folders, hidden, read_images, walk
from vaezoo.errors import DataError
from vaezoo.store.paths import home_path

SPLITS = ("train", "test")
TEST_SHARE = 0.1
"""The share of a folder's images held out for testing where it has no ``train/`` and ``test/`` folders."""


class ImageFolder(Dataset):
    """The registered ``image_folder`` dataset; its options are ``folder``, ``image_size`` (default 64),
    ``channels`` (3) and ``test_share`` (0.1 where the folder has no ``train/`` and ``test/``); a run's card adds
    ``split_sizes``."""

    def info(self, split: str = "train", folder: str = "", image_size: ImageSize = 64, channels: int = 3,
             test_share: float | None = None, split_sizes: dict[str, int] | None = None) -> DataInfo:
        _check_options(split, channels)
        if split_sizes is not None:
            size = _recorded(split_sizes, split)
        else:
            size = len(_listed(_folder(folder), test_share)[0][split])
        return DataInfo(size=size, image_size=image_size, channels=channels)

    def load(self, root=None, split: str = "train", folder: str = "", image_size: ImageSize = 64, channels: int = 3,
             test_share: float | None = None, split_sizes: dict[str, int] | None = None) -> ImageDataset:
        """Read ``split`` of ``folder`` (``root``, the data folder, is not read: ``folder`` says where the images
        are)."""
        _check_options(split, channels)
        path = _folder(folder)
        splits, classes = _listed(path, test_share)
        files = splits[split]
        sizes = {name: len(splits[name]) for name in SPLITS}
        if split_sizes is not None and sizes != {name: _recorded(split_sizes, name) for name in SPLITS}:
            raise DataError(f"image_folder: {path} holds {_sizes(sizes)} images now, and the card was trained on "
                            f"{_sizes(split_sizes)}; put back the images it was trained on, or remove split_sizes "
                            f"from the card's [train.data] options to train on what the folder holds")
        images = read_images([file for file, _ in files], "L" if channels == 1 else "RGB", image_size, resize=True,
                             name="image_folder")
        labels = torch.tensor([label for _, label in files]) if classes else None
        return ImageDataset(images, labels=labels)

    def record(self, **options: Any) -> dict[str, Any]:
        """``options`` with ``split_sizes``, the images of each split, which :meth:`info` then gives without
        the folder."""
        if options.get("split_sizes") is not None:
            return options
        return {**options, "split_sizes": {split: self.info(split, **options).size for split in SPLITS}}

    def published(self, **options: Any) -> dict[str, Any]:
        """The options of :meth:`record` less ``folder``: the path of the user's folder names their machine, their
        files and what they keep there (``/home/alice/patients/scans``); ``split_sizes`` loads the card without
        it."""
        return {name: value for name, value in self.record(**options).items() if name != "folder"}


def _check_options(split: str, channels: int) -> None:
    if split not in SPLITS:
        raise DataError(f"image_folder has splits 'train' and 'test', not '{split}'")
    if channels not in (1, 3):
        raise DataError(f"image_folder's channels is 1 (grey levels) or 3 (RGB), got {channels!r}; set it in the "
                        f"card's [train.data] options")


def _recorded(split_sizes: dict[str, int], split: str) -> int:
    """The images of ``split`` that ``split_sizes`` records, refused unless a whole number >= 1, or where it records
    other splits than ``train`` and ``test``."""
    size = split_sizes.get(split)
    if set(split_sizes) != set(SPLITS) or isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise DataError(f"image_folder's split_sizes records the images of each split, as {{ train = 900, test = 100 "
                        f"}}, got {split_sizes!r}; remove it from the card's [train.data] options and train again")
    return size


def _sizes(sizes: dict[str, int]) -> str:
    """``sizes`` of the splits in words: "1,000 (900 train, 100 test)"."""
    return f"{sum(sizes.values()):,} ({', '.join(f'{sizes[name]:,} {name}' for name in SPLITS)})"


def _folder(folder: str) -> Path:
    """The option ``folder`` as a path, ``~`` expanded; refused unless it names a folder by an absolute path."""
    if not folder:
        raise DataError("image_folder needs the folder of your images: add folder = \"/path/to/images\" to the "
                        "card's [train.data] options")
    path = home_path(folder, "image_folder's folder")
    if not path.is_absolute():
        tail = "/".join(part for part in Path(os.path.normpath(folder)).parts if part != "..") or "images"
        raise DataError(f"image_folder's folder {folder!r} is a relative path, which would depend on where a command "
                        f"runs; give it whole (/path/to/{tail}) or from your home (~/{tail})")
    if not path.is_dir():
        what = "is a file, not a folder" if path.is_file() else "does not exist"
        raise DataError(f"image_folder: {path} {what}; set folder in the card's [train.data] options to the folder "
                        f"of your images")
    return path


Listing = tuple[dict[str, list[tuple[Path, int]]], list[str]]
"""A folder's files of each split with their labels, and its class names (:func:`_split_files`)."""

_LISTINGS: dict[tuple[Path, float | None], tuple[bytes, Listing]] = {}
"""Each folder's listing with the digest of the folder's state it was made from (:func:`_state`), by folder and
``test_share``."""


def _listed(folder: Path, test_share: float | None) -> Listing:
    """:func:`_split_files`, listed once per process and state of ``folder``: a recipe's model is built from its
    training split's size (``info``) each time a command builds it, and listing a folder of 50,000 images takes
    seconds (its paths' hashes), where walking it to compare its state takes under a tenth of a second.

    Threads may call it at once: each keeps the state it read before listing, so a listing older than the folder
    is listed again, never given."""
    try:
        state = _state(folder)
    except OSError:
        return _split_files(folder, test_share)  # which refuses it, naming the folder
    known = _LISTINGS.get((folder, test_share))
    if known is None or known[0] != state:
        known = _LISTINGS[folder, test_share] = (state, _split_files(folder, test_share))
    return known[1]


def _state(folder: Path) -> bytes:
    """A digest of every name in ``folder``, however deep, as :func:`~vaezoo.data.images.walk` walks it: 32 bytes
    whether the folder holds ten files or a million.

    Names, not the folders' times of change, which a file system keeps to a tick (a second or two on some) and an
    image added within one would leave unseen.

    Raises:
        OSError: a folder cannot be listed.
    """
    each = sorted(hashlib.sha256(repr((base, sorted(folders), sorted(names))).encode()).digest()
                  for base, folders, names in walk(folder))
    return hashlib.sha256(b"".join(each)).digest()


def _split_files(folder: Path, test_share: float | None) -> Listing:
    """The files of each split of ``folder`` with their labels (0 where there are no classes), and the class
    names (empty where there are none)."""
    if (folder / "train").is_dir() and (folder / "test").is_dir():
        if test_share is not None:
            raise DataError(f"image_folder: {folder} holds train/ and test/, which are its splits; remove "
                            f"test_share from the card's [train.data] options")
        found = {split: _files(folder / split) for split in SPLITS}
        if ("" in found["train"]) != ("" in found["test"]):
            raise DataError(f"image_folder: one of {folder}'s train/ and test/ has class subfolders and the other "
                            f"not; give both the same class subfolders, or neither")
        classes = sorted(name for name in {*found["train"], *found["test"]} if name)
        return {split: [(file, classes.index(name) if name else 0) for name, files in found[split].items()
                        for file in files] for split in SPLITS}, classes
    for split in SPLITS:
        if (folder / split).is_dir():
            other = "test" if split == "train" else "train"
            raise DataError(f"image_folder: {folder} holds {split}/ but no {other}/; add {other}/ beside it, or "
                            f"rename {split}/ if it is a class of images")
    share = TEST_SHARE if test_share is None else test_share
    if not 0 < share < 1:
        raise DataError(f"image_folder's test_share is the share of the images held out for testing, between 0 and "
                        f"1, got {share!r}")
    found = _files(folder)
    classes = sorted(name for name in found if name)
    files = [(file, classes.index(name) if name else 0) for name, files in found.items() for file in files]
    held = round(share * len(files))
    if held == 0 or held == len(files):
        raise DataError(f"image_folder: a test_share of {share} of the {len(files):,} images in {folder} leaves "
                        f"{'no test' if held == 0 else 'no training'} image; add images, change test_share, or put "
                        f"your own split in train/ and test/ subfolders")
    test = set(sorted(files, key=lambda item: _position(item[0], folder))[:held])
    return {"train": [item for item in files if item not in test], "test": [item for item in files if item in test]}, \
        classes


def _position(file: Path, folder: Path) -> str:
    """Where ``file`` falls in the order the held-out images are taken from: a hash of its path inside
    ``folder``, the same on every machine."""
    return hashlib.sha256(file.relative_to(folder).as_posix().encode("utf-8", "surrogateescape")).hexdigest()


def _files(folder: Path) -> dict[str, list[Path]]:
    """The image files of ``folder`` by class subfolder (``ImageFolder``'s order), or under the class ``""`` where
    it has no subfolders; refused where it has both, a class without images, or no image at all."""
    from torchvision.datasets.folder import IMG_EXTENSIONS

    try:
        classes = class_folders(folder)
        loose = sorted(entry.name for entry in os.scandir(folder) if not entry.is_dir() and not hidden(entry.name)
                       and entry.name.lower().endswith(IMG_EXTENSIONS))
    except OSError as exc:
        raise DataError(f"image_folder: {exc.filename or folder} cannot be read ({exc.strerror or exc}); make it "
                        f"readable (chmod -R u+rX {folder})") from None
    if classes and loose:
        raise DataError(f"image_folder: {folder} holds both images ({loose[0]}) and subfolders ({next(iter(classes))}/"
                        f"); subfolders are classes: put every image in one, or take the subfolders out")
    if empty := [name for name, files in classes.items() if not files]:
        raise DataError(f"image_folder: the class folder {folder / empty[0]} holds no images; add its images or "
                        f"remove it")
    if not classes and not loose:
        raise DataError(f"image_folder: {folder} holds no images (files ending {', '.join(IMG_EXTENSIONS)}); put "
                        f"your images in it, or set folder in the card's [train.data] options to where they are")
    return classes or {"": [folder / name for name in loose]}
