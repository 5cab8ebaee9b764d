"""``vaezoo seeds``: a card's metrics over runs of its recipe with other seeds, optionally written on the card."""

import sys

from vaezoo.cli.common import add_card, names_arg, path_arg, print_json, print_table, printable, recorded_path
from vaezoo.evaluation.seeds import DEFAULT_SELECTION
from vaezoo.terminal import counted, note, shell_join


def add_parser(sub) -> None:
    p = sub.add_parser("seeds", help="a card's metrics over runs of its recipe, one per seed",
                       description="Spread a card's metrics over runs of its recipe with other seeds: n, median, "
                                   "min, max and each seed's value. The card counts as the run of its own seed; "
                                   "each RUN must be the card's recipe with another seed (vaezoo train CARD "
                                   "--seed N --out DIR writes one). With no RUN: the spreads the card records.")
    add_card(p)
    p.add_argument("runs", nargs="*", metavar="RUN", type=path_arg,
                   help="a run folder holding one completed card (as vaezoo train writes it) or a card file; none: "
                        "print the spreads recorded on the card")
    p.add_argument("--metrics", type=names_arg, metavar="A,B",
                   help="the metrics to spread (default: the card's eval_metrics that every run records)")
    p.add_argument("--write", action="store_true", help="record the spreads on the card's TOML file")
    p.add_argument("--selection", default=DEFAULT_SELECTION,
                   help=f"how the card's seed was chosen, recorded with --write (default: '{DEFAULT_SELECTION}')")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.evaluation.seeds import seed_report

    report = seed_report(args.card, args.runs, args.metrics, args.selection, measured_by(args), write=args.write)
    try:
        _report(args, report)
    except KeyboardInterrupt:  # the card is written whole (atomic_write) before this: say so, or it seems lost
        if report.written is not None:
            note(f"the spread over {counted(len(report.runs), 'seed')} of {', '.join(report.metrics)} was written to "
                 f"{report.card.path} before the interruption; the card is whole")
        raise
    return 0


def _report(args, report) -> None:
    card, found = report.card, report.spreads
    if report.left_out:
        print(printable(f"left out, not a finite number in every run (missing, NaN or infinite): "
                        f"{', '.join(report.left_out)}"), file=sys.stderr)
    title = (f"{card.name}: {counted(len(report.runs), 'seed')}, the card's is {card.train.seed}" if report.runs else
             f"{card.name}: the spreads over seeds the card records, its seed is {card.train.seed}")
    _print(args, card, found, title)
    if args.write:
        print(printable(f"wrote the spread over {counted(len(report.runs), 'seed')} of {', '.join(report.metrics)} to "
                        f"{card.path}"), file=sys.stderr)


def _print(args, card, found: dict, title: str) -> None:
    if args.json:
        print_json({"name": card.name, "shipped": card.train.seed, "metrics": {
            name: s.model_dump(include={"n", "median", "min", "max", "runs"}) for name, s in found.items()}})
    else:
        print_table(("metric", "n", "median", "min", "max", "by seed"),
                    [(name, s.n, f"{s.median:.6g}", f"{s.min:.6g}", f"{s.max:.6g}",
                      "  ".join(f"s{r.seed} {r.value:.6g}" for r in s.runs)) for name, s in found.items()],
                    title=title)


def measured_by(args) -> str:
    """The ``vaezoo seeds`` command line that was run (its ``--selection`` and ``--json`` aside), as the card
    records it."""
    seeds = ["vaezoo", "seeds", *(recorded_path(path) for path in (args.card, *args.runs))]
    if args.metrics:
        seeds += ["--metrics", ",".join(args.metrics)]
    if args.write:
        seeds.append("--write")
    return shell_join(seeds, for_terminal=False)
