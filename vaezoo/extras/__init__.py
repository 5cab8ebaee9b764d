"""What the zoo offers around its models: the gallery, seed plots, the leaderboard, Hub publishing
(``save_pretrained``, ``push_to_hub``, ``vaezoo push``), the plugin installer, shell completion and the plugin
scaffold.

A plugin like a third party's (entry point ``extras``): its commands register through
``vaezoo_register_commands``. Nothing in vaezoo's core imports extras/; the package's face names
``save_pretrained`` and ``push_to_hub`` lazily.
"""

import importlib

from vaezoo.hookspecs import hookimpl

COMMANDS = ("leaderboard", "install", "uninstall", "gallery", "new-plugin", "push", "completion", "study")
"""The commands extras adds, each a module of :mod:`vaezoo.extras.commands` (``-`` spelled ``_``)."""


class _Command:
    """A command of :mod:`vaezoo.extras.commands`, imported when its arguments or its run are needed."""

    def __init__(self, module: str):
        self._module = f"vaezoo.extras.commands.{module}"
        self.help = importlib.import_module(self._module).HELP

    def add_arguments(self, parser) -> None:
        importlib.import_module(self._module).add_arguments(parser)

    def run(self, args) -> int | None:
        return importlib.import_module(self._module).run(args)


@hookimpl
def vaezoo_register_commands(register):
    for name in COMMANDS:
        register(name, _Command(name.replace("-", "_")))
