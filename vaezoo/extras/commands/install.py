"""``vaezoo install``: install packages, plugins among them, into the Python environment that runs vaezoo (pip),
as ``llm install`` does; then name the plugins they added."""

from vaezoo.cli.common import path_arg, printable

HELP = "install packages (plugins) into vaezoo's Python environment with pip"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.add_argument("packages", nargs="*", metavar="PACKAGE",
                   help="what pip installs: a name with an optional version (vaezoo-laplace>=0.2), a path or a URL")
    p.add_argument("-U", "--upgrade", action="store_true", help="upgrade the packages to their newest version")
    p.add_argument("-e", "--editable", type=path_arg, metavar="PATH",
                   help="install the project at PATH in editable mode")
    p.add_argument("--force-reinstall", action="store_true",
                   help="reinstall the packages even when they are up to date")
    p.add_argument("--no-cache-dir", action="store_true", help="leave pip's cache alone")
    p.add_argument("--pre", action="store_true", help="take pre-release and development versions too")


def run(args) -> int:
    from vaezoo.extras.installer import install

    done = install(args.packages, upgrade=args.upgrade, editable=args.editable,
                   force_reinstall=args.force_reinstall, no_cache_dir=args.no_cache_dir, pre=args.pre)
    for plugin in done.added:
        print(printable(f"plugin added: {plugin.name} ({plugin.distribution} {plugin.version}, "
                        f"module {plugin.module})"))
    if not done.added:
        print("no plugin added: what pip installed registers no new entry point in the group 'vaezoo'")
    return 0
