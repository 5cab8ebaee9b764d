"""What a run of ``device_kernels.py`` says of each formulation as a whole: per ensemble size, precision and layout,
the time of the three passes of every layer added up per formulation, how many layer-and-pass cells each wins, and
the sum of the fastest of each cell (what choosing a formulation cell by cell would give).

    python benchmarks/kernels_summary.py benchmarks/results/2026-11-29-h200-kernels/kernels.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

PASSES = ("forward", "input_grad", "weight_grad")


def summary(report: dict) -> list[dict]:
    """One row per (members, precision, layout): ``ms`` per formulation, ``wins`` per formulation, ``best`` ms."""
    rows = []
    for members in report["meta"]["members"]:
        for dtype in report["meta"]["dtypes"]:
            for layout in report["meta"]["layouts"]:
                total, wins, best = defaultdict(float), Counter(), 0.0
                for layer in (e for e in report["layers"] if e["members"] == members):
                    shown = layout if layer["kind"] != "linear" else "nchw"  # a linear layer has no layout
                    results = [r for r in layer["results"] if r["dtype"] == dtype and r["layout"] == shown]
                    for name in PASSES:
                        for record in results:
                            total[record["formulation"]] += record["ms"][name]
                        fastest = min(results, key=lambda r: r["ms"][name])
                        best += fastest["ms"][name]
                        wins[fastest["formulation"]] += 1
                rows.append({"members": members, "dtype": dtype, "layout": layout, "ms": dict(total),
                             "wins": dict(wins), "best": best})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", type=Path, help="a kernels.json (or kernels.json.gz) of device_kernels.py")
    path = parser.parse_args(argv).kernels
    report = json.loads((gzip.open if path.suffix == ".gz" else open)(path, "rt").read())
    for row in summary(report):
        sums = ", ".join(f"{name} {ms:.1f}" for name, ms in sorted(row["ms"].items(), key=lambda kv: kv[1]))
        wins = ", ".join(f"{name} {n}" for name, n in sorted(row["wins"].items(), key=lambda kv: -kv[1]))
        print(f"{row['members']} members {row['dtype']} {row['layout']}: ms {sums}; "
              f"fastest of each cell {row['best']:.1f} ({wins} cells)")


if __name__ == "__main__":
    main()
