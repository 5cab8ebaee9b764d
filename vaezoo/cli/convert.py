"""``vaezoo convert``: turn a checkpoint of another codebase into safetensors plus a card."""

from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help="convert a checkpoint of another codebase (converters come from plugins)")
    p.add_argument("converter", help="a registered converter, e.g. jointvae-original")
    p.add_argument("path", help="the checkpoint to convert")
    p.add_argument("--dataset", required=True, help="the dataset it was trained on (sets the input geometry)")
    p.add_argument("--out", required=True, help="output directory for NAME.safetensors and NAME.toml")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.plugins import registry

    card_path = registry("converter")[args.converter](Path(args.path), Path(args.out), dataset=args.dataset)
    print(card_path)
    return 0
