"""``vaezoo convert``: turn a checkpoint of another codebase into safetensors plus a card."""

from vaezoo.cli.common import path_arg, print_data, printable


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help="convert a checkpoint of another codebase (converters come from plugins)")
    p.add_argument("converter", help="a registered converter, e.g. jointvae-original")
    p.add_argument("path", help="the checkpoint to convert")
    p.add_argument("--dataset", required=True, help="the dataset it was trained on (sets the input geometry)")
    p.add_argument("-o", "--out", type=path_arg, required=True, metavar="DIR",
                   help="output directory for NAME.safetensors and NAME.toml")
    p.add_argument("--name", help="the converted card's name (default: CONVERTER-DATASET-converted); "
                                  "a name of the built-in zoo is refused")
    p.set_defaults(func=run, imports=["torch"])  # imported before the command runs: see cli.main


def run(args) -> int:
    from vaezoo.hub import convert

    print_data(printable(convert(args.converter, args.path, args.dataset, args.out, args.name)))
    return 0
