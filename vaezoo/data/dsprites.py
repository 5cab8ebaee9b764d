"""dSprites (Matthey, Higgins, Hassabis & Lerchner, 2017, https://github.com/deepmind/dsprites-dataset).

737,280 binary 64x64 images of a white sprite, every combination of five factors
exactly once, in C order over (shape, scale, orientation, posX, posY):

- shape: square, ellipse, heart (3)
- scale: 6 values in linspace(0.5, 1)
- orientation: 40 values in linspace(0, 2 pi), so the first and last draw the same image
- posX, posY: 32 values each in linspace(0, 1); posX moves right, posY moves down

Two sources give this factor grid: the official npz (read from disk or downloaded,
md5-checked) and a deterministic renderer, which needs no download. The renderer's
geometry (sizes, positions, rotation direction, the heart's outline) was fitted to the
320 frames of the official animation, which the official images may differ from by a few
edge pixels: every frame is matched by a rendered image of its shape at IoU >= 0.95,
median 0.99 (``benchmarks/bench_dsprites.py`` prints the distribution).

Images are kept bit-packed (360 MiB for the grid instead of 2.9 GiB) and unpacked per batch.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from vaezoo.data.base import DataInfo, Dataset, ImageDataset, data_root
from vaezoo.errors import DataError
from vaezoo.files import atomic_save
from vaezoo.progress import progress

OFFICIAL_FILE = "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz"
OFFICIAL_MD5 = "7da33b31b13a06f4b04a70402ce90c2e"
OFFICIAL_URL = f"https://github.com/deepmind/dsprites-dataset/raw/master/{OFFICIAL_FILE}"

FACTOR_NAMES = ("shape", "scale", "orientation", "posX", "posY")
FACTOR_SIZES = (3, 6, 40, 32, 32)
NOMINAL_FACTORS = ("shape",)  # the others are ordered
SHAPES = ("square", "ellipse", "heart")
SIZE = 64
GRID_SIZE = int(np.prod(FACTOR_SIZES))

# Geometry in pixels at scale 1, fitted to the official frames. A sprite's centre is at
# 16 + 32 * pos pixels (the middle half of the image, pixel i spanning [i, i + 1]); it is
# rotated counter-clockwise as seen on screen, about its centre.
SQUARE_HALF_SIDE = 9.6
ELLIPSE_SEMI_AXES = (12.75, 7.225)
HEART_LOBE_CENTRE = (4.742, -3.811)  # the right lobe; the left one is its mirror image
HEART_LOBE_RADII = (4.822, 5.528)
HEART_TIP = 8.607  # the point, below the centre

# The offset of pixel centre j from the centre of a sprite at position k is
# (j + 0.5) - (16 + 32 k / 31) = (31 j - 32 k - 480.5) / 31 pixels: every such offset lies on one
# grid of step 1/31 pixel, FINE_OFFSETS[_PIXEL * j - _POSITION * k + _ORIGIN].
_STEPS = FACTOR_SIZES[3] - 1  # position steps across the range (31)
_PIXEL = _STEPS  # grid steps per pixel
_POSITION = SIZE // 2  # grid steps between neighbouring positions (32)
_ORIGIN = _POSITION * _PIXEL
_FINE = _PIXEL * (SIZE - 1) + _ORIGIN + 1
FINE_OFFSETS = (np.arange(_FINE) - (_FINE - 1) / 2) / _PIXEL


def factor_values() -> list[np.ndarray]:
    """The value of each class of each factor, as the official ``latents_values`` holds them."""
    return [np.arange(1.0, 4.0), np.linspace(0.5, 1, 6), np.linspace(0, 2 * np.pi, 40),
            np.linspace(0, 1, 32), np.linspace(0, 1, 32)]


def factor_classes(indices: np.ndarray | None = None) -> np.ndarray:
    """The factor classes ``(n, 5)`` of grid ``indices`` (default: the whole grid, in order)."""
    indices = np.arange(GRID_SIZE) if indices is None else np.asarray(indices)
    return np.stack(np.unravel_index(indices, FACTOR_SIZES), axis=1).astype(np.int64)


def _heart_body() -> list[tuple[float, float, float]]:
    """The right half of the heart's body below the lobe centres, as half-planes ``a x + b y <= c``.

    Its corners are the tip, the point where the tip's outer tangent touches the lobe, and the
    lobe's centre; its other sides are the line through the lobe centres and the axis (which
    ``|x|`` makes implicit).
    """
    (cx, cy), (rx, ry) = HEART_LOBE_CENTRE, HEART_LOBE_RADII
    # the outer tangent from the tip to the lobe, found where the lobe is a unit circle
    ux, uy = -cx / rx, (HEART_TIP - cy) / ry
    base, half = np.arctan2(uy, ux), np.arccos(1 / np.hypot(ux, uy))
    tangent = max((cx + rx * np.cos(base + s * half), cy + ry * np.sin(base + s * half)) for s in (1, -1))
    corners = [(0.0, HEART_TIP), tangent, (cx, cy)]
    planes = [(y1 - y2, x2 - x1, (y1 - y2) * x1 + (x2 - x1) * y1)  # the side from corner 1 to corner 2
              for (x1, y1), (x2, y2) in zip(corners, corners[1:])]
    return planes + [(0.0, -1.0, -cy)]  # below the lobe centres (y grows downwards)


_BODY = _heart_body()


def _inside(shape: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether points ``(x, y)`` (pixels at scale 1, y down, in the sprite's frame) are inside ``shape``."""
    if shape == 0:
        return np.maximum(np.abs(x), np.abs(y)) <= SQUARE_HALF_SIDE
    if shape == 1:
        a, b = ELLIPSE_SEMI_AXES
        return (x / a) ** 2 + (y / b) ** 2 <= 1
    x = np.abs(x)  # the heart is symmetric about its vertical axis
    (cx, cy), (rx, ry) = HEART_LOBE_CENTRE, HEART_LOBE_RADII
    inside = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1
    body = np.ones_like(inside)
    for a, b, c in _BODY:
        body &= a * x + b * y <= c
    return inside | body


_SCALES = factor_values()[1]
_COS, _SIN = np.cos(factor_values()[2]), np.sin(factor_values()[2])


def _sprite_frame(dx: np.ndarray, dy: np.ndarray, scale, angle):
    """Map offsets from a sprite's centre to its own unrotated, unscaled frame.

    ``scale`` and ``angle`` are class indices; both renderers look them up in the same tables,
    so they compute bit-identical images.
    """
    cos, sin, s = _COS[angle], _SIN[angle], _SCALES[scale]
    return (dx * cos - dy * sin) / s, (dx * sin + dy * cos) / s


def _reach(shape: int) -> float:
    """A radius around the centre that holds the whole sprite at scale 1."""
    if shape == 0:
        return SQUARE_HALF_SIDE * np.sqrt(2)
    if shape == 1:
        return max(ELLIPSE_SEMI_AXES)
    return max(np.hypot(*HEART_LOBE_CENTRE) + max(HEART_LOBE_RADII), HEART_TIP)


def render(indices: np.ndarray) -> np.ndarray:
    """Render the grid images at ``indices``, bit-packed along rows.

    Args:
        indices: grid indices in [0, 737280).

    Returns:
        ``(n, 64, 8)`` uint8, ``np.packbits`` of each row; :func:`unpack` gives the images.
    """
    indices = np.asarray(indices)
    out = np.empty((len(indices), SIZE, SIZE // 8), dtype=np.uint8)
    pixels = np.arange(SIZE)
    with progress("rendering dSprites", len(indices)) as task:
        for start in range(0, len(indices), 1024):  # bounds the float temporaries to ~30 MB each
            shape, scale, angle, px, py = factor_classes(indices[start:start + 1024]).T
            # FINE_OFFSETS lookups keep the arithmetic identical to render_grid's
            dx = FINE_OFFSETS[_PIXEL * pixels[None, None, :] - _POSITION * px[:, None, None] + _ORIGIN]
            dy = FINE_OFFSETS[_PIXEL * pixels[None, :, None] - _POSITION * py[:, None, None] + _ORIGIN]
            images = np.zeros((len(shape), SIZE, SIZE), dtype=bool)
            for s in np.unique(shape):
                chosen = shape == s
                x, y = _sprite_frame(dx[chosen], dy[chosen], scale[chosen, None, None], angle[chosen, None, None])
                images[chosen] = _inside(s, x, y)
            out[start:start + len(shape)] = np.packbits(images, axis=-1)
            task.advance(len(shape))
    return out


def render_block(shape: int, scale: int, orientation: int) -> np.ndarray:
    """Render the 1,024 positions of one (shape, scale, orientation), in the official order.

    The sprite is drawn once on the grid of every pixel centre of every position (step 1/31
    pixel); each position's image is a strided view of that drawing.

    Args:
        shape, scale, orientation: factor classes.

    Returns:
        ``(1024, 64, 8)`` uint8, bit-packed rows, posX-major.
    """
    window = np.flatnonzero(np.abs(FINE_OFFSETS) <= _reach(shape) * _SCALES[scale] + 1)
    lo, hi = window[0], window[-1] + 1
    fine = np.zeros((_FINE, _FINE), dtype=bool)
    x, y = _sprite_frame(FINE_OFFSETS[None, lo:hi], FINE_OFFSETS[lo:hi, None], scale, orientation)
    fine[lo:hi, lo:hi] = _inside(shape, x, y)
    step0, step1 = fine.strides
    # views[a, b, i, j] = fine[31 i + 32 a, 31 j + 32 b]: pixel (i, j) at posY 31 - a, posX 31 - b
    views = np.lib.stride_tricks.as_strided(
        fine, shape=(FACTOR_SIZES[4], FACTOR_SIZES[3], SIZE, SIZE),
        strides=(_POSITION * step0, _POSITION * step1, _PIXEL * step0, _PIXEL * step1), writeable=False)
    packed = np.packbits(np.ascontiguousarray(views[::-1, ::-1].transpose(1, 0, 2, 3)), axis=-1)
    return packed.reshape(FACTOR_SIZES[3] * FACTOR_SIZES[4], SIZE, SIZE // 8)


def render_grid() -> np.ndarray:
    """Render all 737,280 images in the official order: ``(737280, 64, 8)`` uint8, bit-packed rows."""
    block = FACTOR_SIZES[3] * FACTOR_SIZES[4]
    out = np.empty((GRID_SIZE, SIZE, SIZE // 8), dtype=np.uint8)
    with progress("rendering dSprites", GRID_SIZE) as task:
        for n, (shape, scale, orientation) in enumerate(np.ndindex(*FACTOR_SIZES[:3])):
            out[n * block:(n + 1) * block] = render_block(shape, scale, orientation)
            task.advance(block)
    return out


def unpack(packed: np.ndarray) -> np.ndarray:
    """Bit-packed images ``(..., 64, 8)`` -> bool images ``(..., 64, 64)``."""
    return np.unpackbits(packed, axis=-1).astype(bool)


def best_match_iou(frames: np.ndarray, shapes: np.ndarray, grid: np.ndarray | None = None,
                   reach: int = 2) -> np.ndarray:
    """For each binary frame, the IoU of the best-matching grid image of the given shape.

    The search covers every scale and orientation, and the positions within ``reach`` steps of
    the one nearest the centre of the frame's bounding box (a sprite further away overlaps too
    little to compete).

    Args:
        frames: ``(n, 64, 64)``, nonzero where the sprite is.
        shapes: ``(n,)`` shape class of each frame.
        grid: :func:`render_grid`'s output; rendered when None.
        reach: positions searched on each side.

    Returns:
        ``(n,)`` intersection over union of the best match.
    """
    grid = render_grid() if grid is None else grid
    frames = np.asarray(frames) > 0
    best = np.empty(len(frames))
    for f, (frame, shape) in enumerate(zip(frames, shapes)):
        rows, cols = np.nonzero(frame)
        if not len(rows):
            raise ValueError(f"frame {f} is empty")
        near = []
        for low, high in ((cols.min(), cols.max()), (rows.min(), rows.max())):
            nearest = round(((low + high + 1) / 2 - SIZE / 4) * _STEPS / (SIZE / 2))
            near.append(np.arange(max(nearest - reach, 0), min(nearest + reach, _STEPS) + 1))
        grids = np.meshgrid([shape], *map(np.arange, FACTOR_SIZES[1:3]), *near, indexing="ij")
        candidates = grid[np.ravel_multi_index(tuple(g.ravel() for g in grids), FACTOR_SIZES)]
        packed = np.packbits(frame, axis=-1)
        overlap = np.bitwise_count(candidates & packed).sum((1, 2))
        union = np.bitwise_count(candidates | packed).sum((1, 2))
        best[f] = (overlap / union).max()
    return best


@dataclass
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

    def batch(self, index: Tensor | slice, device=None, dtype=torch.float32) -> Tensor:
        """Images at ``index`` as floats in {0, 1} on ``device``, shape ``(B, 1, 64, 64)``."""
        packed = self.images[index].to(device)
        shifts = torch.arange(7, -1, -1, dtype=torch.uint8, device=packed.device)
        return ((packed.unsqueeze(-1) >> shifts) & 1).flatten(-2).to(dtype)


def _from_packed(packed: np.ndarray, indices: np.ndarray) -> DSprites:
    classes = factor_classes(indices)
    values = np.stack([v[c] for v, c in zip(factor_values(), classes.T)], axis=1)
    return DSprites(images=torch.from_numpy(packed).unsqueeze(1), scale=1.0,
                    factors=torch.from_numpy(classes), factor_names=FACTOR_NAMES, nominal_factors=NOMINAL_FACTORS,
                    factor_values=torch.from_numpy(values), indices=torch.from_numpy(np.asarray(indices)))


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
            raise DataError(f"could not download dSprites from {url} ({exc}); fetch {OFFICIAL_FILE} yourself and "
                            f"pass --data-root pointing at it, or use the renderer (source = \"render\")") from None
        if digest.hexdigest() != md5:
            raise DataError(f"dSprites downloaded from {url} has md5 {digest.hexdigest()}, expected {md5}; "
                            f"nothing was written, try again")

    atomic_save(path, fetch)
    return path


def _npz_member(archive: zipfile.ZipFile, name: str, path: Path):
    """Open the array ``name`` of an npz and read its header: ``(stream, shape, dtype)``."""
    try:
        stream = archive.open(f"{name}.npy")
    except KeyError:
        raise DataError(f"{path} has no array '{name}'; is it the official dSprites npz?") from None
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(stream)
    if fortran or dtype.hasobject:
        raise DataError(f"{path}: array '{name}' is not a plain C-order array")
    return stream, shape, dtype


def _read_rows(stream, dtype: np.dtype, row_shape: tuple[int, ...], rows: int) -> np.ndarray:
    count = rows * int(np.prod(row_shape))
    data = np.frombuffer(stream.read(count * dtype.itemsize), dtype=dtype)
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
        if len(shape) != 2 or shape[1] != 6:
            raise DataError(f"{path}: latents_classes has shape {shape}, expected (N, 6)")
        with stream:
            classes = _read_rows(stream, dtype, (6,), shape[0])
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
                packed[start:start + rows] = np.packbits(_read_rows(stream, dtype, (SIZE, SIZE), rows) > 0, axis=-1)
    return packed, indices


def _official_path(root) -> Path:
    """The official npz: ``root`` itself if it is a file, else looked for in (or downloaded into) the data folder."""
    if root is not None and Path(root).expanduser().is_file():
        return Path(root).expanduser()
    where = data_root(root)
    candidates = [where.path / "dsprites" / OFFICIAL_FILE, where.path / OFFICIAL_FILE]
    found = next((c for c in candidates if c.is_file()), None)
    if found is not None:
        return found
    if where.download:
        return download_official(candidates[0].parent, OFFICIAL_URL, OFFICIAL_MD5)
    raise DataError(f"dSprites npz not found: looked for {' and '.join(map(str, candidates))} (from {where.source}); "
                    f"download {OFFICIAL_URL} there, or unset --data-root and VAEZOO_DATA to download it, "
                    f"or use the renderer (source = \"render\")")


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
    packed, indices = load_official(_official_path(root))
    if chosen is not None:
        position = np.full(GRID_SIZE, -1)
        position[indices] = np.arange(len(indices))
        keep = position[chosen]
        if (keep < 0).any():
            raise DataError("the dSprites npz lacks some of the images the subset asks for; use the full file")
        packed, indices = packed[keep], chosen
    return _from_packed(packed, indices)
