"""``vaezoo install`` and ``vaezoo uninstall``: pip of the interpreter running vaezoo, as ``llm install`` and ``llm
uninstall`` run it, and the plugins it added or removed.

The fast tests put a fake ``pip`` first on ``PYTHONPATH``: ``python -m pip`` then runs it, and it records what it was
given and installs or removes dist-info folders as pip would. The slow test installs a real package with the real
pip, offline, into a throwaway virtual environment.
"""

from __future__ import annotations

import json
import os
import site as python_site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kit import assert_one_line_error, child_env, cli, install_plugin

from vaezoo.errors import InstallError
from vaezoo.extras.installer import uninstall

FAKE_PIP = '''
"""A fake pip: records its interpreter and arguments; ``install NAME`` writes NAME's dist-info (with a ``vaezoo`` entry
point when NAME starts with ``vaezoo-``), ``uninstall NAME`` removes it (a NAME of letters, digits and hyphens);
prints $FAKE_PIP_SAY on stdout; exits with $FAKE_PIP_EXIT."""
import json, os, re, shutil, sys
from pathlib import Path

site = Path(os.environ["FAKE_PIP_SITE"])
with open(site.parent / "pip-calls.jsonl", "a") as log:
    log.write(json.dumps([sys.executable, *sys.argv[1:]]) + "\\n")
if "FAKE_PIP_SAY" in os.environ:
    print(os.environ["FAKE_PIP_SAY"])
code = int(os.environ.get("FAKE_PIP_EXIT", "0"))
if code:
    print("ERROR: No matching distribution found for " + sys.argv[-1], file=sys.stderr)
    sys.exit(code)
verb, names = sys.argv[1], [a for a in sys.argv[2:] if re.fullmatch("[a-z0-9][a-z0-9-]*", a)]
for name in names:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    if verb == "uninstall":
        shutil.rmtree(info, ignore_errors=True)
        continue
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n")
    if name.startswith("vaezoo-"):
        (info / "entry_points.txt").write_text(f"[vaezoo]\\n{name[7:]} = {name.replace('-', '_')}\\n")
'''


@pytest.fixture
def fake_pip(tmp_path, monkeypatch) -> Path:
    """A fake pip that ``sys.executable -m pip`` runs, whose installs land in a folder on ``PYTHONPATH``; returns
    that folder. Its calls are read with :func:`pip_calls`."""
    (tmp_path / "fake" / "pip").mkdir(parents=True)
    (tmp_path / "fake" / "pip" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "fake" / "pip" / "__main__.py").write_text(FAKE_PIP, encoding="utf-8")
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("FAKE_PIP_SITE", str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fake"), str(site),
                                                      *filter(None, [os.environ.get("PYTHONPATH")])]))
    return site


def pip_calls(site: Path) -> list[list[str]]:
    """``[interpreter, *arguments]`` of each run of the fake pip, in order."""
    log = site.parent / "pip-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize(("argv", "given"), [
    (["install", "vaezoo-laplace"], ["install", "--", "vaezoo-laplace"]),
    (["install", "-U", "--pre", "-e", "src/mine", "--force-reinstall", "--no-cache-dir", "a", "b>=1"],
     ["install", "--upgrade", "--force-reinstall", "--no-cache-dir", "--pre", "--editable", "src/mine", "--", "a",
      "b>=1"]),
    (["install", "--upgrade", "--editable", "src/mine"], ["install", "--upgrade", "--editable", "src/mine"]),
    (["uninstall", "a", "b"], ["uninstall", "a", "b"]),
    (["uninstall", "-y", "a"], ["uninstall", "a", "--yes"]),
    (["uninstall", "a", "--yes"], ["uninstall", "a", "--yes"]),
])
def test_the_options_are_passed_to_pip_of_the_interpreter_running_vaezoo(fake_pip, capfd, monkeypatch, argv, given,
                                                                         tmp_path):
    monkeypatch.setattr(os, "isatty", lambda fd: True)  # pip may ask, on a terminal
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src" / "mine").mkdir(parents=True)
    (tmp_path / "src" / "mine" / "pyproject.toml").write_text("[project]\nname = 'mine'\n")  # an editable project
    code, _, err = cli(capfd, *argv)
    assert code == 0, err
    assert pip_calls(fake_pip) == [[sys.executable, *given]]


def test_install_names_the_plugins_it_added_and_uninstall_those_it_removed(fake_pip, capfd):
    install_plugin(fake_pip, "already", "")  # a plugin the environment had before: not new
    code, out, err = cli(capfd, "install", "vaezoo-hello", "numpy-helper")
    assert (code, out, err) == (0, "plugin added: hello (vaezoo-hello 1.0, module vaezoo_hello)\n", "")

    assert cli(capfd, "install", "numpy-helper2") == (
        0, "no plugin added: what pip installed registers no new entry point in the group 'vaezoo'\n", "")
    assert cli(capfd, "uninstall", "-y", "numpy-helper") == (0, "no plugin removed\n", "")
    assert cli(capfd, "uninstall", "-y", "vaezoo-hello") == (0, "plugin removed: hello (vaezoo-hello 1.0)\n", "")


def test_pip_s_messages_go_to_stderr_and_stdout_holds_only_the_plugins(fake_pip, capfd, monkeypatch):
    # pip's lines (Collecting ..., Successfully installed ..., 10 kB for a plugin) came before the plugins on stdout
    monkeypatch.setenv("FAKE_PIP_SAY", "Successfully installed vaezoo-hello-1.0")
    assert cli(capfd, "install", "vaezoo-hello") == (
        0, "plugin added: hello (vaezoo-hello 1.0, module vaezoo_hello)\n", "Successfully installed vaezoo-hello-1.0\n")
    monkeypatch.setenv("FAKE_PIP_SAY", "Successfully uninstalled vaezoo-hello-1.0")
    assert cli(capfd, "uninstall", "-y", "vaezoo-hello") == (
        0, "plugin removed: hello (vaezoo-hello 1.0)\n", "Successfully uninstalled vaezoo-hello-1.0\n")


def test_pip_s_failure_is_its_message_and_one_line_of_vaezoo(fake_pip, monkeypatch, capfd):
    monkeypatch.setenv("FAKE_PIP_EXIT", "1")
    code, out, err = cli(capfd, "install", "nosuch-plugin")
    assert (code, out) == (1, "")
    assert "ERROR: No matching distribution found for nosuch-plugin" in err
    assert_one_line_error(err, "pip install failed with exit code 1; pip's messages above say why")


def test_uninstall_without_yes_where_stdin_is_no_terminal_says_add_yes_and_runs_no_pip(fake_pip, capfd, monkeypatch):
    # pip asked "Proceed (Y/n)?", then failed on the closed stdin with a traceback (EOFError)
    assert cli(capfd, "install", "vaezoo-hello")[0] == 0
    asked = subprocess.run([sys.executable, "-m", "vaezoo", "uninstall", "vaezoo-hello"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300, check=False)
    assert (asked.returncode, asked.stdout) == (1, ""), asked.stderr
    assert_one_line_error(asked.stderr, "cannot ask before removing vaezoo-hello: stdin is not a terminal; add --yes "
                                        "to remove without asking")
    assert [call[1] for call in pip_calls(fake_pip)] == ["install"]
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    with pytest.raises(InstallError, match="stdin is not a terminal; add yes=True to remove without asking"):
        uninstall(["vaezoo-hello"])
    assert cli(capfd, "uninstall", "vaezoo-hello", "-y") == (0, "plugin removed: hello (vaezoo-hello 1.0)\n", "")


def test_uninstall_where_pip_yes_says_yes_needs_no_terminal(fake_pip, capfd, monkeypatch):
    # PIP_YES=1 (pip asks nothing then) was refused for want of --yes
    assert cli(capfd, "install", "vaezoo-hello")[0] == 0
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    monkeypatch.setenv("PIP_YES", "true")
    assert cli(capfd, "uninstall", "vaezoo-hello") == (0, "plugin removed: hello (vaezoo-hello 1.0)\n", "")
    assert [call[1:] for call in pip_calls(fake_pip)][1:] == [["uninstall", "vaezoo-hello", "--yes"]]


def test_uninstall_takes_a_plugin_s_name_for_its_distribution(fake_pip, capfd):
    # 'vaezoo uninstall hostile -y' said pip's "Skipping hostile as it is not installed" and exited 0
    assert cli(capfd, "install", "vaezoo-hostile", "vaezoo-friendly", "friendly")[0] == 0
    assert cli(capfd, "uninstall", "-y", "hostile") == (
        0, "plugin removed: hostile (vaezoo-hostile 1.0)\n",
        "plugin hostile comes from the distribution vaezoo-hostile: uninstalling vaezoo-hostile\n")
    assert cli(capfd, "uninstall", "-y", "friendly") == (0, "no plugin removed\n", "")  # a distribution's name first
    assert [call[1:] for call in pip_calls(fake_pip)][1:] == [["uninstall", "vaezoo-hostile", "--yes"],
                                                             ["uninstall", "friendly", "--yes"]]


@pytest.mark.parametrize(("plugin", "fix"), [("zoo", "; to run without it, leave it out of VAEZOO_LOAD_PLUGINS"),
                                             ("core", "")])
def test_uninstall_of_a_built_in_plugin_says_it_is_part_of_vaezoo_and_runs_no_pip(fake_pip, capfd, plugin, fix):
    code, out, err = cli(capfd, "uninstall", "-y", plugin)
    assert (code, out) == (1, "")
    line = assert_one_line_error(err, f"plugin {plugin} is built into vaezoo, not a distribution of its own, and "
                                      f"cannot be uninstalled apart from vaezoo{fix}")
    assert line.endswith("vaezoo" if not fix else "(the plugins to load, by name)")
    assert pip_calls(fake_pip) == []


@pytest.mark.parametrize("packages", [["vaezoo"], ["Vaezoo"], ["vaezoo-laplace", "vaezoo==0.1.0"], ["VAEZOO[hub]"]])
def test_uninstall_refuses_vaezoo_itself_and_runs_no_pip(fake_pip, capfd, packages):
    code, out, err = cli(capfd, "uninstall", "-y", *packages)
    assert (code, out) == (1, "")
    assert_one_line_error(err, "refusing to uninstall vaezoo itself, which runs this command; use pip: ",
                          f"{sys.executable} -m pip uninstall vaezoo")
    assert pip_calls(fake_pip) == []


@pytest.mark.parametrize("argv", [["install", "vaezoo-laplace"], ["uninstall", "-y", "vaezoo-laplace"]])
def test_a_missing_pip_is_one_line_saying_how_to_add_it(fake_pip, monkeypatch, capfd, argv):
    (fake_pip.parent / "fake" / "pip" / "__init__.py").write_text(  # as in an environment made by uv: no pip
        "raise ImportError('no module named pip')", encoding="utf-8")
    code, out, err = cli(capfd, *argv)
    assert (code, out) == (1, "")
    assert_one_line_error(err, f"pip is not installed in the Python environment running vaezoo ({sys.executable})",
                          f"{sys.executable} -m ensurepip", "uv pip install")
    assert pip_calls(fake_pip) == []


class PipLookups:
    """A finder first on ``sys.meta_path`` that notes each module of ``pip`` looked for and finds none itself."""

    def __init__(self):
        self.asked: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pip":
            self.asked.append(name)


def test_vaezoo_never_looks_for_pip_in_its_own_process(fake_pip, monkeypatch, capfd):
    # On Python 3.11, setuptools' distutils shim takes a look for pip in a process for pip running there and gives
    # that process the standard library's distutils for good: torch.compile failed after a 'vaezoo install'.
    lookups = PipLookups()
    monkeypatch.setattr(sys, "meta_path", [lookups, *sys.meta_path])
    monkeypatch.delitem(sys.modules, "pip", raising=False)
    code, _, _ = cli(capfd, "install", "vaezoo-laplace")
    assert code == 0 and pip_calls(fake_pip)
    assert lookups.asked == []


@pytest.mark.parametrize(("package", "problem"), [
    ("[bold]x[/]", "is not a requirement pip can read (Expected package name at the start of dependency specifier)"),
    ("x; rm -rf", "is not a requirement pip can read (Expected a marker variable or quoted string)"),
    ("", "is empty"), (" ", "is empty"),
    ("-e x", "is an option, not a package: pip is given only the options of vaezoo install (--upgrade, --editable, "),
    ("--index-url=http://127.0.0.1:9/simple", "is an option, not a package"),
])
def test_a_package_pip_cannot_read_or_would_take_for_an_option_is_one_line_and_runs_no_pip(
        fake_pip, capfd, package, problem):
    # pip's requirement parser ended '[bold]x[/]' and 'x; rm -rf' in its traceback, and '-e x' or '--index-url=...'
    # reached pip as its options
    code, out, err = cli(capfd, "install", "vaezoo-laplace", "--", package)
    assert (code, out) == (1, "")
    assert_one_line_error(err, f"PACKAGE {package!r} {problem}")
    assert pip_calls(fake_pip) == []


@pytest.mark.parametrize("package", ["./nonexistent", "dist/vaezoo_laplace-0.1-py3-none-any.whl",
                                     "vaezoo_laplace-0.1.tar.gz", "~/no-such-project"])
def test_a_path_where_nothing_is_says_so_and_runs_no_pip(fake_pip, capfd, tmp_path, monkeypatch, package):
    # './nonexistent' quoted the requirement parser ("Expected package name at the start ..."), and a missing
    # wheel's name reached pip, which looked for it on the package index
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, err = cli(capfd, "install", package)
    assert (code, out) == (1, "")
    assert_one_line_error(err, f"PACKAGE {package!r} is a path, but nothing is there; give the path of a project "
                               f"folder, a wheel or an sdist that exists")
    assert pip_calls(fake_pip) == []


def test_a_path_that_exists_and_a_requirement_with_a_url_reach_pip(fake_pip, capfd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "project").mkdir()
    for package in ("./project", "vaezoo-laplace @ https://127.0.0.1:9/vaezoo_laplace-0.1-py3-none-any.whl"):
        code, _, err = cli(capfd, "install", package)
        assert code == 0, err
    assert [call[-1] for call in pip_calls(fake_pip)] == [
        "./project", "vaezoo-laplace @ https://127.0.0.1:9/vaezoo_laplace-0.1-py3-none-any.whl"]


def test_install_of_nothing_asks_for_a_package_or_an_editable_path(fake_pip, capfd):
    code, out, err = cli(capfd, "install")
    assert (code, out) == (1, "")
    assert_one_line_error(err, "nothing to install: give a package, or a path with --editable")
    assert pip_calls(fake_pip) == []


PLUGIN_MODULE = '''
import vaezoo
from vaezoo.cli import Command


@vaezoo.hookimpl
def vaezoo_register_commands(register):
    register("hello-from-pip", Command(help="say hello", run=lambda args: print("hello from pip")))
'''


@pytest.mark.slow
def test_a_package_is_installed_into_vaezoo_s_environment_seen_and_uninstalled(tmp_path):
    # A venv made by this interpreter with --system-site-packages would see the base Python's packages, not this
    # environment's (torch, vaezoo): a .pth file adds this environment's site folders to it instead. pip then comes
    # from here too, and installs into the new venv, whose interpreter runs vaezoo.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    venv_site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                    capture_output=True, text=True, check=True).stdout.strip())
    (venv_site / "parent.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({folder!r})" for folder in python_site.getsitepackages())
        + "\n", encoding="utf-8")
    package = tmp_path / "vaezoo-hello-pip"
    (package / "vaezoo_hello_pip").mkdir(parents=True)
    (package / "vaezoo_hello_pip" / "__init__.py").write_text(textwrap.dedent(PLUGIN_MODULE), encoding="utf-8")
    (package / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "vaezoo-hello-pip"
        version = "0.1.0"

        [project.entry-points.vaezoo]
        hello-pip = "vaezoo_hello_pip"
        """), encoding="utf-8")
    # Offline: no index, no pip configuration of this machine, and the build backend (hatchling, a test
    # dependency) taken from the environment instead of downloaded (PIP_NO_BUILD_ISOLATION=0 is
    # --no-build-isolation: pip reads the value as the option's own, 'build isolation off').
    env = {**child_env(tmp_path / "home"), "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
           "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

    def vaezoo(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([python, "-m", "vaezoo", *argv], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300, check=False)

    def plugins() -> dict[str, dict]:
        listed = vaezoo("plugins", "--json")
        assert listed.returncode == 0, listed.stderr
        return {row["name"]: row for row in json.loads(listed.stdout)}

    assert "hello-pip" not in plugins()
    installed = vaezoo("install", str(package))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "Successfully installed vaezoo-hello-pip-0.1.0" in installed.stderr
    assert installed.stdout == "plugin added: hello-pip (vaezoo-hello-pip 0.1.0, module vaezoo_hello_pip)\n"
    assert list(venv_site.glob("vaezoo_hello_pip-0.1.0.dist-info"))  # in the venv, not in this environment
    assert not any(Path(folder, "vaezoo_hello_pip").exists() for folder in python_site.getsitepackages())
    row = plugins()["hello-pip"]
    assert (row["distribution"], row["version"], row["status"]) == ("vaezoo-hello-pip", "0.1.0", "ok")
    assert vaezoo("hello-from-pip").stdout == "hello from pip\n"

    removed = vaezoo("uninstall", "vaezoo-hello-pip", "-y")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert removed.stdout == "plugin removed: hello-pip (vaezoo-hello-pip 0.1.0)\n"
    assert "hello-pip" not in plugins()
    assert not list(venv_site.glob("vaezoo_hello_pip*"))
