"""``python -m vaezoo`` and the ``vaezoo`` console script.

They import the command line here, so that a Ctrl-C that lands while it is imported (its first ~50 ms) ends the
command as one during it does: one line and exit code 130, not Python's traceback of the import it interrupted.
"""

import sys


def console() -> None:
    """Import the command line and run it (:func:`vaezoo.cli.console`)."""
    try:
        from vaezoo.cli import console as command_line
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    command_line()


if __name__ == "__main__":
    console()
