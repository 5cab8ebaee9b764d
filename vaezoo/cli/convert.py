"""``vaezoo convert``: turn a checkpoint of another codebase into safetensors plus a card."""

from pathlib import Path

from vaezoo.cli.common import path_arg, printable


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


def _card_name(args) -> str:
    """The name the converted card gets: ``--name``, or ``CONVERTER-DATASET-converted``; never a zoo entry's."""
    from vaezoo.entries.catalog import new_card_name

    default = f"{args.converter}-{args.dataset}-converted".lower().replace("_", "-")
    return new_card_name(default if args.name is None else args.name, "the converted card")


def run(args) -> int:
    from vaezoo.assemble import converter
    from vaezoo.store.locks import refuse_finished_run, run_lock

    name = _card_name(args)
    convert = converter(args.converter)
    out = Path(args.out)
    refuse_finished_run(out, name)  # before the folder is made: a file in its place is named as such
    with run_lock(out):
        refuse_finished_run(out, name)  # again, now that no other run can write there
        card_path = convert(Path(args.path), out, dataset=args.dataset, name=name)
    print(printable(card_path))
    return 0
