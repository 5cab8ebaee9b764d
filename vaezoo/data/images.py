"""Folders of image files: listing them as ``torchvision.datasets.ImageFolder`` does, and reading them into one uint8
tensor."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from vaezoo.errors import DataError
from vaezoo.terminal import progress


def class_folders(folder: Path) -> dict[str, list[Path]]:
    """The image files ``torchvision.datasets.ImageFolder(folder)`` lists, by class, in its order: class folders by
    name, then each one's folders, links followed, by path, and their files by name. Each real folder is walked
    once: ImageFolder follows a link back up the tree until the path is too long, and two such links make its walk
    exponential. Hidden files and folders are left out (:func:`hidden`), which ImageFolder takes for images and
    classes.

    Args:
        folder: the folder holding one subfolder per class.

    Returns:
        ``{class folder's name: its image files}``, every class folder, those without images too.

    Raises:
        OSError: ``folder`` or a folder inside it cannot be listed (ImageFolder left such a folder out).
    """
    from torchvision.datasets.folder import IMG_EXTENSIONS

    classes = {}
    for name in sorted(entry.name for entry in os.scandir(folder) if entry.is_dir() and not hidden(entry.name)):
        walked = [(base, names) for base, _, names in walk(folder / name)]
        classes[name] = [Path(base, file) for base, files in sorted(walked) for file in sorted(files)
                         if file.lower().endswith(IMG_EXTENSIONS) and not hidden(file)]
    return classes


def walk(folder: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(folder)`` as :func:`class_folders` walks it: links followed, each real folder once, hidden folders
    left out.

    Raises:
        OSError: a folder cannot be listed.
    """
    def refuse(error: OSError) -> None:
        raise error

    seen = set()
    for base, folders, names in os.walk(folder, onerror=refuse, followlinks=True):
        info = os.stat(base)
        if (info.st_dev, info.st_ino) in seen:
            folders[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        folders[:] = [sub for sub in folders if not hidden(sub)]
        yield base, folders, names


def hidden(name: str) -> bool:
    """Whether a file or folder named ``name`` is hidden (its name starts with a dot), and so not an image or a
    class: the ``._photo.jpg`` beside each photo macOS copies to another file system, ``.ipynb_checkpoints/``."""
    return name.startswith(".")


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
    wrong_size = how or f"{name} expects images prepared at {size}x{size}"
    with progress(f"reading {name}", len(paths)) as task:
        for i, path in enumerate(paths):
            try:
                with _open_regular(path, name) as file, Image.open(file) as image:
                    width, height = image.size  # from the header: nothing is decoded yet
                    if not resize and (width, height) != (size, size):
                        raise DataError(f"{name} image {path} is {width}x{height}, not {size}x{size}; {wrong_size}")
                    if width * height > MAX_PIXELS:
                        raise DataError(f"{name} image {path} declares {width}x{height} pixels, more than the "
                                        f"{MAX_PIXELS:,} vaezoo decodes; shrink it (to at most 4096x4096) or "
                                        f"remove it")
                    image = _eight_bit(_upright(image), path, name).convert(mode)
                    if resize and image.size != (size, size):
                        image = image.resize((size, size), Image.LANCZOS)
                    pixels = np.asarray(image)
            except PermissionError:
                raise DataError(f"{name} image {path} cannot be read (Permission denied); make it readable (chmod u+r "
                                f"{path})") from None
            except UnidentifiedImageError:  # PIL's words name the open file object, not the file
                raise DataError(f"{name} image {path} cannot be read (not an image file PIL knows); replace it with "
                                f"a fresh copy") from None
            except (OSError, Image.DecompressionBombError) as exc:
                raise DataError(f"{name} image {path} cannot be read ({exc}); replace it with a fresh copy") from None
            out[i] = pixels.reshape(size, size, channels)
            task.advance()
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()


def _eight_bit(image, path: Path, name: str):
    """``image`` with 8-bit grey levels where it has more, scaled as torchvision's ``ToDtype(torch.uint8, scale=True)``
    scales them: integer levels (PIL's ``I;16`` and ``I``: a 16-bit PNG or PGM, a 32-bit TIFF) from the bits of the
    file's samples, float ones (``F``: a float TIFF) from 0 (black) to 1 (white). PIL's convert() to ``L`` or ``RGB``
    clips every level above 255 to white rather than scaling it.

    Raises:
        DataError: an integer image with negative levels, or a float one with levels outside [0, 1], naming it.
    """
    from PIL import Image

    if image.mode == "F":
        levels = np.asarray(image, dtype=np.float64)
        finite = np.isfinite(levels).all()
        if not (finite and levels.min() >= 0 and levels.max() <= 1):
            found = f"levels from {levels.min():g} to {levels.max():g}" if finite else "NaN or infinite levels"
            raise DataError(f"{name} image {path} is a float image with {found}, not levels from 0 (black) to 1 "
                            f"(white); save it scaled to [0, 1], or as an 8- or 16-bit image")
        return Image.fromarray(np.rint(levels * 255).astype(np.uint8), "L")
    if not image.mode.startswith("I"):
        return image
    levels = np.asarray(image, dtype=np.int64)
    if levels.min() < 0:
        raise DataError(f"{name} image {path} has negative levels (down to {levels.min()}); save it with levels "
                        f"from 0, as an 8- or 16-bit image")
    return Image.fromarray(np.minimum(levels >> (_sample_bits(image) - 8), 255).astype(np.uint8), "L")


def _sample_bits(image) -> int:
    """The bits of an integer image's samples: 16 for PIL's ``I;16`` modes and the formats that store at most 16 (PNG,
    PGM), the BitsPerSample of a TIFF, else the 32 of PIL's mode ``I``."""
    if image.mode.startswith("I;16") or image.format in ("PNG", "PPM"):
        return 16
    stated = getattr(image, "tag_v2", {}).get(TIFF_BITS_PER_SAMPLE)
    return max(stated) if isinstance(stated, tuple) else stated or 32


TIFF_BITS_PER_SAMPLE = 258


def _upright(image):
    """``image`` turned as its EXIF orientation says it is seen (a phone's photo, stored sideways)."""
    from PIL import ExifTags, ImageOps

    return ImageOps.exif_transpose(image) if image.getexif().get(ExifTags.Base.Orientation, 1) != 1 else image


MAX_PIXELS = 4096 * 4096
"""The most pixels an image file of a dataset may declare; larger ones are refused from their header."""


def _open_regular(path: Path, name: str):
    """``path`` opened for reading, refused unless it is a regular file (a FIFO would never end)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    file = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        file.close()
        raise DataError(f"{name} image {path} is not a regular file; remove it or replace it with an image")
    return file
