"""``vaezoo uninstall``: uninstall packages, plugins among them, from the Python environment that runs vaezoo
(pip), as ``llm uninstall`` does; then name the plugins they took away. vaezoo itself is pip's to remove."""

from vaezoo.cli.common import printable


def add_parser(sub) -> None:
    p = sub.add_parser("uninstall", help="uninstall packages (plugins) from vaezoo's Python environment with pip")
    p.add_argument("packages", nargs="+", metavar="PACKAGE", help="a distribution to remove, e.g. vaezoo-laplace")
    p.add_argument("-y", "--yes", action="store_true", help="remove them without asking first")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.installer import uninstall

    done = uninstall(args.packages, yes=args.yes)
    for plugin in done.removed:
        print(printable(f"plugin removed: {plugin.name} ({plugin.distribution} {plugin.version})"))
    if not done.removed:
        print("no plugin removed")
    return 0
