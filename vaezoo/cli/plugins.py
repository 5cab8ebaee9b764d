"""``vaezoo plugins``: installed plugins, their hooks and status."""

from vaezoo.cli.common import console, print_json


def add_parser(sub) -> None:
    p = sub.add_parser("plugins", help="list installed plugins and their status")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    import warnings

    from vaezoo.plugins import KINDS, PluginWarning, get_plugins

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)  # failures are shown in the table
        plugins = get_plugins()
        plugins.card_dirs()
        for kind in KINDS:
            plugins.registry(kind)
    rows = [{"name": i.name, "distribution": i.distribution, "builtin": i.builtin, "version": i.version,
             "hooks": i.hooks, "status": i.status, "error": i.error}
            for i in [*plugins.info.values(), *plugins.refused]]
    if args.json:
        print_json(rows)
        return 0
    from rich.table import Table

    table = Table("name", "distribution", "built-in", "version", "hooks", "status")
    for r in rows:
        hooks = ", ".join(h.removeprefix("vaezoo_") for h in r["hooks"])
        status = r["status"] if r["status"] == "ok" else f"[red]{r['status']}[/red]: {r['error']}"
        table.add_row(r["name"], r["distribution"], "yes" if r["builtin"] else "no", r["version"], hooks, status)
    console().print(table)
    return 0
