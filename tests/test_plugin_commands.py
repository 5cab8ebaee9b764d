"""Commands that plugins add to the CLI (``vaezoo_register_commands``): listed, helped and run as the built-in
ones are, never in place of one, and a broken one costs only itself."""

from __future__ import annotations

import json
import re

import pytest

from kit import assert_one_line_error, child_env, cli, install_plugin, run_python
from vaezoo import plugins

GREETER = """
import vaezoo
from vaezoo.cli import Command


def add_arguments(parser):
    parser.add_argument("--name", default="world", help="whom to greet")
    parser.add_argument("--code", type=int, help="the exit code to return")
    parser.add_argument("--json", action="store_true", help="the greeting as JSON")


def run(args):
    if args.json:
        from vaezoo.cli.common import print_json

        print("greeting")  # beside the JSON, as a plugin's part prints while a built-in command runs
        print_json({"hello": args.name})
        return args.code
    print(f"hello {args.name}")
    return args.code


class Fails:
    help = "raise what --what names"

    def add_arguments(self, parser):
        parser.add_argument("what", choices=["vaezoo", "runtime", "interrupt", "wrong-code", "exit"])

    def run(self, args):
        if args.what == "vaezoo":
            from vaezoo.errors import VaezooError
            raise VaezooError("the greeting went wrong; try another name")
        if args.what == "runtime":
            raise RuntimeError("a bug in the greeter")
        if args.what == "interrupt":
            raise KeyboardInterrupt
        if args.what == "exit":
            raise SystemExit(4)  # as sys.exit(4) in a script
        return "done"


@vaezoo.hookimpl
def vaezoo_register_commands(register):
    register("hello", Command(help="greet someone, 100% politely", run=run, add_arguments=add_arguments))
    register("fail-hello", Fails())
"""

REGISTERS = """
import vaezoo
from vaezoo.cli import Command


@vaezoo.hookimpl
def vaezoo_register_commands(register):
    register("own-command", Command(help="a command of its own", run=lambda args: print("own")))
    register({name!r}, Command(help="wants a taken or invalid name", run=lambda args: print("taken")))
"""

BROKEN = {
    "raises_in_hook": ("def vaezoo_register_commands(register):\n"
                       "    raise RuntimeError('broken in the command hook')\n",
                       "hook vaezoo_register_commands raised RuntimeError: broken in the command hook"),
    "no_run": ("def vaezoo_register_commands(register):\n"
               "    from types import SimpleNamespace\n"
               "    register('runless', SimpleNamespace(help='has no run'))\n",
               "registered command 'runless': expected a vaezoo.cli.Command"),
    "arguments_raise": ("def vaezoo_register_commands(register):\n"
                        "    from vaezoo.cli import Command\n"
                        "    def add_arguments(parser):\n"
                        "        raise ValueError('no arguments today')\n"
                        "    register('runless', Command(help='h', run=print, add_arguments=add_arguments))\n",
                        "add_arguments of command 'runless' raised ValueError: no arguments today"),
}

HOSTILE_HELP = "\x1b[31mred\x1b[0m \x07bell \u202eflipped [bold]markup[/bold] 50% %(prog)s"
HOSTILE_SHOWN = r"\x1b[31mred\x1b[0m \x07bell \u202eflipped [bold]markup[/bold] 50% %(prog)s"


def plugin_warnings(err: str, plugin: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"warning: vaezoo plugin '{plugin}' ")]


@pytest.fixture
def greeter(site, cards_dir):
    """The plugin ``greeter``, which adds the commands ``hello`` and ``fail-hello``."""
    install_plugin(site, "greeter", GREETER)
    return site


def test_a_plugin_command_is_listed_helped_and_run(greeter, capsys):
    code, out, err = cli(capsys, "--help")
    assert code == 0 and err == ""
    assert "hello" in out and "greet someone, 100% politely" in out and "fail-hello" in out
    assert out.index(" show ") < out.index(" hello ")  # after the core's own commands

    code, out, _ = cli(capsys, "hello", "--help")
    paragraphs = out.split("\n\n")
    assert code == 0 and paragraphs[0].startswith("usage: vaezoo hello [-h] [--name NAME] [--code CODE]")
    assert paragraphs[1] == "Greet someone, 100% politely."
    assert "whom to greet" in out

    assert cli(capsys, "hello") == (0, "hello world\n", "")
    assert cli(capsys, "hello", "--name", "zoo", "--code", "3") == (3, "hello zoo\n", "")


@pytest.mark.parametrize(("argv", "code", "last"), [
    (["fail-hello", "vaezoo"], 1, "error: the greeting went wrong; try another name"),
    (["fail-hello", "interrupt"], 130, "error: interrupted"),
    (["hello", "--nme", "x"], 2, "vaezoo hello: error: unrecognized arguments: --nme x"),
    (["hello", "--code", "x"], 2, "vaezoo hello: error: argument --code: invalid int value: 'x'"),
    (["fail-hello"], 2, "vaezoo fail-hello: error: the following arguments are required: what"),
])
def test_a_plugin_command_ends_as_a_built_in_one_does(greeter, capsys, argv, code, last):
    got, out, err = cli(capsys, *argv)
    assert (got, out) == (code, "") and "Traceback" not in err
    assert err.splitlines()[-1] == last


def test_a_plugin_command_s_json_keeps_stdout_as_plugins_md_says(greeter, capsys):
    code, out, err = cli(capsys, "hello", "--name", "you", "--json")
    assert (code, json.loads(out), err) == (0, {"hello": "you"}, "greeting\n")
    assert cli(capsys, "hello", "--name", "you") == (0, "hello you\n", "")  # without --json, as it likes


def test_a_plugin_command_that_ends_with_sys_exit_exits_with_its_code(greeter, capsys):
    assert cli(capsys, "fail-hello", "exit") == (4, "", "")


@pytest.mark.parametrize(("what", "said"), [
    ("runtime", "plugin 'greeter' (fake_greeter_"),
    ("wrong-code", "command 'fail-hello' of plugin 'greeter' returned 'done': its run must return an exit code"),
])
def test_a_plugin_command_s_own_failure_is_one_line_naming_the_plugin(greeter, capsys, what, said):
    code, out, err = cli(capsys, "fail-hello", what)
    assert (code, out) == (1, "")
    assert_one_line_error(err, said)


def test_a_mistyped_command_is_compared_with_the_plugins_commands_too(greeter, capsys):
    code, out, err = cli(capsys, "helo")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == "vaezoo: error: 'helo' is not a vaezoo command; did you mean 'hello'?"
    assert cli(capsys, "fail")[2].splitlines()[-1].endswith("did you mean 'fail-hello'?")


def test_vaezoo_plugins_names_the_hook_and_the_commands(greeter, capsys):
    code, out, _ = cli(capsys, "plugins", "--json")
    assert code == 0
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["greeter"]["hooks"] == ["vaezoo_register_commands"] and rows["greeter"]["status"] == "ok"
    code, out, _ = cli(capsys, "plugins", "--parts", "--json")
    assert code == 0
    commands = [(p["name"], p["plugin"]) for p in json.loads(out) if p["kind"] == "command" and p["plugin"] != "extras"]
    assert commands == [("fail-hello", "greeter"), ("hello", "greeter")]


@pytest.mark.parametrize("name", ["list", "eval", "new-plugin", "Hello", "hello_world", "hello world", "9lives", "-x",
                                  "[b]x[/b]"])
def test_a_command_name_that_is_built_in_or_invalid_is_refused(site, cards_dir, capsys, name):
    install_plugin(site, "taker", REGISTERS.format(name=name))
    code, out, err = cli(capsys, "--help")
    assert code == 0 and "own-command" not in out  # a refused registration keeps none of the hook's names
    (warning,) = plugin_warnings(err, "taker")
    assert any(f in warning for f in (f"registered command {name!r}", f"invalid name {name!r}",
                                      f"command {name!r} is registered by both plugin 'extras'")), warning
    if name in ("list", "eval", "new-plugin"):  # the core's own, or vaezoo's extras' (the first to register it)
        assert "one of vaezoo's own commands, which no plugin can replace" in warning or "plugin 'extras'" in warning
        assert len(re.findall(rf"^    {name}\b", out, re.MULTILINE)) == 1
    else:  # the command's own rule, not that of every name, which allows '_' that a command's then refuses
        assert "lowercase letters and digits, words joined by '-'" in warning
    code, out, err = cli(capsys, "list", "--json")
    assert code == 0 and isinstance(json.loads(out), list) and plugin_warnings(err, "taker") == []  # list is list


def test_two_plugins_registering_one_command_name(site, cards_dir, capsys):
    install_plugin(site, "first", REGISTERS.format(name="shared-name"))
    install_plugin(site, "second", REGISTERS.format(name="shared-name"))
    code, out, err = cli(capsys, "--help")
    assert code == 0 and "shared-name" in out
    assert plugin_warnings(err, "first") == []
    (warning,) = plugin_warnings(err, "second")
    assert "command 'own-command' is registered by both plugin 'first' and plugin 'second'" in warning
    assert cli(capsys, "shared-name")[:2] == (0, "taken\n")


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_command_is_warned_once_and_the_rest_works(greeter, capsys, name):
    source, fragment = BROKEN[name]
    install_plugin(greeter, name, "import vaezoo\n\n\n@vaezoo.hookimpl\n" + source)
    code, out, err = cli(capsys, "--help")
    assert code == 0 and "hello" in out and "runless" not in out
    (warning,) = plugin_warnings(err, name)
    assert warning.startswith(f"warning: vaezoo plugin '{name}' failed: ") and fragment in warning

    assert cli(capsys, "hello") == (0, "hello world\n", "")
    plugins.reset()  # as a new process
    code, out, err = cli(capsys, "runless")
    assert code == 2 and "'runless' is not a vaezoo command" in err and len(plugin_warnings(err, name)) == 1
    code, out, err = cli(capsys, "list", "--json")
    assert code == 0 and isinstance(json.loads(out), list) and plugin_warnings(err, name) == []
    code, out, _ = cli(capsys, "plugins", "--json")
    row = {row["name"]: row for row in json.loads(out)}[name]
    assert row["status"] == "failed" and fragment in row["error"]
    assert row["hooks"] == ["vaezoo_register_commands"]


def test_a_plugin_s_help_is_shown_as_text(site, cards_dir, capsys):
    install_plugin(site, "hostile", "import vaezoo\nfrom vaezoo.cli import Command\n\n\n@vaezoo.hookimpl\n"
                                    "def vaezoo_register_commands(register):\n"
                                    f"    register('hostile', Command(help={HOSTILE_HELP!r}, run=print))\n")
    for argv in (["--help"], ["hostile", "--help"]):
        code, out, err = cli(capsys, *argv)
        assert code == 0 and err == ""
        assert all(c.isprintable() or c == "\n" for c in out)
        assert HOSTILE_SHOWN in " ".join(out.split()), out


LIGHT_COMMANDS = """
import sys
from vaezoo.cli import main
codes = [main(["hello", "--name", "torch-free"]), main(["list", "--json"]), main(["--help"])]
print(codes, sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_plugin_commands_leave_the_cli_torch_free(greeter, cards_dir):
    result = run_python("-c", LIGHT_COMMANDS, env=child_env(greeter.parent / "home", cards=cards_dir, site=greeter))
    assert result.returncode == 0, result.stderr
    assert "hello torch-free" in result.stdout
    assert result.stdout.splitlines()[-1] == "[0, 0, 0] []"
