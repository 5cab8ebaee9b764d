"""``vaezoo plugins``: installed plugins, their hooks and status."""

from vaezoo.cli.common import print_json, print_table, text


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
    from rich.text import Text

    table = []
    for r in rows:
        hooks = ", ".join(h.removeprefix("vaezoo_") for h in r["hooks"])
        status = text(r["status"]) if r["status"] == "ok" else Text.assemble(text(r["status"], "red"), ": ",
                                                                              text(r["error"]))
        table.append((r["name"], r["distribution"], "yes" if r["builtin"] else "no", r["version"], hooks, status))
    print_table(("name", "distribution", "built-in", "version", "hooks", "status"), table)
    return 0
