"""Time ``vaezoo.load`` adds beyond ``import torch``, for each zoo entry.

Each measurement is a fresh process that imports torch (timed), then calls ``vaezoo.load(name)`` (timed:
importing vaezoo and its plugins, reading and validating the cards, building the model, verifying the
weights' sha256 and loading them), then loads the same name again (timed: the cost once everything is
imported). Entries whose card has no weights yet load with ``pretrained=False``, and the output says so.
One untimed run per entry comes first, so a URL's weights are in the cache and files are in the page cache.

    python benchmarks/bench_load.py                       # every zoo entry, 5 repeats
    python benchmarks/bench_load.py "jointvae-*" --repeats 9
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = """
import json, sys, time
name, pretrained = sys.argv[1], sys.argv[2] == "1"
start = time.perf_counter()
import torch
torch_done = time.perf_counter()
import vaezoo
vaezoo.load(name, pretrained=pretrained)
first_done = time.perf_counter()
vaezoo.load(name, pretrained=pretrained)
again_done = time.perf_counter()
print(json.dumps({"torch": torch_done - start, "load": first_done - torch_done, "again": again_done - first_done}))
"""


def probe(name: str, pretrained: bool) -> dict[str, float]:
    """One fresh-process measurement of ``name``."""
    result = subprocess.run([sys.executable, "-c", PROBE, name, "1" if pretrained else "0"],
                            check=True, capture_output=True, text=True)
    return json.loads(result.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pattern", nargs="?", default="*", help="shell-style wildcard on zoo names (default: *)")
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per entry (default 5)")
    args = parser.parse_args()

    import vaezoo

    names = vaezoo.list_models(args.pattern)
    if not names:
        print(f"no zoo entry matches '{args.pattern}'", file=sys.stderr)
        return 1
    print(f"{'entry':<28} {'weights':<11} {'import torch':>12} {'load (first)':>13} {'load (again)':>13}   (medians of "
          f"{args.repeats} fresh processes, seconds)")
    for name in names:
        pretrained = vaezoo.get_card(name).weights is not None
        probe(name, pretrained)
        runs = [probe(name, pretrained) for _ in range(args.repeats)]
        median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(f"{name:<28} {'pretrained' if pretrained else 'none yet':<11} {median['torch']:>12.3f} "
              f"{median['load']:>13.3f} {median['again']:>13.3f}")
        each = " ".join(f"{run['load']:.3f}" for run in runs)
        print(f"{'':<40} load (first) of each run: {each}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
