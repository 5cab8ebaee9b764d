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


def device_arg(value: str) -> str:
    """argparse type of ``--device``: ``cpu``, or a ``cuda[:i]`` or ``mps`` device this machine has."""
    import argparse

    import torch

    try:
        device = torch.device(value)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a device; use cpu, cuda, cuda:1, mps") from None
    available = {"cpu": True, "mps": torch.backends.mps.is_available(),
                 "cuda": torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count()}
    if not available.get(device.type, False):
        have = ", ".join(["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
                         + ["mps"] * available["mps"])
        raise argparse.ArgumentTypeError(f"device '{value}' is not available on this machine, which has {have}")
    return value


def print_json(data) -> None:
    """Print ``data`` as JSON on stdout."""
    print(json.dumps(data, indent=2))


def console(stderr: bool = False):
    """A rich console (imported lazily)."""
    from rich.console import Console

    return Console(stderr=stderr)
