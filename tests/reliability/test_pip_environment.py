"""pip and the environment (vaezoo.extras.installer): ``vaezoo install`` and ``uninstall`` run the environment's pip,
never a ``pip.py`` or ``pip/`` of the current folder; ``uninstall`` removes only what it can name before pip runs
(names, wheel files, requirements files) and never vaezoo or a distribution vaezoo needs to start (refused, naming
why: vaezoo could not run afterwards to put it back); what the interpreter prints at start-up (a sitecustomize) does
not break the list of plugins. pip here is the fake of tests/test_install.py: nothing reaches the network."""

from __future__ import annotations

import re
from importlib import metadata

import pytest
from kit import assert_one_line_error, cli
from test_install import fake_pip, pip_calls  # noqa: F401  (fake_pip is a fixture)

from vaezoo.extras.installer import needed_by_vaezoo

HIJACK = """
from pathlib import Path
Path({marker!r}).write_text("the current folder's pip ran")
raise SystemExit(0)
"""


@pytest.mark.parametrize("layout", ["pip.py", "pip/__main__.py"])
@pytest.mark.parametrize("argv", [["install", "vaezoo-hello"], ["uninstall", "-y", "vaezoo-hello"]])
def test_a_pip_of_the_current_folder_is_never_run(fake_pip, tmp_path, monkeypatch, capfd, layout, argv):
    """'vaezoo install' ran 'python -m pip' in a way that imported a pip/ or pip.py of the current folder."""
    folder, marker = tmp_path / "work", tmp_path / "HIJACKED"
    (folder / layout).parent.mkdir(parents=True, exist_ok=True)
    (folder / layout).write_text(HIJACK.format(marker=str(marker)), encoding="utf-8")
    if layout.startswith("pip/"):
        (folder / "pip" / "__init__.py").write_text(HIJACK.format(marker=str(marker)), encoding="utf-8")
    monkeypatch.chdir(folder)
    code, _, err = cli(capfd, *argv)
    assert code == 0, err
    assert not marker.exists()
    packages = [a for a in argv[1:] if a != "-y"]
    expected = argv[:1] + (packages + ["--yes"] if "-y" in argv else ["--", *packages])  # install: none read as options
    assert [call[1:] for call in pip_calls(fake_pip)] == [expected]


def _requirements(tmp_path, text: str, name: str = "requirements.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("how", ["-r", "--requirement=", "-r<nested>", "-r<continued>", "wheel", "wheel path",
                                 "wheel url"])
def test_the_guard_on_vaezoo_holds_for_requirements_files_and_wheels(fake_pip, tmp_path, capfd, how):
    """-r FILE, --requirement=FILE and a wheel's file name bypassed 'never uninstall vaezoo'."""
    wheel = "vaezoo-0.1.0-py3-none-any.whl"
    argv = {
        "-r": ["-r", str(_requirements(tmp_path, "vaezoo-hello\nVaezoo[hub]>=0.1  # mine\n"))],
        "--requirement=": [f"--requirement={_requirements(tmp_path, 'vaezoo')}"],
        "-r<nested>": ["-r", str(_requirements(tmp_path, "# top\n-r inner.txt\n", "outer.txt"))],
        "-r<continued>": ["-r", str(_requirements(tmp_path, "vaezoo-hello\nvae\\\nzoo==0.1.0\n"))],
        "wheel": [wheel],
        "wheel path": [f"./dist/{wheel}"],
        "wheel url": [f"https://example.org/files/{wheel}#sha256=00"],
    }[how]
    _requirements(tmp_path, "vaezoo; python_version >= '3'\n", "inner.txt")
    code, out, err = cli(capfd, "uninstall", "-y", *argv)
    assert (code, out) == (1, "")
    assert_one_line_error(err, "refusing to uninstall vaezoo itself", "which runs this command; use pip: ")
    assert pip_calls(fake_pip) == []


@pytest.mark.parametrize("given", ["-r", "--requirement=x.txt", "--python=/usr/bin/python3", "./dist/mine",
                                   "mine-0.1.tar.gz", "https://example.org/mine.zip", "-e<in a file>", "x; rm -rf"])
def test_what_uninstall_cannot_name_before_pip_runs_is_refused(fake_pip, tmp_path, capfd, given):
    """An option smuggled after '--', a path, an archive or an editable line could be vaezoo: said in one line."""
    argv = ["-r", str(_requirements(tmp_path, "-e .\n"))] if given == "-e<in a file>" else ["--", given]
    code, out, err = cli(capfd, "uninstall", "-y", *argv)
    assert (code, out) == (1, "")
    assert_one_line_error(err, "is an option, not a distribution" if given.startswith("-") and "<" not in given
                          else "editable project" if "<" in given else "names no distribution vaezoo can tell")
    assert pip_calls(fake_pip) == []


def _vaezoo_requirements() -> list[str]:
    try:
        requires = metadata.requires("vaezoo") or []
    except metadata.PackageNotFoundError:
        pytest.skip("vaezoo is not installed here: it declares no requirements")
    return [re.match(r"[A-Za-z0-9._-]+", r)[0] for r in requires if "extra" not in r.partition(";")[2]]


def test_uninstall_refuses_every_distribution_vaezoo_needs_naming_why(fake_pip, tmp_path, capfd):
    """uninstall of pydantic, pluggy or torch left vaezoo unable to start, without a warning. The class: each of
    vaezoo's own requirements, and what they need in turn (pydantic-core through pydantic), by name or in a file."""
    own = _vaezoo_requirements()
    assert {"pydantic", "pluggy", "torch"} <= set(own)
    for name in own:
        code, out, err = cli(capfd, "uninstall", "-y", "vaezoo-hello", name)
        assert (code, out) == (1, ""), name
        assert_one_line_error(err, f"refusing to uninstall {name}: vaezoo needs ", "to start (vaezoo requires ",
                              "if you mean it, use pip: ")
    through = [name for name, why in needed_by_vaezoo().items() if "through" in why]
    assert through  # pydantic's pydantic-core, torch's sympy, ...
    code, _, err = cli(capfd, "uninstall", "-y", "-r", str(_requirements(tmp_path, f"{through[0]}\n")))
    assert code == 1
    assert_one_line_error(err, f"refusing to uninstall {through[0]}: ", "(vaezoo needs it through ")
    assert pip_calls(fake_pip) == []


def test_a_plugin_vaezoo_does_not_need_is_still_uninstalled(fake_pip, tmp_path, capfd):
    """A requirements file and a wheel of plugins go to pip as given (the fake pip reads no file)."""
    requirements = _requirements(tmp_path, "vaezoo-hello --hash=sha256:00\n"
                                           "./dist/vaezoo_laplace-0.2-py3-none-any.whl\n")
    code, _, err = cli(capfd, "uninstall", "-y", "vaezoo-other", "-r", str(requirements))
    assert code == 0, err
    assert pip_calls(fake_pip) == [[pip_calls(fake_pip)[0][0], "uninstall", "vaezoo-other",
                                    f"--requirement={requirements}", "--yes"]]


SITECUSTOMIZE = """
import atexit, sys
print("sitecustomize: hello")
print('{"not": "the list"}')
atexit.register(print, "sitecustomize: bye")
"""


@pytest.mark.parametrize("argv", [["install", "vaezoo-hello"], ["uninstall", "-y", "vaezoo-hello"]])
def test_a_sitecustomize_that_prints_at_start_up_leaves_install_working(fake_pip, capfd, argv):
    """It ended 'install' in a JSON traceback: the list of plugins is read from its own marked line."""
    (fake_pip / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    code, out, err = cli(capfd, *argv)
    assert code == 0 and "Traceback" not in err, err
    expected = "plugin added: hello" if argv[0] == "install" else "no plugin removed"
    assert expected in out


def test_an_interpreter_that_prints_no_list_is_one_line(fake_pip, capfd):
    (fake_pip / "sitecustomize.py").write_text("import os\nprint('hello')\nos._exit(0)\n", encoding="utf-8")
    code, out, err = cli(capfd, "install", "vaezoo-hello")
    assert code == 1
    assert_one_line_error(err, "cannot list the environment's plugins: ", "printed no list of them")
