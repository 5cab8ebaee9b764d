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

FRAMES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "dsprites" / "official_gif_frames.npy"
# the official animation shows a heart (frames 0-191), then an ellipse, then a square
GIF_SHAPES = np.array([2] * 192 + [1] * 64 + [0] * 64)


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
    ious = dsprites.best_match_iou(frames, GIF_SHAPES, grid)
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
