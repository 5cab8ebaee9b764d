"""``vaezoo leaderboard``: the zoo's entries side by side on chosen metrics, as their cards record them."""

from vaezoo.cli.common import names_arg, print_json, print_table


def add_parser(sub) -> None:
    p = sub.add_parser("leaderboard", help="the zoo's entries side by side on chosen metrics")
    p.add_argument("metrics", type=names_arg, metavar="METRIC[,METRIC...]",
                   help="metrics recorded on the cards, e.g. mig_chen,mig_dlib,betavae_score")
    p.add_argument("--dataset", help="only models trained on this dataset")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.entries.catalog import list_cards
    from vaezoo.errors import VaezooError
    from vaezoo.leaderboard import leaderboard

    rows = leaderboard(list_cards(dataset=args.dataset), args.metrics)
    if not rows:
        raise VaezooError(f"no card records {', '.join(args.metrics)}; 'vaezoo info NAME' lists a card's metrics")
    if args.json:
        print_json([{"name": r.name, "dataset": r.dataset, "metrics": dict(zip(args.metrics, r.values))}
                    for r in rows])
        return 0
    print_table(("name", "dataset", *args.metrics),
                [(r.name, r.dataset, *("" if v is None else f"{v:.4g}" for v in r.values)) for r in rows])
    return 0
