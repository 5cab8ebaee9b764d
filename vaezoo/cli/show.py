"""``vaezoo show``: a pretrained model's latent traversal, reconstructions or samples, as a PNG."""

import sys

from vaezoo.cli.common import (
    add_card,
    add_data_root,
    add_device,
    card_arg,
    nonnegative_arg,
    path_arg,
    printable,
    seed_arg,
)

DEFAULT_N = {"traverse": 10, "reconstruct": 20, "sample": 100}


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="draw a model's latent traversal, reconstructions or samples as a PNG")
    add_card(p, "name")
    p.add_argument("what", choices=("traverse", "reconstruct", "sample"), help="which picture to draw")
    p.add_argument("-o", "--out", type=path_arg, required=True, metavar="FILE.png", help="the PNG file to write")
    add_data_root(p)
    p.add_argument("--no-data", action="store_true",
                   help="traverse without test images: rows in latent order, the rest of the code at each family's "
                        "reference code (a Gaussian's prior mean)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                   help="picks the samples and the test images (default 0)")
    p.add_argument("-n", "--n", type=int, metavar="N",
                   help="values per traversal row, images to reconstruct, or samples "
                        f"(defaults {', '.join(f'{k} {v}' for k, v in DEFAULT_N.items())})")
    p.add_argument("--span", type=float, nargs=2, metavar=("LOW", "HIGH"),
                   help="traversal range of a family that sweeps in prior standard deviations around the prior mean, "
                        "as a Gaussian does (default -3 3)")
    p.add_argument("--columns", type=int, default=10, metavar="N",
                   help="images per row of reconstruct and sample (default 10)")
    p.add_argument("--scale", type=int, default=2, metavar="N", help="upscale each tile this many times (default 2)")
    p.add_argument("--fold-below", type=nonnegative_arg, metavar="NATS",
                   help="leave out the traversal rows whose KL is below NATS (inactive dimensions); needs data")
    add_device(p)
    p.set_defaults(func=run, imports=["torch"])  # imported before the command runs: see cli.main


def run(args) -> int:
    from vaezoo.assemble import card_dataset, load_model
    from vaezoo.errors import VaezooError
    from vaezoo.evaluation import viz

    card = card_arg(args.name)
    n = DEFAULT_N[args.what] if args.n is None else args.n
    if args.no_data and args.what == "reconstruct":
        raise VaezooError("reconstruct needs test images; drop --no-data")
    if args.fold_below is not None and (args.no_data or args.what != "traverse"):
        raise VaezooError("--fold-below folds traversal rows by their KL over test images; give it to traverse "
                          "without --no-data")
    span = viz.check_span(tuple(args.span) if args.span else viz.DEFAULT_SPAN)  # before the model is loaded
    model = load_model(card, args.device)
    if args.what == "sample":
        grid = viz.sample(model, n, seed=args.seed, columns=args.columns)
    elif args.what == "reconstruct":
        images = viz.data_sample(card_dataset(card, args.data_root), n, args.seed)
        grid = viz.reconstruct(model, images, args.columns)
    elif args.no_data:
        grid = viz.traverse(model, steps=n, span=span)
    else:
        test_split = card_dataset(card, args.data_root)
        grid = viz.traverse_dataset(model, test_split, seed=args.seed, steps=n, span=span)
        if args.fold_below is not None:
            grid, folded = viz.fold_inactive(grid, args.fold_below)
            print(printable(f"{len(folded)} rows with KL below {args.fold_below:g} nats left out"), file=sys.stderr)
        print(f"rows ordered by KL averaged over {min(viz.KL_IMAGES, len(test_split))} test images "
              f"(seed {args.seed}); other dimensions at the code of the first of them", file=sys.stderr)
    print(printable(grid.save(args.out, scale=args.scale)))
    return 0
