"""The ``vaezoo`` command line. Data goes to stdout, status and errors to stderr.

Each command is a module of this package with ``add_parser(subparsers)``;
heavy modules (torch, rich) are imported inside the commands that need them,
so ``vaezoo list`` reads cards only and never imports torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from vaezoo.errors import VaezooError

COMMANDS = ("list", "info", "plugins", "verify", "train", "eval", "convert", "show", "gallery", "new-plugin")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command's subparser."""
    from vaezoo import __version__

    parser = argparse.ArgumentParser(prog="vaezoo", description="A zoo of disentangled VAEs.")
    parser.add_argument("--version", action="version", version=f"vaezoo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"vaezoo.cli.{name.replace('-', '_')}").add_parser(sub)
    return parser


def _one_line(message: str) -> str:
    """``message`` with line breaks and other control characters escaped (they may come from user input)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vaezoo`` console script: one-line errors, non-zero exit, no traceback."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except VaezooError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
