"""The ``vaezoo`` command line. Data goes to stdout, status and errors to stderr.

Heavy modules (torch, rich) are imported inside the commands that need them:
``vaezoo list`` reads cards only and must not import torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vaezoo.errors import VaezooError


def _card(name_or_path: str):
    """A card by zoo name, or from a TOML file path."""
    from vaezoo.cards import get_card, parse_card

    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.is_file():
        return parse_card(path)
    return get_card(name_or_path)


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def cmd_train(args) -> int:
    from vaezoo.train import train

    card_path = train(_card(args.card), Path(args.out), data_root=args.data_root, epochs=args.epochs,
                      resume=args.resume, seed=args.seed, device=args.device, max_steps=args.max_steps,
                      checkpoint_every=args.checkpoint_every)
    if card_path is not None:
        print(card_path)
    return 0


def cmd_eval(args) -> int:
    from vaezoo.evaluate import evaluate
    from vaezoo.hub import load_weights
    from vaezoo.weights import load_state_dict

    import vaezoo

    card = _card(args.card)
    model = vaezoo.build_model(card)
    load_weights(model, load_state_dict(card), f"weights of '{card.name}'")
    model.to(args.device or "cpu")
    results = evaluate(model, card, args.data_root, args.device)
    failures = []
    if args.check:
        for name, metric in card.metrics.items():
            got = results.get(name)
            if got is None:
                failures.append(f"{name}: on the card but not computed")
            elif abs(got - metric.value) > args.tolerance * max(1.0, abs(metric.value)):
                failures.append(f"{name}: card {metric.value} vs measured {got:.6f}")
    if args.json:
        _print_json({"name": card.name, "metrics": results, "check": failures if args.check else None})
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table("metric", "measured", "card", title=f"{card.name} (test split)")
        for name, value in results.items():
            on_card = card.metrics.get(name)
            table.add_row(name, f"{value:.6g}", f"{on_card.value:.6g}" if on_card else "")
        Console().print(table)
    if failures:
        print(f"error: {len(failures)} metrics differ from the card beyond tolerance "
              f"{args.tolerance} (relative): " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vaezoo", description="A zoo of disentangled VAEs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train a card's model from its recipe")
    p.add_argument("card", help="a zoo name or a card's TOML file")
    p.add_argument("--out", required=True, help="output directory (checkpoint, weights, completed card)")
    p.add_argument("--data-root", help="folder holding the dataset (default: $VAEZOO_DATA or download)")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs")
    p.add_argument("--seed", type=int, help="override the recipe's seed")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cpu)")
    p.add_argument("--max-steps", type=int, help="stop after this many steps (resumable; no weights written)")
    p.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default: the recipe's)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="evaluate a card's model on the test split")
    p.add_argument("card", help="a zoo name or a card's TOML file")
    p.add_argument("--data-root", help="folder holding the dataset (default: $VAEZOO_DATA or download)")
    p.add_argument("--device", help="cpu, cuda, ... (default: cpu)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--check", action="store_true", help="exit 1 when a metric differs from the card")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="relative tolerance of --check, of max(1, |card value|) (default 1e-4)")
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vaezoo`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except VaezooError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
