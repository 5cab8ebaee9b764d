"""``vaezoo show``: a pretrained model's latent traversal, reconstructions or samples, as a PNG."""

import sys
from pathlib import Path

from vaezoo.cli.common import (add_card, add_data_root, add_device, card_arg, nonnegative_arg, path_arg, print_data,
                               printable, seed_arg, whole_arg)

DEFAULT_N = {"traverse": 10, "reconstruct": 20, "sample": 100}


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="draw a model's latent traversal, reconstructions or samples as a PNG")
    add_card(p, "name")
    p.add_argument("what", choices=tuple(DEFAULT_N), help="which picture to draw")
    p.add_argument("-o", "--out", type=path_arg, required=True, metavar="FILE.png", help="the PNG file to write")
    add_data_root(p)
    p.add_argument("--no-data", action="store_true",
                   help="traverse without test images: rows in latent order, the rest of the code at each family's "
                        "reference code (a Gaussian's prior mean)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                   help="picks the samples and the test images (default 0)")
    p.add_argument("-n", "--n", type=whole_arg, metavar="N",
                   help="values per traversal row, images to reconstruct, or samples "
                        f"(defaults {', '.join(f'{k} {v}' for k, v in DEFAULT_N.items())})")
    p.add_argument("--span", type=float, nargs=2, metavar=("LOW", "HIGH"),
                   help="traversal range of a family that sweeps in prior standard deviations around the prior mean, "
                        "as a Gaussian does (default -3 3)")
    p.add_argument("--columns", type=whole_arg, default=10, metavar="N",
                   help="images per row of reconstruct and sample (default 10)")
    p.add_argument("--scale", type=whole_arg, default=2, metavar="N",
                   help="upscale each tile this many times (default 2)")
    p.add_argument("--fold-below", type=nonnegative_arg, metavar="NATS",
                   help="leave out the traversal rows whose KL is below NATS (inactive dimensions); needs data")
    add_device(p)
    p.set_defaults(func=run, imports=["torch"])  # imported before the command runs: see cli.main


def run(args) -> int:
    from vaezoo.evaluation.viz import DEFAULT_SPAN, show

    n = DEFAULT_N[args.what] if args.n is None else args.n
    _, notes = show(card_arg(args.name), args.what, n, seed=args.seed, columns=args.columns,
                    span=tuple(args.span) if args.span else DEFAULT_SPAN, data_root=args.data_root,
                    use_data=not args.no_data, fold_below=args.fold_below, device=args.device, out=args.out,
                    scale=args.scale)
    for line in notes:
        print(printable(line), file=sys.stderr)
    print_data(printable(Path(args.out)))
    return 0
