"""``vaezoo eval``: a card's metrics on the test split, optionally checked against the card."""

import argparse
import math
import sys
from pathlib import Path

from vaezoo.cli.common import card_arg, device_arg, names_arg, print_json, print_table, printable


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a card's model on the test split")
    p.add_argument("card", help="a zoo name, a card's TOML file or a folder holding one card")
    p.add_argument("--data-root", help="folder holding the dataset (default: $VAEZOO_DATA or download)")
    p.add_argument("--device", type=device_arg, help="cpu, cuda, ... (default: cpu)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--check", action="store_true", help="exit 1 when a metric differs from the card")
    p.add_argument("--tolerance", type=tolerance_arg, default=1e-4,
                   help="relative tolerance of --check, of max(1, |card value|) (default 1e-4)")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="evaluate the model in a training checkpoint (OUT/checkpoint.pt of 'vaezoo train') "
                        "at its step, instead of the card's weights")
    p.add_argument("--metrics", type=names_arg, metavar="A,B",
                   help="compute only these registered metrics (e.g. mig_dlib,dci_disentanglement), not the losses; "
                        "--check compares them, --write adds them to the card")
    p.add_argument("--write", action="store_true",
                   help="record the measured metrics on the card's TOML file (e.g. a converted checkpoint's card)")
    p.set_defaults(func=run)


def tolerance_arg(value: str) -> float:
    """A relative tolerance: a finite number >= 0."""
    try:
        tolerance = float(value)
    except ValueError:
        tolerance = math.nan
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise argparse.ArgumentTypeError(f"give a finite number >= 0, e.g. 1e-4, got '{value}'")
    return tolerance


def compare(card_metrics: dict, results: dict[str, float], tolerance: float) -> list[str]:
    """The card's metrics that the measured ``results`` miss or differ from beyond ``tolerance``."""
    failures = []
    for name, metric in card_metrics.items():
        got = results.get(name)
        if got is None:
            failures.append(f"{name}: on the card but not computed")
        elif not _agrees(metric.value, got, tolerance):
            failures.append(f"{name}: card {metric.value} vs measured {got:.6f}")
    return failures


def _agrees(card_value: float, measured: float, tolerance: float) -> bool:
    """Whether ``measured`` is ``card_value`` to within ``tolerance`` of max(1, |card value|); NaN agrees only
    with NaN, an infinity only with itself."""
    if not (math.isfinite(card_value) and math.isfinite(measured)):
        return card_value == measured or (math.isnan(card_value) and math.isnan(measured))
    return abs(measured - card_value) <= tolerance * max(1.0, abs(card_value))


def run(args) -> int:
    from vaezoo.cards import card_reference
    from vaezoo.errors import CardError
    from vaezoo.evaluate import as_metrics, evaluate
    from vaezoo.locks import update_card
    from vaezoo.assemble import load_model

    card = card_arg(args.card)
    if args.check and not card.metrics:
        raise CardError(f"card '{card.name}' has no metrics to --check; 'vaezoo train' writes them")
    if args.write and (args.check or args.checkpoint):
        raise CardError("--write records the card's own weights' metrics: use it without --check and --checkpoint")
    if args.write and card.source is not None:
        raise CardError(f"card {card.name} comes from {card.source}, not from a local card file; --write writes "
                        f"the card's file: give the path of a copy")
    if args.checkpoint:
        from vaezoo.checkpoints import check_model, read_checkpoint

        checkpoint = read_checkpoint(Path(args.checkpoint), fix="pass OUT/checkpoint.pt of a 'vaezoo train' run")
        check_model(checkpoint, card)
        model = load_model(card, args.device, state_dict=checkpoint.model, source=f"checkpoint {args.checkpoint}")
        card = card.model_copy(update={"train": card.train.model_copy(update={"steps": checkpoint.step})})
    else:
        model = load_model(card, args.device)
    results = evaluate(model, card, args.data_root, args.device, metrics=args.metrics)
    checked = card.metrics if args.metrics is None else {k: v for k, v in card.metrics.items() if k in results}
    if args.check and not checked:
        raise CardError(f"card '{card.name}' has none of {', '.join(args.metrics)} to --check; --write records them")
    failures = compare(checked, results, args.tolerance) if args.check else []
    if args.json:
        print_json({"name": card.name, "metrics": results, "check_failures": failures if args.check else None})
    else:
        print_table(("metric", "measured", "card"),
                    [(name, f"{value:.6g}", f"{card.metrics[name].value:.6g}" if name in card.metrics else "")
                     for name, value in results.items()], title=f"{card.name} (test split)")
    if args.write:
        measured = as_metrics(card, results, args.data_root, args.metrics, ref=card_reference(card))

        def record(now):  # the card as it is on disk now: another writer's update meanwhile is kept
            eval_metrics = now.eval_metrics + [n for n in args.metrics or () if n not in now.eval_metrics]
            return now.model_copy(update={"metrics": {**now.metrics, **measured}, "eval_metrics": eval_metrics})

        update_card(card.path, record)
        print(printable(f"wrote {len(results)} metrics to {card.path}"), file=sys.stderr)
    if args.check:
        print(f"check: {len(checked) - len(failures)} of {len(checked)} metrics match the card within "
              f"relative tolerance {args.tolerance:g}", file=sys.stderr)
    if failures:
        print(printable(f"error: {len(failures)} metric(s) differ from the card beyond relative tolerance "
                        f"{args.tolerance:g}: " + "; ".join(failures)), file=sys.stderr)
        return 1
    return 0
