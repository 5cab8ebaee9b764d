"""Stop signals while a command starts: handled from its first instant, even where library code swallows them.

``benchmarks/startup_signals.py`` sends them at random instants to the real command; these tests pin down each
case it found.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import weakref

import pytest
from kit import run_python

from vaezoo.cli import _import_uninterrupted, main
from vaezoo.errors import DataError
from vaezoo.signals import Interrupted


def test_the_command_line_imports_none_of_the_libraries_before_its_handlers_are_in_place():
    """The console script imports vaezoo.cli before main() installs the stop signals' handlers: that import must
    be short, the package front importing its API on first use."""
    result = run_python("-c", "import sys, vaezoo.cli; print(sorted(m.partition('.')[0] for m in sys.modules "
                              "if m.partition('.')[0] in ('torch', 'numpy', 'pydantic', 'pluggy', 'rich')))")
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr


def test_a_ctrl_c_while_the_command_line_is_imported_is_one_line_and_exit_code_130():
    """The console script imported vaezoo.cli itself: a Ctrl-C in its first ~50 ms, while that import ran, printed
    Python's traceback of the import it interrupted."""
    result = run_python("-c", """
import builtins
real = builtins.__import__
def interrupted(name, *args, **kwargs):  # as a Ctrl-C that lands during the import
    if name == "vaezoo.cli":
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupted
from vaezoo.__main__ import console
console()
""")
    assert (result.returncode, result.stderr) == (130, "error: interrupted\n")


def test_the_console_script_is_the_command_line_imported_with_its_interrupt_handled():
    from importlib.metadata import entry_points

    [script] = entry_points(group="console_scripts", name="vaezoo")
    assert script.value == "vaezoo.__main__:console"


def test_the_package_front_gives_its_api_on_first_use():
    import vaezoo

    assert vaezoo.get_card.__module__ == "vaezoo.entries.catalog" and vaezoo.load.__module__ == "vaezoo.hub"
    assert set(vaezoo.__all__) <= set(dir(vaezoo))
    with pytest.raises(AttributeError, match="module 'vaezoo' has no attribute 'lod'"):
        vaezoo.lod


@pytest.mark.parametrize(("signum", "code", "line"), [(signal.SIGINT, 130, "error: interrupted\n"),
                                                      (signal.SIGTERM, 143, "error: stopped by SIGTERM\n")])
def test_an_error_after_a_swallowed_stop_signal_is_reported_as_the_stop(monkeypatch, capsys, signum, code, line):
    """torch's C code swallows a KeyboardInterrupt raised inside the import of numpy and leaves numpy half
    imported: the command's later error is the signal's doing, and the user hears of the signal."""

    def swallowing(args):
        try:
            os.kill(os.getpid(), signum)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        raise DataError("unknown dataset 'mnist'. Known: none")

    monkeypatch.setattr("vaezoo.cli.list.run", swallowing)
    assert main(["list"]) == code
    assert capsys.readouterr().err == line


@pytest.mark.parametrize(("signum", "code", "line"), [(signal.SIGINT, 130, "error: interrupted\n"),
                                                      (signal.SIGTERM, 143, "error: stopped by SIGTERM\n")])
def test_a_stop_signal_in_a_callback_python_ignores_is_reported_as_the_stop(monkeypatch, capsys, signum, code, line):
    """A Ctrl-C landing in an import's module-lock callback (a lazy import in 'vaezoo study') was printed as
    'Exception ignored in ...' with a traceback, and the command went on to exit 0."""

    class Lock:
        pass

    def struck_in_a_callback(args):
        lock = Lock()
        ref = weakref.ref(lock, lambda _: os.kill(os.getpid(), signum) or sum(range(100)))
        del lock  # the callback runs here; what it raises cannot be raised
        assert ref() is None
        return 0

    monkeypatch.setattr("vaezoo.cli.list.run", struck_in_a_callback)
    assert main(["list"]) == code
    assert capsys.readouterr().err == line


def test_a_command_s_libraries_are_imported_whole_and_a_signal_meanwhile_then_stops_it(tmp_path, monkeypatch):
    (tmp_path / "signalled_library.py").write_text("import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGTERM)\n"
                                                   "WHOLE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "signalled_library", raising=False)
    try:
        with pytest.raises(Interrupted) as stopped:
            _import_uninterrupted(["signalled_library"])
        assert stopped.value.signal == signal.SIGTERM and sys.modules["signalled_library"].WHOLE
    finally:
        sys.modules.pop("signalled_library", None)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_once_the_command_is_done_leaves_its_exit_code(signum):
    """The interpreter's shutdown after a command takes about a second (torch's): a Ctrl-C or SIGTERM then found
    nothing to clean up and turned a command that succeeded into a failure."""
    done = run_python("-c", f"""
import atexit, os
from vaezoo import cli
cli.main = lambda argv=None: 0  # a command that succeeded
atexit.register(lambda: os.kill(os.getpid(), {int(signum)}))  # the signal arrives during the shutdown
cli.console()
""")
    assert (done.returncode, done.stderr) == (0, "")
