"""``vaezoo seeds``: a card's metrics over runs of its recipe with other seeds, optionally written on the card."""

import shlex
import sys
from pathlib import Path

from vaezoo.cli.common import card_arg, names_arg, print_json, print_table, printable

DEFAULT_SELECTION = "the recipe's seed, fixed before any run; not chosen by its score"


def add_parser(sub) -> None:
    p = sub.add_parser("seeds", help="a card's metrics over runs of its recipe, one per seed",
                       description="Spread a card's metrics over runs of its recipe with other seeds: n, median, "
                                   "min, max and each seed's value. The card counts as the run of its own seed; "
                                   "each RUN must be the card's recipe with another seed (vaezoo train CARD "
                                   "--seed N --out DIR writes one).")
    p.add_argument("card", metavar="CARD", help="a zoo name, a card's TOML file or a folder holding one card")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="a run folder holding one completed card (as vaezoo train writes it) or a card file")
    p.add_argument("--metrics", type=names_arg, metavar="A,B",
                   help="the metrics to spread (default: the card's eval_metrics that every run records)")
    p.add_argument("--write", action="store_true", help="record the spreads on the card's TOML file")
    p.add_argument("--selection", default=DEFAULT_SELECTION,
                   help=f"how the card's seed was chosen, recorded with --write (default: '{DEFAULT_SELECTION}')")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.errors import CardError, VaezooError
    from vaezoo.locks import update_card
    from vaezoo.seeds import choose_metrics, collect_runs, spreads, with_spreads

    if not args.selection.strip():
        raise VaezooError("--selection is empty; say how the card's seed was chosen")
    card = card_arg(args.card)
    if args.write and card.source is not None:
        raise CardError(f"card {card.name} comes from {card.source}, not from a local card file; --write writes "
                        f"the card's file: give the path of a copy")
    runs = collect_runs(card, args.runs)
    metrics, left_out = choose_metrics(card, runs, args.metrics)
    if left_out:
        print(printable(f"left out, not a finite number in every run (missing, NaN or infinite): "
                        f"{', '.join(left_out)}"), file=sys.stderr)
    found = spreads(card, runs, metrics, args.selection, command(args, card.path))
    if args.json:
        print_json({"card": card.name, "shipped": card.train.seed, "metrics": {
            name: s.model_dump(include={"n", "median", "min", "max", "runs"}) for name, s in found.items()}})
    else:
        print_table(("metric", "n", "median", "min", "max", "by seed"),
                    [(name, s.n, f"{s.median:.6g}", f"{s.min:.6g}", f"{s.max:.6g}",
                      "  ".join(f"s{r.seed} {r.value:.6g}" for r in s.runs)) for name, s in found.items()],
                    title=f"{card.name}: {len(runs)} seeds, the card's is {card.train.seed}")
    if args.write:
        update_card(card.path, lambda now: with_spreads(now, found))  # keeps another writer's update meanwhile
        print(printable(f"wrote the spread over {len(runs)} seeds of {', '.join(metrics)} to {card.path}"),
              file=sys.stderr)
    return 0


def command(args, card_path: Path | None) -> str:
    """How each run was made and measured: the ``vaezoo train`` pattern, then the ``vaezoo seeds`` command line.

    The train command names the card by its path relative to the working folder when it lies inside it,
    else as it was given; the seeds command is the one run (its ``--selection`` and ``--json`` aside).
    """
    card = args.card
    if card_path is not None and card_path.is_relative_to(Path.cwd()):
        card = str(card_path.relative_to(Path.cwd()))
    seeds = ["vaezoo", "seeds", args.card, *args.runs]
    if args.metrics:
        seeds += ["--metrics", ",".join(args.metrics)]
    if args.write:
        seeds.append("--write")
    return f"vaezoo train {shlex.quote(card)} --seed N --out DIR for each run, then {shlex.join(seeds)}"
