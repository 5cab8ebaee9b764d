"""``vaezoo info``: a whole card."""

from vaezoo.cli.common import card_arg, print_json


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="show a model's card")
    p.add_argument("name", help="a zoo name or a card's TOML file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    card = card_arg(args.name)
    if args.json:
        print_json(card.model_dump(mode="json", exclude_none=True))
        return 0
    import tomli_w

    print(f"# {card.path}")
    print(tomli_w.dumps(card.model_dump(mode="json", exclude_none=True)), end="")
    return 0
