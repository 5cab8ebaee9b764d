"""Wall time of ``vaezoo list`` next to ``python -c "import torch"``, measured in the same run.

``vaezoo list`` reads cards only and never imports torch, so it should answer in less than a quarter
of the time the torch import alone takes. Each command runs in a fresh process, alternately, after
one untimed warm-up run of each (so both start from a warm file cache); the medians are compared.

    python benchmarks/bench_list.py               # 7 repeats
    python benchmarks/bench_list.py --repeats 15

Exits with status 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_RATIO = 0.25


def vaezoo_command() -> list[str]:
    """The installed ``vaezoo`` console script beside this interpreter, else ``python -m vaezoo``."""
    script = Path(sys.executable).parent / "vaezoo"
    if script.exists():
        return [str(script)]
    found = shutil.which("vaezoo")
    return [found] if found else [sys.executable, "-m", "vaezoo"]


def wall_time(command: list[str]) -> float:
    """Seconds from starting ``command`` to its exit; a failure stops the benchmark."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs of each command (default 7)")
    args = parser.parse_args()

    commands = {"vaezoo list": [*vaezoo_command(), "list"], "import torch": [sys.executable, "-c", "import torch"]}
    for command in commands.values():
        wall_time(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, command in commands.items():
            times[name].append(wall_time(command))

    for name, values in times.items():
        print(f"{name:<13} median {statistics.median(values):.3f} s   min {min(values):.3f} s   "
              f"max {max(values):.3f} s   ({len(values)} runs: {' '.join(f'{v:.3f}' for v in values)})")
    ratio = statistics.median(times["vaezoo list"]) / statistics.median(times["import torch"])
    verdict = "met" if ratio < TARGET_RATIO else "MISSED"
    print(f"ratio (vaezoo list / import torch, medians): {ratio:.3f}   target < {TARGET_RATIO}: {verdict}")
    return 0 if ratio < TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
