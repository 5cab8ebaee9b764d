"""Time the dSprites renderer over the whole grid, and compare it with the official frames.

Renders all 737,280 images (target: under a minute) and reports wall and CPU time (on a
busy machine the CPU time is what an idle one would take). Then, given the 320 frames of the
official animation (``../shared/reference/dsprites/official_gif_frames.npy``), reports the
distribution of each frame's IoU with its best-matching rendered image of the same shape
(target: every frame >= 0.9).

    python benchmarks/bench_dsprites.py
    python benchmarks/bench_dsprites.py --frames PATH/official_gif_frames.npy
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from vaezoo.data import dsprites
from vaezoo.data.dsprites import FACTOR_SIZES, SIZE, render_grid

FRAMES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "dsprites" / "official_gif_frames.npy"
# the official animation shows a heart (frames 0-191), then an ellipse, then a square
GIF_SHAPES = np.array([2] * 192 + [1] * 64 + [0] * 64)
STEPS = FACTOR_SIZES[3] - 1  # position steps across the range (31)


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
            nearest = round(((low + high + 1) / 2 - SIZE / 4) * STEPS / (SIZE / 2))
            near.append(np.arange(max(nearest - reach, 0), min(nearest + reach, STEPS) + 1))
        grids = np.meshgrid([shape], *map(np.arange, FACTOR_SIZES[1:3]), *near, indexing="ij")
        candidates = grid[np.ravel_multi_index(tuple(g.ravel() for g in grids), FACTOR_SIZES)]
        packed = np.packbits(frame, axis=-1)
        overlap = np.bitwise_count(candidates & packed).sum((1, 2))
        union = np.bitwise_count(candidates | packed).sum((1, 2))
        best[f] = (overlap / union).max()
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=Path, default=FRAMES, help=f"official frames (default {FRAMES})")
    args = parser.parse_args()

    wall, cpu = time.perf_counter(), time.process_time()
    grid = dsprites.render_grid()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"render_grid: {len(grid):,} images in {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({grid.nbytes / 2**20:.0f} MiB bit-packed)")

    if not args.frames.is_file():
        print(f"official frames not found at {args.frames}; IoU check skipped")
        return 0
    frames = np.load(args.frames)
    ious = best_match_iou(frames, GIF_SHAPES, grid)
    quantiles = np.percentile(ious, [0, 5, 25, 50, 75, 100])
    print(f"best-match IoU over {len(ious)} official frames: min {quantiles[0]:.3f}  p5 {quantiles[1]:.3f}  "
          f"p25 {quantiles[2]:.3f}  median {quantiles[3]:.3f}  p75 {quantiles[4]:.3f}  max {quantiles[5]:.3f}  "
          f"mean {ious.mean():.3f}; {np.sum(ious >= 0.9)}/{len(ious)} at >= 0.9")
    for shape, name in enumerate(dsprites.SHAPES):
        mine = ious[GIF_SHAPES == shape]
        print(f"  {name:<8} {len(mine):>3} frames: min {mine.min():.3f}  median {np.median(mine):.3f}  "
              f"worst frame {np.flatnonzero(GIF_SHAPES == shape)[mine.argmin()]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
