"""The dSprites factor grid and a deterministic renderer of it, which needs no download.

737,280 binary 64x64 images of a white sprite, every combination of five factors
exactly once, in C order over (shape, scale, orientation, posX, posY):

- shape: square, ellipse, heart (3)
- scale: 6 values in linspace(0.5, 1)
- orientation: 40 values in linspace(0, 2 pi), so the first and last draw the same image
- posX, posY: 32 values each in linspace(0, 1); posX moves right, posY moves down

The renderer's geometry (sizes, positions, rotation direction, the heart's outline) was fitted
to the 320 frames of the official animation, which the official images may differ from by a few
edge pixels: every frame is matched by a rendered image of its shape at IoU >= 0.95, median 0.99
(``benchmarks/bench_dsprites.py`` prints the distribution). Images come bit-packed
(``np.packbits`` along rows: 360 MiB for the grid instead of 2.9 GiB).
"""

from __future__ import annotations

import numpy as np

from vaezoo.terminal import progress

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
