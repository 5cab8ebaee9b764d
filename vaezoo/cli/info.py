"""``vaezoo info``: a whole card."""

from vaezoo.cli.common import add_card, card_arg, print_data, print_json, printable


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="show a model's card")
    add_card(p, "name")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    card = card_arg(args.name)
    if args.json:
        print_json({**card.model_dump(mode="json", exclude_none=True),  # and what the text's header says
                    "path": str(card.path) if card.path else None, "source": card.source})
        return 0
    print_data(f"# {printable(card.path)}")
    if card.source is not None:  # the commit a Hub revision resolved to
        print_data(f"# source: {printable(card.source)}")
    print_data(toml_escaped(card.toml()), end="")
    return 0


def toml_escaped(document: str) -> str:
    """``document`` with every non-printable character but the line breaks written as a TOML ``\\u`` escape.

    tomli_w escapes the ASCII control characters, but leaves C1 controls (``\\x9b`` starts an escape
    sequence on some terminals), bidirectional overrides and line separators as they are. tomli_w writes
    every string and non-bare key as a basic string, where such an escape means the same character.
    """
    return "".join(c if c.isprintable() or c == "\n" else f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF
                   else f"\\U{ord(c):08x}" for c in document)
