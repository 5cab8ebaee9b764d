"""``vaezoo study``: the dSprites study's table (CSV), its figures (SVG) and the numbers of its page."""

from vaezoo.cli.common import data_alone_on_stdout, path_arg, print_data, printable

HELP = "write the dSprites study's table, figures and page numbers from cards"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.description = ("Gather every run of the study's methods into one table (DIR/dsprites.csv: method, value, seed, "
                     "steps, precision and every metric; a zoo entry gives a row per seed of its recorded spreads, a "
                     "run folder's card its own row), draw from it each metric's distribution per method and value "
                     "and MIG against beta per method (SVG), and with --doc fill the page's <!-- study:NAME --> "
                     "blocks: the variance shares, the released model among the seeds, the seed-selection rule, "
                     "the grid's commands and the weights' sizes.")
    p.add_argument("directory", type=path_arg, metavar="DIR", help="where the table and figures go, e.g. docs/study")
    p.add_argument("sources", nargs="*", type=path_arg, metavar="SOURCE",
                   help="zoo names, card files, run folders or folders of runs (their cards are found below them); "
                        "default: the study's zoo entries")
    p.add_argument("--doc", type=path_arg, metavar="PAGE",
                   help="a Markdown page whose study blocks get the numbers, e.g. docs/study.md")


def run(args) -> int:
    from vaezoo.extras.study import build_study

    with data_alone_on_stdout():  # what a part prints meanwhile goes to stderr
        result = build_study(args.directory, args.sources, args.doc)
    for path in (result.table, *result.figures, *([result.doc] if result.doc else [])):
        print_data(printable(path))
    return 0
