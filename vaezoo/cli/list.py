"""``vaezoo list``: the zoo as a table (or JSON, or Markdown). Reads cards only; never imports torch."""

import sys

from vaezoo.cli.common import complete_dataset, filter_arg, print_data, print_json, print_table, printable
from vaezoo.terminal import counted, markdown_text


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="list the zoo's models")
    p.add_argument("pattern", nargs="*", metavar="PATTERN",
                   help="shell-style wildcards on the name; a name any of them matches is listed (default: *)")
    p.add_argument("--exclude", action="append", metavar="PATTERN",
                   help="leave out the names this wildcard matches (repeatable), e.g. '*-original-*'")
    p.add_argument("--dataset", type=filter_arg, help="only models trained on this dataset").completer = \
        complete_dataset
    p.add_argument("--arch", type=filter_arg, help="only models of this architecture")
    p.add_argument("--latent", type=filter_arg, metavar="FAMILY",
                   help="only models whose latent has a part of this family (e.g. categorical)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                   help="only models whose model/train field KEY equals VALUE (repeatable), e.g. beta=6")
    p.add_argument("--group", choices=GROUPS,
                   help="one table per architecture, dataset or latent layout (its families)")
    p.add_argument("--skipped", action="store_true", help="list the cards left out, each with its error")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print JSON")
    form.add_argument("--markdown", action="store_true",
                      help="print a Markdown table (the README's zoo table is this output)")
    p.set_defaults(func=run)


GROUPS = ("architecture", "dataset", "latent")
COLUMNS = ("name", "architecture", "dataset", "latent", "parameters", "headline metric")


def _where(items: list[str]) -> dict[str, str]:
    from vaezoo.errors import VaezooError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise VaezooError.of_value("{where} takes KEY=VALUE, got {got!r}", got=item)
        if not key.strip():
            raise VaezooError.of_value("{where} needs a field name before '=', got {got!r}", got=item)
        out[key.strip()] = value.strip()
    return out


def headline(card) -> str:
    """The card's headline metric as ``name value``, with its range over seeds when the card reports one; or ''."""
    metric = card.metrics.get(card.headline or "")
    if not metric:
        return ""
    seeds = metric.seeds
    spread = f" ({seeds.n} seeds: {seeds.min:.4g} to {seeds.max:.4g})" if seeds and seeds.n > 1 else ""
    return f"{card.headline} {metric.value:.4g}{spread}"


def run(args) -> int:
    from vaezoo.entries.catalog import listing

    shown = listing(args.pattern or "*", args.dataset, args.arch, _where(args.where), args.latent, args.exclude)
    found, cards = shown.found, shown.cards
    if args.skipped:
        return _print_skipped(found.skipped, len(found.cards), args.json)
    if found.skipped:
        print(f"{counted(len(found.skipped), 'card')} skipped; run 'vaezoo list --skipped' to see why", file=sys.stderr)
    if not cards and found.cards:
        print(f"no card of the {len(found.cards)} found matches; 'vaezoo list' with no pattern or filter lists them "
              f"all", file=sys.stderr)
    elif not found.cards:  # plugin 'zoo' holds the zoo's cards: an allow-list may leave them out
        print("no card found" + (f": VAEZOO_LOAD_PLUGINS leaves out the installed plugins {', '.join(shown.left_out)} "
                                 f"(plugin 'zoo' holds the built-in entries); add those whose cards you want"
                                 if shown.left_out else ""), file=sys.stderr)
    groups = _groups(cards, args.group)
    if args.json:
        entries = {group: [_entry(c) for c in members] for group, members in groups.items()}
        print_json(entries if args.group else entries[None])
        return 0
    for n, (group, members) in enumerate(groups.items()):
        if group is not None:
            print_data(("\n" if n else "") + printable(f"{args.group} {group} ({len(members)})"))
        if args.markdown:
            print_data(markdown_table(members), end="")
        else:
            print_table(COLUMNS, [(c.name, c.architecture, c.dataset, c.latent_text,
                                   f"{c.parameters:,}" if c.parameters else "", headline(c)) for c in members])
    return 0


def _groups(cards, field: str | None) -> dict:
    """``{group: its cards}``, groups sorted by name (none when no card is left); one group ``None`` when not
    grouping."""
    groups: dict = {}
    for card in cards:
        groups.setdefault(_group_of(card, field), []).append(card)
    return dict(sorted(groups.items(), key=lambda item: str(item[0]))) or ({} if field else {None: []})


def _group_of(card, field: str | None):
    """The group a card falls in: its architecture, its dataset, or its latent families joined by ' + '."""
    if field == "latent":
        return " + ".join(card.latent_families) or "(not stated)"
    return getattr(card, field) if field else None


def _entry(card) -> dict:
    """A card as ``--json`` lists it; ``latent`` is its parts as the card states them (``family``, ``size``,
    ``name`` when the part has one), or None."""
    latent = [part.model_dump(exclude_none=True) for part in card.latent] if card.latent else None
    return {"name": card.name, "architecture": card.architecture, "dataset": card.dataset, "latent": latent,
            "parameters": card.parameters, "headline": card.headline,
            "metrics": {k: m.value for k, m in card.metrics.items()}}


def markdown_table(cards) -> str:
    """The cards as a Markdown table: name, summary, latent layout, parameter count and headline metric.

    Args:
        cards: the cards, in the order of the rows.

    Returns:
        The table, one line per row, ending in a newline.
    """
    lines = ["| name | what it is | latent | parameters | headline metric |", "| --- | --- | --- | --- | --- |"]
    for c in cards:
        cells = [f"`{c.name}`", markdown_text(c.summary), markdown_text(c.latent_text),
                 f"{c.parameters:,}" if c.parameters else "", markdown_text(headline(c))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _print_skipped(skipped, read: int, as_json: bool) -> int:
    """One line per skipped card: its file and why it was left out; none skipped, a note on stderr saying so."""
    if as_json:
        print_json([{"file": str(s.path), "name": s.name, "error": s.reason} for s in skipped])
    else:
        for s in skipped:
            print_data(printable(f"{s.path}: {s.reason}"))
    if not skipped:
        print(f"no card was skipped: the {counted(read, 'card')} found all read", file=sys.stderr)
    return 0
