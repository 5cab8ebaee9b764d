"""``vaezoo uninstall``: uninstall packages, plugins among them, from the Python environment that runs vaezoo
(pip), as ``llm uninstall`` does; then name the plugins they took away. vaezoo itself, and what it needs to start,
are pip's to remove."""

from vaezoo.cli.common import path_arg, printable

HELP = "uninstall packages (plugins) from vaezoo's Python environment with pip"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.description = ("Uninstall distributions with pip. A plugin's name as 'vaezoo plugins' shows it (laplace) "
                     "stands for the distribution that declares it (vaezoo-laplace), as llm uninstall takes the "
                     "names llm plugins shows; vaezoo's built-in plugins go only with vaezoo. Without --yes (or "
                     "PIP_YES=1) pip asks first, so stdin must be a terminal.")
    p.add_argument("packages", nargs="*", metavar="PACKAGE",
                   help="a distribution to remove, e.g. vaezoo-laplace, its wheel file, or a plugin's name "
                        "(its distribution is removed)")
    p.add_argument("-r", "--requirement", action="append", default=[], type=path_arg, metavar="FILE",
                   help="remove the distributions the requirements file FILE lists (may be given more than once)")
    p.add_argument("-y", "--yes", action="store_true",
                   help="remove them without asking first (needed where stdin is not a terminal, unless PIP_YES says "
                        "yes)")


def run(args) -> int:
    from vaezoo.extras.installer import uninstall

    done = uninstall(args.packages, requirements=args.requirement, yes=args.yes)
    for plugin in done.removed:
        print(printable(f"plugin removed: {plugin.name} ({plugin.distribution} {plugin.version})"))
    if not done.removed:
        print("no plugin removed")
    return 0
