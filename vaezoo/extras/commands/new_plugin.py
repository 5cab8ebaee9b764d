"""``vaezoo new-plugin``: write a working plugin package to start from.

The package holds a pyproject with the ``vaezoo`` entry point, a module whose
hooks register one part of the ``--kind`` asked for (an architecture, a latent
family, a regularizer, a metric or a dataset) and a card directory, a card that
uses the part, and tests that run :mod:`vaezoo.testing` (its checks, then a few
steps of ``vaezoo train`` on the card). It is written into a temporary directory
and renamed into place, so a failure leaves nothing behind.
"""

import sys
from pathlib import Path

from vaezoo.cli.common import path_arg, printable
from vaezoo.extras.scaffold import KINDS
from vaezoo.terminal import shell_quote

HELP = "write a new plugin package: pyproject, hooks, a card and tests"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.add_argument("name", help="the plugin's name: lowercase letters, digits and hyphens, e.g. 'sparse-vae'")
    p.add_argument("--kind", choices=sorted(KINDS), default="architecture",
                   help="the part the plugin registers (default: architecture)")
    p.add_argument("--dir", default=".", type=path_arg,
                   help="where to create the package directory vaezoo-NAME (default: .)")


def run(args) -> int:
    from vaezoo.extras.scaffold import create_plugin

    target = create_plugin(args.name, Path(args.dir), args.kind)
    print(printable(target))
    # the test extra brings pytest; quoted, as [test] is a glob pattern to the shell
    print(printable(f"next: pip install -e {shell_quote(f'{target}[test]')} && vaezoo plugins && "
                    f"python -m pytest {shell_quote(str(target))}"), file=sys.stderr)
    return 0
