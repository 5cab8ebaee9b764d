"""Helpers shared by the CLI commands."""

from __future__ import annotations

import json
from pathlib import Path


def card_arg(name_or_path: str):
    """A card by zoo name, or from a TOML file path."""
    from vaezoo.cards import get_card, parse_card

    path = Path(name_or_path)
    if name_or_path.endswith(".toml") or path.is_file():
        return parse_card(path)
    return get_card(name_or_path)


def print_json(data) -> None:
    """Print ``data`` as JSON on stdout."""
    print(json.dumps(data, indent=2))


def console(stderr: bool = False):
    """A rich console (imported lazily)."""
    from rich.console import Console

    return Console(stderr=stderr)
