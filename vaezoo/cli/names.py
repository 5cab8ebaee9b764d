"""The names of the built-in commands, which no plugin's command may take (read by the plugin manager, which
must not import the command line)."""

COMMANDS = ("list", "leaderboard", "info", "plugins", "install", "uninstall", "verify", "train", "eval", "seeds",
            "convert", "show", "gallery", "new-plugin", "push", "completion")
"""Each a module of :mod:`vaezoo.cli` (``-`` spelled ``_``), in the order ``vaezoo --help`` lists them."""
