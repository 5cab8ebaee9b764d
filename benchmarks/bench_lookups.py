"""Seconds per zoo name looked up by ``vaezoo verify NAME ...``, by one ``get_card`` each, and by a Tab press that
completes a zoo name, a ``--dataset`` or a metric of ``leaderboard``, beside many cards.

A command given many names reads the card folders once (:func:`vaezoo.entries.catalog.one_scan`), so the cost of
one more name must not grow with the cards beside it. A lookup on its own (``vaezoo.load(NAME)`` in a loop) looks at
every card file again, to see changes, but reads only those that changed. A Tab press is a fresh ``vaezoo`` process
(argcomplete's protocol, as the script of ``vaezoo completion bash`` starts it) that lists the completions of one of
:data:`TABS`; the median of :data:`TAB_PRESSES`. The cards are copies of a small card with one weights file, made in
a temporary folder on ``VAEZOO_CARDS_PATH``.

    python benchmarks/bench_lookups.py                      # 1,000 and 5,000 cards, 10 and 200 names
    python benchmarks/bench_lookups.py --cards 20000 --names 1000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_list import vaezoo_command

CARD = """\
name = "{name}"
architecture = "vae"
summary = "a copy, for timing lookups"
dataset = "mnist"
paper = "none"
license = "MIT"
vaezoo_version = "0.1.0"

[model]
latent = {{ type = "gaussian", dim = 2 }}
regularizers = [{{ type = "beta", beta = 1.0 }}]
encoder = {{ type = "mlp_encoder", hidden = [8] }}
decoder = {{ type = "mlp_decoder", hidden = [8] }}
likelihood = "bernoulli"

[train]
epochs = 1
batch_size = 128
seed = 0

[train.data]
name = "mnist"

[train.optimizer]
name = "Adam"
lr = 0.001

[weights]
file = "weights.safetensors"
sha256 = "{sha256}"
size = {size}
"""
WEIGHTS = b"not a model: verify only hashes it"
LOOKUPS = 20
TAB_PRESSES = 5
TABS = {  # what a Tab completes -> the line typed before it, and a completion it must offer ({last}: the last card)
    "a zoo name": ("vaezoo info {last}", "{last}"),
    "--dataset": ("vaezoo list --dataset mni", "mnist"),
    "a metric of leaderboard": ("vaezoo leaderboard mig_c", "mig_chen"),  # the zoo's cards record it
}


def make_cards(folder: Path, count: int) -> list[str]:
    """``count`` cards named ``lab-NNNNN`` in ``folder``, all naming one weights file there; their names."""
    (folder / "weights.safetensors").write_bytes(WEIGHTS)
    sha256 = hashlib.sha256(WEIGHTS).hexdigest()
    names = [f"lab-{i:05d}" for i in range(count)]
    for name in names:
        (folder / f"{name}.toml").write_text(CARD.format(name=name, sha256=sha256, size=len(WEIGHTS)))
    return names


def tab_press(line: str, expected: str) -> float:
    """Seconds a shell's Tab at the end of ``line`` takes to get its completions, ``expected`` among them."""
    with tempfile.TemporaryDirectory() as folder:
        answer = Path(folder) / "completions"
        env = {**os.environ, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
               "COMP_TYPE": "9", "_ARGCOMPLETE_STDOUT_FILENAME": str(answer)}
        start = time.perf_counter()
        subprocess.run(vaezoo_command(), env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       cwd=folder)
        seconds = time.perf_counter() - start
        if expected not in answer.read_text().split():
            raise SystemExit(f"a Tab after {line!r} did not offer {expected!r}: {answer.read_text()[:200]!r}")
    return seconds


def tab_seconds(line: str, expected: str, last: str) -> float:
    """The median of :data:`TAB_PRESSES` Tabs at the end of ``line`` offering ``expected``, ``{last}`` in either
    standing for the last card's name (cut by its last character in the line)."""
    typed, offered = line.format(last=last[:-1]), expected.format(last=last)
    return statistics.median(tab_press(typed, offered) for _ in range(TAB_PRESSES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=int, nargs="+", default=[1000, 5000], help="cards in the folder")
    parser.add_argument("--names", type=int, nargs="+", default=[10, 200], help="names given to one verify")
    args = parser.parse_args()

    from vaezoo.entries.catalog import get_card
    from vaezoo.entries.entry import verify_names

    for cards in args.cards:
        with tempfile.TemporaryDirectory() as folder:
            names = make_cards(Path(folder), cards)
            os.environ["VAEZOO_CARDS_PATH"] = folder
            verify_names(names[:1])  # every card read and validated once, as a first lookup does
            times = []
            for count in args.names:
                start = time.perf_counter()
                verify_names(names[:count])
                times.append((count, time.perf_counter() - start))
            said = "   ".join(f"{count} names {seconds:.3f} s" for count, seconds in times)
            (few, first), (many, last) = times[0], times[-1]
            per_name = (last - first) / (many - few) if many > few else float("nan")
            start = time.perf_counter()
            for name in names[:LOOKUPS]:
                get_card(name)
            alone = (time.perf_counter() - start) / LOOKUPS
            tabs = "   ".join(f"{what} {tab_seconds(line, expected, names[-1]):.2f} s"
                               for what, (line, expected) in TABS.items())
            print(f"{cards:>6} cards: {said}   each name more {per_name * 1000:.2f} ms   one get_card "
                  f"{alone * 1000:.1f} ms   one Tab press completing {tabs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
