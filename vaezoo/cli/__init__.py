"""The ``vaezoo`` command line. Data goes to stdout, status and errors to stderr.

Each command is a module of this package with ``add_parser(subparsers)``;
heavy modules (torch, rich) are imported inside the commands that need them,
so ``vaezoo list`` reads cards only and never imports torch. Plugins add
commands of their own (:class:`Command`, hook ``vaezoo_register_commands``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import functools
import importlib
import io
import os
import re
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from vaezoo.errors import SharedChange, VaezooError, check_switches, first_line
from vaezoo.registry import COMMANDS
from vaezoo.signals import Interrupted, StopSignals, exit_finished, stopped_words
from vaezoo.terminal import DataStream, StatusStream
from vaezoo.training.launch import said_by_another, start_alike


@dataclass(frozen=True)
class Command:
    """A command a plugin adds to ``vaezoo``: ``register("my-command", Command(...))`` in its
    ``vaezoo_register_commands`` hook. Any object with these attributes is taken alike.

    Attributes:
        help: one line saying what the command does: ``vaezoo --help`` lists it, and ``vaezoo NAME --help``
            opens with it as a sentence. Shown as text, ``%`` included.
        run: ``run(args) -> int | None``, called with the parsed :class:`argparse.Namespace`; returns the exit
            code, None for 0. What it raises ends the command as a built-in's does: a
            :class:`vaezoo.errors.VaezooError` is one line ``error: ...`` and exit code 1 (2 for one made by
            :meth:`~vaezoo.errors.VaezooError.of_value`, a value the command line gives that cannot be), a Ctrl-C
            exit code 130.
        add_arguments: ``add_arguments(parser)`` adds the command's arguments to its :class:`argparse.ArgumentParser`;
            None when it takes none. ``parser.set_defaults(imports=["torch"])`` imports those modules before
            ``run``, a Ctrl-C during the import stopping the command cleanly.
    """

    help: str
    run: Callable[[argparse.Namespace], int | None]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


USAGE = 2
"""The exit code of a command line that asks for what cannot be (argparse's, and a :attr:`VaezooError.usage` error's);
1 is that of work that failed or was refused."""


def build_parser(plugin_commands: bool = True) -> argparse.ArgumentParser:
    """The argument parser with every command's subparser.

    Args:
        plugin_commands: add the commands plugins register after the built-in ones (which loads the plugins).
            :func:`main` leaves them out when its first argument is a built-in command, which the plugins'
            commands then cannot slow or break.
    """
    from vaezoo.version import __version__

    parser = _Parser(prog="vaezoo", description="A zoo of disentangled VAEs.")
    parser.add_argument("--version", action="version", version=f"vaezoo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=functools.partial(_Parser, allow_abbrev=False))
    for name in COMMANDS:
        importlib.import_module(f"vaezoo.cli.{name.replace('-', '_')}").add_parser(sub)
    if plugin_commands:
        parser.commands = (*COMMANDS, *_add_plugin_commands(sub))
    for listed in sub._choices_actions:  # a command's --help opens with what 'vaezoo --help' says of it
        command = sub.choices[listed.dest]
        command.description = command.description or listed.help[:1].upper() + listed.help[1:] + "."
    return parser


def _add_plugin_commands(sub) -> list[str]:
    """Add a subparser to ``sub`` for each command the plugins register; return their names.

    A command whose ``add_arguments`` raises is left out, its plugin marked failed (a warning), as when a
    plugin's hook raises.
    """
    from vaezoo.plugins import get_plugins

    plugins = get_plugins()
    commands = plugins.registry("command")
    added = []
    for name in commands:
        command, plugin = commands[name], commands.plugin_of(name)
        sentence = command.help[:1].upper() + command.help[1:] + "."
        parser = sub.add_parser(name, help=command.help.replace("%", "%%"),  # the text, not a %-template
                                description=sentence.replace("%", "%%") if "%(prog)" in sentence else sentence)
        add_arguments = getattr(command, "add_arguments", None)
        if add_arguments is not None and not plugins.guarded(plugin, f"add_arguments of command {name!r}",
                                                             add_arguments, parser)[0]:
            del sub.choices[name]
            sub._choices_actions.pop()
            continue
        parser.set_defaults(func=functools.partial(_run_plugin_command, name, plugin, command))
        added.append(name)
    return added


def _run_plugin_command(name: str, plugin: str, command: Command, args: argparse.Namespace) -> int:
    """Run plugin ``plugin``'s command ``name`` on ``args``: its exit code (0 for None)."""
    from vaezoo.errors import PluginError

    try:
        code = command.run(args)
    except SystemExit as exc:  # a command may end with sys.exit(code), as a script does; a part's exit is an error
        code = exc.code
    if code is None:
        return 0
    if isinstance(code, bool) or not isinstance(code, int):
        raise PluginError(f"command '{name}' of plugin '{plugin}' returned {code!r}: its run must return an exit "
                          f"code (an int) or None")
    return code


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors show the words given (``unrecognized arguments: ...``) as text, a
    command's under its own usage, and suggest the command meant by a mistyped one.

    A command's options are spelled whole (no ``--js`` for ``--json``: it would change meaning the day a
    ``--jsonl`` came). What it prints is shown as text: a plugin's help holding control characters shows them
    escaped (:func:`vaezoo.terminal.printable`).

    Attributes:
        commands: the commands a mistyped one is compared with: the built-in ones and the plugins'.
    """

    commands: tuple[str, ...] = COMMANDS

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "vaezoo":  # a command's parser: what it does not know is its user's error
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def error(self, message: str):
        from vaezoo.terminal import printable

        typed = re.match(r"argument COMMAND: invalid choice: '(.*)' \(choose from", message)
        if typed is not None:
            meant = ([c for c in self.commands if c.startswith(typed[1])]
                     or difflib.get_close_matches(typed[1], self.commands, 1))
            message = f"'{typed[1]}' is not a vaezoo command; " + (
                f"did you mean '{meant[0]}'?" if meant else "'vaezoo --help' lists the commands")
        super().error(printable(message))

    def _print_message(self, message: str, file=None) -> None:
        from vaezoo.terminal import printable_lines

        if message:  # argparse's own drops a write that fails: --help > /dev/full would exit 0
            (file or sys.stderr).write(printable_lines(message))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``vaezoo`` console script: one-line errors, non-zero exit, no traceback.

    A reader that stops early (``vaezoo list | head -1``) ends the command quietly with exit code 0: the
    reader has what it asked for (whether Python notices the closed pipe depends on buffer sizes, so
    any other code would vary from run to run). Status lines on stderr go quiet once nobody reads them
    (:class:`vaezoo.terminal.StatusStream`): a run goes on when its terminal or log pipe closes.

    Args:
        argv: the words after ``vaezoo``, e.g. ``["list", "--json"]``; None reads ``sys.argv[1:]``, the process's
            own command line, which in a Jupyter kernel is the kernel's (``-f KERNEL.json``): give the words there.

    Returns:
        The command's exit code, argparse's too (0 for ``--help``, 2 for a usage error): it raises no
        ``SystemExit``, so that a notebook's cell or a script calling ``main(["list"])`` goes on with the code.
    """
    if "_ARGCOMPLETE" in os.environ and "COMP_LINE" in os.environ:  # the shell asks for completions (vaezoo completion)
        _complete()
    start_alike()
    stops = StopSignals(defer=False)  # SIGTERM and SIGHUP clean up as Ctrl-C does
    with _command_streams:
        return _run(argv, stops)


def _run(argv: list[str] | None, stops: StopSignals) -> int:
    """:func:`main` within the streams a command holds: parse ``argv``, run the command, end it as :func:`main`
    says."""
    try:
        with _shown_warnings, stops:
            words = sys.argv[1:] if argv is None else argv
            try:
                with contextlib.redirect_stderr(io.StringIO()) if said_by_another() else contextlib.nullcontext():
                    args = build_parser(plugin_commands=next(iter(words), None) not in COMMANDS).parse_args(argv)
            except SystemExit as exc:  # --help, --version, a usage error: argparse's code, returned as any other
                sys.stdout.flush()  # --help and --version succeed only once their text is written
                return exc.code if isinstance(exc.code, int) else USAGE
            check_switches()
            _import_uninterrupted(getattr(args, "imports", []))
            from vaezoo.cli.common import data_alone_on_stdout

            # the core's commands print their data with cli.common's printers, as does a --json command with
            # print_json; a plugin's command prints its data as it likes
            data_alone = args.command in COMMANDS or getattr(args, "json", False) is True
            with data_alone_on_stdout() if data_alone else contextlib.nullcontext():
                code = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe can still be handled, not at interpreter exit
        if code == 0 and stops.received is not None:  # a Ctrl-C in a callback, which Python ignores (_noted_stops)
            return _stopped(stops.received)
        return code
    except BrokenPipeError:
        _discard_stdout()
        return 0
    except (VaezooError, OSError) as exc:
        if stops.received is not None:  # the error of what a swallowed stop signal left half done
            return _stopped(stops.received)
        if isinstance(exc, VaezooError):
            from vaezoo.cli.common import flag_spelling

            _error(exc.spelled(flag_spelling))
        else:  # the system refused a path given on the command line
            _error(_os_error(exc))
        return USAGE if isinstance(exc, VaezooError) and exc.usage else 1
    except KeyboardInterrupt as exc:
        return _stopped(getattr(exc, "signal", signal.SIGINT))
    except Warning as exc:  # raised, not shown: PYTHONWARNINGS=error or python -W error made warnings errors
        if stops.received is not None:
            return _stopped(stops.received)
        first = first_line(exc)
        _error(f"{first} ({type(exc).__name__}, a warning that the warnings filter makes an error: do what it says, "
               f"or let it pass with PYTHONWARNINGS=default or python -W default)")
        return 1
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a third-party plugin's error, its sys.exit too, is one line
        if stops.received is not None:
            return _stopped(stops.received)
        from vaezoo.plugins import raised_in

        culprit = raised_in(exc)
        if culprit is None:  # vaezoo's own error keeps its traceback
            raise
        first = first_line(exc)
        _error(f"plugin '{culprit.name}' ({culprit.distribution} {culprit.version}) raised {type(exc).__name__}"
               f"{': ' + first if first else ''}; report it to its author, or leave the plugin out with "
               f"VAEZOO_LOAD_PLUGINS")
        return 1


def _take_streams() -> tuple:
    """Make the process's stdout a :class:`DataStream`, its stderr a :class:`StatusStream` and its unraisablehook
    :func:`_noted_stops`; what they were."""
    found = stdout, stderr, _ = sys.stdout, sys.stderr, sys.unraisablehook
    sys.stdout = DataStream(stdout if stdout is not None else open(os.devnull, "w"))  # closed (>&-): a reader gone
    sys.stderr = StatusStream(stderr if stderr is not None else open(os.devnull, "w"))
    _escape_what_cannot_be_encoded(sys.stdout, stderr)
    sys.unraisablehook = _noted_stops(sys.unraisablehook)
    return found


def _give_streams_back(found: tuple) -> None:
    sys.stdout, sys.stderr, sys.unraisablehook = found


_command_streams = SharedChange(_take_streams, _give_streams_back)
"""The process's streams as a command holds them (:func:`_take_streams`): commands run at once in threads, or one
inside another, share them, taken by the first and given back by the last."""


def _show_warnings() -> warnings.catch_warnings[None]:
    """Show warnings with :func:`_show_warning`, in a :class:`warnings.catch_warnings` block (the filters and
    ``showwarning`` are put back as they were, and a warning an earlier command showed is shown again); the block,
    to end."""
    block = warnings.catch_warnings()
    block.__enter__()
    warnings.showwarning = _show_warning
    return block


_shown_warnings = SharedChange(_show_warnings, lambda block: block.__exit__(None, None, None))
"""How warnings are shown while a command runs (:func:`_show_warnings`): commands run at once in threads, or one
inside another, share it, made by the first and undone by the last (each in a block of its own, the one that ended
last left ``_show_warning`` installed for good)."""


def _noted_stops(hook: Callable) -> Callable:
    """``sys.unraisablehook`` that leaves out a stop signal raised where Python cannot raise it, a callback (an
    import's module lock): :class:`StopSignals` noted it, and :func:`main` ends the command with it."""

    def handle(unraisable) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)

    return handle


def console() -> NoReturn:
    """The ``vaezoo`` console script (and ``python -m vaezoo``): :func:`main`, then exit with its code, the stop
    signals ignored once the command is done (:func:`vaezoo.signals.exit_finished`)."""
    exit_finished(main())


def _complete() -> None:
    """Write the completions of the command line the shell gives in the environment, and exit (argcomplete).

    Plugins' commands are completed too; warnings are not shown (the shell's prompt is no place for them).
    """
    import argcomplete

    warnings.simplefilter("ignore")
    argcomplete.autocomplete(build_parser())


def _stopped(signum: int) -> int:
    """Say that a stop signal ended the command; its exit code (130 for Ctrl-C, as shells give)."""
    _error(stopped_words(signum))
    return 128 + signum


def _import_uninterrupted(modules: list[str]) -> None:
    """Import the libraries a command's own code imports (``set_defaults(imports=[...])``) with stop signals
    noted, then acted on: a signal that strikes inside torch's import can be swallowed by torch's C code,
    leaving numpy half imported, to fail later with a wrong error while the command goes on.

    Raises:
        Interrupted: a stop signal arrived during the imports.
        VaezooError: a library does not import (not installed, or its shared libraries cannot be loaded, as under a
            low ``ulimit -v``).
    """
    with StopSignals(defer=True) as held:
        for module in modules:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise VaezooError(f"cannot import {module}: {first_line(exc)}; "
                                  f"{_import_fix(module, exc)}") from None
    if held.received is not None:
        raise Interrupted(held.received)


def _import_fix(module: str, exc: ImportError) -> str:
    """What to do about a library that does not import (``exc``): the memory limit when the process has one and the
    library is there (its shared objects fail to map under it), else installing the library again."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY and not isinstance(exc, ModuleNotFoundError):
        return (f"this process may use {limit / 2 ** 30:.1f} GiB of memory (ulimit -v), which may be too little to "
                f"load it; raise the limit")
    return f"install it again in the Python environment running vaezoo ({sys.executable} -m pip install {module})"


def _escape_what_cannot_be_encoded(*streams) -> None:
    """Let text that the terminal's encoding cannot hold (``PYTHONIOENCODING=ascii``, a latin-1 locale) be
    written as escapes (``\\xe9``) instead of failing the command."""
    for stream in streams:
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _error(message: str) -> None:
    """Say ``message`` as the command's one error line (unless another process of a torchrun launch says it)."""
    from vaezoo.terminal import printable

    if said_by_another():
        return
    print(f"error: {printable(message)}", file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """vaezoo's own warnings as one line ``warning: ...`` on stderr; any other (a plugin's, a library's) as Python
    shows it, each of its lines escaped (:func:`vaezoo.terminal.printable_lines`)."""
    from vaezoo.terminal import printable, printable_lines

    if not category.__module__.startswith("vaezoo"):
        try:
            (sys.stderr if file is None else file).write(
                printable_lines(warnings.formatwarning(message, category, filename, lineno, line)))
        except OSError:  # as Python's own: a warning that cannot be written is dropped
            pass
        return
    print(f"warning: {printable(str(message))}", file=sys.stderr if file is None else file)


def _discard_stdout() -> None:
    """Point stdout at /dev/null so that Python's final flush of it cannot fail again (Python docs, 'SIGPIPE')."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _os_error(exc: OSError) -> str:
    """``exc`` in one line, with a long file name shortened and, for a name too long, what to do."""
    names = [_shorten(str(f)) for f in (exc.filename, exc.filename2) if f is not None]
    message = f"{exc.strerror or exc}" + (f": {' -> '.join(names)}" if names else "")
    if exc.errno == errno.ENAMETOOLONG:
        message += "; give a shorter name or path"
    return message


def _shorten(name: str, keep: int = 60) -> str:
    return name if len(name) <= 2 * keep else f"{name[:keep]}...{name[-keep:]} ({len(name):,} characters)"
