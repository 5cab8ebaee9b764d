"""``vaezoo plugins``: installed plugins, their hooks and status; ``--parts``: every registered name by kind."""

from vaezoo.cli.common import print_json, print_table, text


def add_parser(sub) -> None:
    p = sub.add_parser("plugins", help="list installed plugins and their status")
    p.add_argument("--parts", action="store_true",
                   help="list every registered name instead: its kind and the plugin that registered it")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    import warnings

    from vaezoo.plugins import KINDS, PluginWarning, get_plugins

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)  # failures are shown in the table
        plugins = get_plugins()
        plugins.card_dirs()
        registries = {kind: plugins.registry(kind) for kind in KINDS}
    if args.parts:
        parts = [{"kind": kind, "name": name, "plugin": registry.plugin_of(name)}
                 for kind, registry in registries.items() for name in registry]
        if args.json:
            print_json(parts)
        else:
            print_table(("kind", "name", "plugin"), [(p["kind"], p["name"], p["plugin"]) for p in parts])
        return 0
    rows = [{"name": i.name, "distribution": i.distribution, "builtin": i.builtin, "version": i.version,
             "hooks": i.hooks, "status": i.status, "error": i.error}
            for i in [*plugins.info.values(), *plugins.refused]]
    if args.json:
        print_json(rows)
        return 0
    from rich.text import Text

    table = []
    for r in rows:
        hooks = ", ".join(r["hooks"])  # as the hookspecs and CONTRIBUTING spell them, as --json does
        status = text(r["status"]) if r["status"] == "ok" else Text.assemble(text(r["status"], "red"), ": ",
                                                                              text(r["error"]))
        table.append((r["name"], r["distribution"], "yes" if r["builtin"] else "no", r["version"], hooks, status))
    print_table(("name", "distribution", "built-in", "version", "hooks", "status"), table)
    return 0
