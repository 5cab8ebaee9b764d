"""Stop signals at random instants of a command's start: what a user who presses Ctrl-C (or a supervisor that
sends SIGTERM) at once gets. A reliability probe, not a timing; docs/RELIABILITY.md gives its last result.

Each try starts ``vaezoo eval jointvae-mnist --metrics cluster_accuracy`` (long enough that every signal lands
before it ends), sends SIGINT or SIGTERM after a random delay in [--from, --to] seconds, and counts the try as
handled when the command exits 130 (SIGINT) or 143 (SIGTERM) with ``error: interrupted`` or ``error: stopped
by SIGTERM`` as its last line, no traceback, and no plugin blamed. The others are printed with their delay.

    OMP_NUM_THREADS=1 python benchmarks/startup_signals.py --tries 40
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess

COMMAND = ["eval", "jointvae-mnist", "--metrics", "cluster_accuracy"]
HANDLED = {signal.SIGINT: (130, "error: interrupted"), signal.SIGTERM: (143, "error: stopped by SIGTERM")}


def one_try(vaezoo: str, delay: float, signum: int) -> tuple[bool, str]:
    """Start the command, signal it after ``delay`` seconds; whether it was handled, and what it did."""
    child = subprocess.Popen([vaezoo, *COMMAND], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        child.communicate(timeout=delay)
    except subprocess.TimeoutExpired:
        pass
    child.send_signal(signum)
    try:
        _, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        return False, "still running 30 s after the signal (the signal was lost)"
    lines = err.strip().splitlines()
    code, last = HANDLED[signum]
    handled = child.returncode == code and lines[-1:] == [last] and "Traceback" not in err and "plugin" not in err
    return handled, f"exit {child.returncode}, last line {lines[-1] if lines else ''!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=40)
    parser.add_argument("--from", dest="earliest", type=float, default=0.05, help="shortest delay, seconds")
    parser.add_argument("--to", dest="latest", type=float, default=1.2, help="longest delay, seconds")
    parser.add_argument("--seed", type=int, default=0, help="of the delays and the signals chosen")
    args = parser.parse_args()
    vaezoo = shutil.which("vaezoo")
    if vaezoo is None:
        parser.error("no vaezoo command on PATH: install vaezoo, or activate its environment")
    draw = random.Random(args.seed)
    handled = 0
    for _ in range(args.tries):
        delay, signum = draw.uniform(args.earliest, args.latest), draw.choice(list(HANDLED))
        ok, what = one_try(vaezoo, delay, signum)
        handled += ok
        if not ok:
            print(f"{signal.Signals(signum).name} after {delay:.2f} s: {what}")
    print(f"{handled} of {args.tries} signals handled (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')})")


if __name__ == "__main__":
    main()
