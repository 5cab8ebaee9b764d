"""``vaezoo leaderboard``: the zoo's entries side by side on chosen metrics, as their cards record them."""

from vaezoo.cli.common import names_arg, print_json, print_table

HELP = "the zoo's entries side by side on chosen metrics"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.description = ("The cards that record any of the metrics, ranked on the first, best first in "
                     "its direction (the lowest first for the losses and for a metric recorded or "
                     "registered as lower-better, the highest for the others), then on the next; a "
                     "card without a value, or with one that is not a finite number (NaN, inf), after those "
                     "with one; ties in name order. A metric that no card (of --dataset) records is an error "
                     "naming the recorded metric closest to it.")
    p.add_argument("metrics", type=names_arg, metavar="METRIC[,METRIC...]",
                   help="metrics recorded on the cards, e.g. mig_chen,mig_dlib,betavae_score")
    p.add_argument("--dataset", help="only models trained on this dataset")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    from vaezoo.extras.leaderboard import zoo_leaderboard

    rows = zoo_leaderboard(args.metrics, args.dataset)
    if args.json:
        print_json([{"name": r.name, "dataset": r.dataset, "metrics": dict(zip(args.metrics, r.values))}
                    for r in rows])
        return 0
    print_table(("name", "dataset", *args.metrics),
                [(r.name, r.dataset, *("" if v is None else f"{v:.4g}" for v in r.values)) for r in rows])
    return 0
