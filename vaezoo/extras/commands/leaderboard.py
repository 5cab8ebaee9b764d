"""``vaezoo leaderboard``: the zoo's entries side by side on chosen metrics, as their cards record them."""

import math

from vaezoo.cli.common import complete_dataset, filter_arg, names_arg, print_json, print_table

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
                   help="metrics recorded on the cards, e.g. mig_chen,mig_dlib,betavae_score").completer = \
        complete_metrics
    p.add_argument("--dataset", type=filter_arg, help="only models trained on this dataset").completer = \
        complete_dataset
    p.add_argument("--json", action="store_true",
                   help="print JSON: a value that is not a finite number is null, spelled in the row's not_finite "
                        "map (nan, inf, -inf)")


def complete_metrics(prefix: str, **_) -> list[str]:
    """The completions of ``METRIC[,METRIC...]``: the metrics the card files record that begin the last name of
    ``prefix`` and are not given before it (a path is never one), read off their text
    (:func:`vaezoo.entries.catalog.card_glances`: a metric's name is a bare TOML key, so never holds a control
    character or a comma)."""
    from vaezoo.entries.catalog import card_glances

    given, comma, last = prefix.rpartition(",")
    names = {name for card in card_glances() for name in card.metrics}
    return sorted(given + comma + name for name in names if name.startswith(last) and name not in given.split(","))


def run(args) -> int:
    from vaezoo.extras.leaderboard import zoo_leaderboard

    rows = zoo_leaderboard(args.metrics, args.dataset)
    if args.json:
        print_json([_json_row(r, args.metrics) for r in rows])
        return 0
    print_table(("name", "dataset", *args.metrics),
                [(r.name, r.dataset, *("" if v is None else f"{v:.4g}" for v in r.values)) for r in rows])
    return 0


def _json_row(row, metrics: list[str]) -> dict:
    """A ranked card as JSON: its values, and beside them the ones JSON writes as null though the card records
    them (NaN, inf), spelled as TOML writes them, as ``vaezoo eval --json`` spells them."""
    values = dict(zip(metrics, row.values))
    spelled = {name: str(v) for name, v in values.items() if v is not None and not math.isfinite(v)}
    return {"name": row.name, "dataset": row.dataset, "metrics": values, "not_finite": spelled}
