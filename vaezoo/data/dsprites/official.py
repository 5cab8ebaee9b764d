"""The official dSprites file (Matthey, Higgins, Hassabis & Lerchner, 2017): found on disk or downloaded,
md5-checked, and read without unpickling anything."""

from __future__ import annotations

import hashlib
import math
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path

import numpy as np

from vaezoo.data.base import check_folders_readable, data_root, download_advice
from vaezoo.data.dsprites.renderer import FACTOR_SIZES, SIZE
from vaezoo.errors import DataError, Phrase
from vaezoo.store.files import atomic_save
from vaezoo.store.paths import home_path

OFFICIAL_FILE = "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz"
OFFICIAL_MD5 = "7da33b31b13a06f4b04a70402ce90c2e"
OFFICIAL_URL = f"https://github.com/deepmind/dsprites-dataset/raw/master/{OFFICIAL_FILE}"


def download_official(directory: Path, url: str = OFFICIAL_URL, md5: str = OFFICIAL_MD5) -> Path:
    """Download the official npz into ``directory``, verify its md5, and write it atomically.

    Returns:
        The path of the verified file.
    """
    path = Path(directory) / OFFICIAL_FILE

    def fetch(tmp: Path) -> None:
        digest = hashlib.md5()
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as f:
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    f.write(chunk)
        except (urllib.error.URLError, OSError) as exc:
            raise DataError.about('could not download dSprites from {url} ({exc}); fetch {file} yourself and pass '
                                  '{data_root} pointing at it, or use the renderer (source = "render")',
                                  url=url, exc=exc, file=OFFICIAL_FILE) from None
        if digest.hexdigest() != md5:
            raise DataError(f"dSprites downloaded from {url} has md5 {digest.hexdigest()}, expected {md5}; "
                            f"nothing was written, try again")

    atomic_save(path, fetch)
    return path


def _npz_member(archive: zipfile.ZipFile, name: str, path: Path):
    """Open the array ``name`` of an npz and read its header: ``(stream, shape, dtype)``."""
    try:
        member = archive.getinfo(f"{name}.npy")
    except KeyError:
        raise DataError(f"{path} has no array '{name}'; is it the official dSprites npz?") from None
    stream = archive.open(member)
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        stream.close()
        raise DataError(f"{path}: array '{name}' has no readable .npy header ({exc}); download the official "
                        f"file again") from None
    # the header's shape must account for exactly the bytes stored: a header may not ask for more
    if fortran or dtype.hasobject or math.prod(shape) * dtype.itemsize != member.file_size - stream.tell():
        stream.close()
        raise DataError(f"{path}: array '{name}' is not a plain C-order array of the size its header declares "
                        f"(shape {shape}, {dtype}, {member.file_size:,} bytes stored); download the official file "
                        f"again")
    return stream, shape, dtype


def _read_rows(stream, dtype: np.dtype, row_shape: tuple[int, ...], rows: int, path: Path) -> np.ndarray:
    count = rows * int(np.prod(row_shape))
    try:
        data = np.frombuffer(stream.read(count * dtype.itemsize), dtype=dtype)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:  # a damaged member: a CRC or deflate error
        raise DataError(f"{path}: array '{stream.name.removesuffix('.npy')}' is damaged ({exc}); download the "
                        f"official file again") from None
    if data.size != count:
        raise DataError("the dSprites npz ends early; download it again")
    return data.reshape(rows, *row_shape)


def load_official(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read an official-format npz without unpickling anything, packing the images as it streams.

    Returns:
        ``(packed images (N, 64, 8), grid indices (N,))``; the indices come from ``latents_classes``.
    """
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise DataError(f"cannot read dSprites npz {path} ({exc})") from None
    with archive:
        stream, shape, dtype = _npz_member(archive, "latents_classes", path)
        if len(shape) != 2 or shape[1] != 6 or shape[0] > math.prod(FACTOR_SIZES) or dtype.kind not in "iu":
            stream.close()
            raise DataError(f"{path}: latents_classes is a {dtype} array of shape {shape}, expected whole numbers "
                            f"of shape (N, 6) with N at most the grid's {math.prod(FACTOR_SIZES):,}; download the "
                            f"official file again")
        with stream:
            classes = _read_rows(stream, dtype, (6,), shape[0], path)
        if (classes[:, 0] != 0).any() or (classes[:, 1:] < 0).any() or (classes[:, 1:] >= FACTOR_SIZES).any():
            raise DataError(f"{path}: latents_classes holds classes outside the dSprites grid")
        indices = np.ravel_multi_index(tuple(classes[:, 1:].T), FACTOR_SIZES)
        stream, shape, dtype = _npz_member(archive, "imgs", path)
        if shape != (len(indices), SIZE, SIZE):
            raise DataError(f"{path}: imgs has shape {shape}, expected ({len(indices)}, {SIZE}, {SIZE})")
        packed = np.empty((len(indices), SIZE, SIZE // 8), dtype=np.uint8)
        with stream:
            for start in range(0, len(indices), 8192):
                rows = min(8192, len(indices) - start)
                images = _read_rows(stream, dtype, (SIZE, SIZE), rows, path)
                packed[start:start + rows] = np.packbits(images > 0, axis=-1)
    return packed, indices


def official_path(root) -> Path:
    """The official npz: ``root`` itself if it is a file, else looked for in (or downloaded into) the data folder."""
    if root is not None and home_path(root).is_file():
        return home_path(root)
    where = data_root(root)
    check_folders_readable((where.path, where.path / "dsprites"), "dsprites")
    candidates = [where.path / "dsprites" / OFFICIAL_FILE, where.path / OFFICIAL_FILE]
    found = next((c for c in candidates if c.is_file()), None)
    if found is not None:
        return found
    if where.download:
        return download_official(candidates[0].parent, OFFICIAL_URL, OFFICIAL_MD5)
    raise DataError.about('dSprites npz not found: looked for {candidates} (from {source}); download {url} there, or '
                          '{download}, or use the renderer (source = "render")',
                          candidates=" and ".join(map(str, candidates)), source=where.source, url=OFFICIAL_URL,
                          download=download_advice(where, Phrase("leave out {data_root} and unset VAEZOO_DATA")))
