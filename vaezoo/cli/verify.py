"""``vaezoo verify``: check the sha256 of every weights file."""

import sys

from vaezoo.cli.common import complete_card, print_data, print_json, printable


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="check the sha256 of models' weights files",
                       description="Check the size and sha256 of models' weights files: a row per card. Weights at "
                                   "a URL are not downloaded (their row says 'not cached' until a load fetches them); "
                                   "those of a Hub repository's card (hf-hub:OWNER/REPO) are, as a load would. Exit "
                                   "code 1 when a file fails, a card cannot be read, a name names no card, or no card "
                                   "is found.")
    p.add_argument("names", nargs="*",
                   help="zoo names, card files or folders holding one card (default: every card)").completer = \
        complete_card
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.entries.entry import ERROR, SKIPPED, verify_names

    rows = [{"name": name, "status": status, "detail": detail} for name, status, detail in verify_names(args.names)]
    failed = sum(r["status"] == "FAILED" for r in rows)
    skipped = sum(r["status"] == SKIPPED for r in rows)
    unread = sum(r["status"] == ERROR for r in rows)
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print_data(printable(f"{r['name']}: {r['status']} {r['detail']}"))
    if failed or skipped or unread:
        said = [f"{failed} weights file(s) failed verification"] if failed else []
        said += [f"{skipped} card(s) could not be read, so their weights were not verified ('vaezoo list --skipped' "
                 f"says why)"] if skipped else []
        said += [f"{unread} name(s) could not be read as a card, so nothing was verified for them (each {ERROR} row "
                 f"says why)"] if unread else []
        print(f"error: {'; '.join(said)}", file=sys.stderr)
        return 1
    return 0
