"""``vaezoo gallery``: a static HTML page of every card in the zoo, with traversals and samples."""

from vaezoo.cli.common import (add_data_root, add_device, data_alone_on_stdout, path_arg, print_data, printable,
                               seed_arg)

HELP = "write a static HTML page of the zoo (opens from disk, no server)"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.add_argument("directory", type=path_arg, metavar="DIR",
                   help="where index.html and its images go; the images an earlier gallery drew there of cards it "
                        "no longer draws are removed (not a file of yours)")
    add_data_root(p)
    p.add_argument("--no-data", action="store_true",
                   help="draw traversals without test images: rows in latent order, other dimensions at the prior")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                   help="picks the samples and the test images (default 0)")
    add_device(p)
    p.add_argument("--only-seeds", action="store_true",
                   help="write only the seed distributions (one SVG per dataset and metric with a spread over "
                        "seeds), from the cards alone, e.g. into docs/zoo; no page, no model is run")


def run(args) -> int:
    from vaezoo.extras.gallery import gallery

    with data_alone_on_stdout():  # what a part prints meanwhile goes to stderr
        paths = gallery(args.directory, args.only_seeds, data_root=args.data_root, use_data=not args.no_data,
                        device=args.device, seed=args.seed)
    for path in paths:
        print_data(printable(path))
    return 0
