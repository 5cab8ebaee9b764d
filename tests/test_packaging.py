"""The wheel and the sdist: built from a copy of the checkout, installed into a temporary target, used from
outside the tree.

The installed vaezoo must list the zoo's cards, load every entry (pretrained whenever its card has weights)
and find its built-in plugins through the entry points in the wheel's metadata, with the source tree out of
reach: the subprocess runs with ``-S`` (so the editable install's path hook is not loaded) and a PYTHONPATH
of the target plus the environment's site-packages (for torch and the other dependencies). The sdist is the
checkout, its zoo once, and the wheel built from it is the checkout's, byte for byte.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pathspec
import pytest

from kit import REPO
from vaezoo.entries.catalog import parse_card

pytestmark = pytest.mark.slow

IGNORED = shutil.ignore_patterns(".git", "venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                 ".hypothesis", "runs", "*.pt")

CHECK_INSTALLED = """
import json, sys
import vaezoo
from vaezoo.plugins import get_plugins
from vaezoo.entries.catalog import get_card

loaded = {}
for name in vaezoo.list_models():
    card = get_card(name)
    model = vaezoo.load(name, pretrained=card.weights is not None)
    loaded[name] = {"pretrained": card.weights is not None, "parameters": sum(p.numel() for p in model.parameters()),
                    "card": str(card.path), "training": model.training}
plugins = get_plugins()
modules = {m: getattr(sys.modules[m], "__file__", None) for m in sorted(sys.modules) if m.startswith("vaezoo")}
print(json.dumps({"loaded": loaded, "status": {n: i.status for n, i in plugins.info.items()}, "modules": modules,
                  "sys_path": sys.path}))
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the checkout, its link plugins/vaezoo_zoo a link (the checkout itself stays untouched)."""
    copy = tmp_path_factory.mktemp("source") / "vaezoo"
    shutil.copytree(REPO, copy, symlinks=True, ignore=IGNORED)
    return copy


def build(kind: str, source: Path, dist: Path) -> Path:
    """The ``kind`` ("wheel" or "sdist") of the project at ``source``, built into ``dist``."""
    # Without hatchling in this environment, build fetches it into an isolated environment instead.
    isolation = ["--no-isolation"] if importlib.util.find_spec("hatchling") else []
    command = [sys.executable, "-m", "build", f"--{kind}", *isolation, "--outdir", str(dist), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (built,) = dist.glob("vaezoo-*.whl" if kind == "wheel" else "vaezoo-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def wheel(source, tmp_path_factory) -> Path:
    """A wheel built from a copy of the checkout."""
    return build("wheel", source, tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def sdist(source, tmp_path_factory) -> Path:
    """An sdist built from a copy of the checkout."""
    return build("sdist", source, tmp_path_factory.mktemp("sdist"))


@pytest.fixture(scope="module")
def unpacked(sdist, tmp_path_factory) -> Path:
    """The sdist unpacked, as a user who downloads it has it."""
    folder = tmp_path_factory.mktemp("unpacked")
    with tarfile.open(sdist) as archive:
        archive.extractall(folder, filter="data")
    (root,) = folder.iterdir()
    return root


@pytest.fixture(scope="module")
def sdist_wheel(unpacked, tmp_path_factory) -> Path:
    """The wheel built from the unpacked sdist, as pip builds it to install the sdist."""
    return build("wheel", unpacked, tmp_path_factory.mktemp("sdist_wheel"))


def zoo_cards():
    return [parse_card(path) for path in sorted((REPO / "zoo_cards").glob("*.toml"))]


def test_wheel_metadata_declares_the_plugins_and_the_script(wheel):
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    with zipfile.ZipFile(wheel) as archive:
        (entry_points_file,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(entry_points_file).decode())
        names = set(archive.namelist())
    assert dict(parser["vaezoo"]) == declared["entry-points"]["vaezoo"]
    assert dict(parser["console_scripts"]) == declared["scripts"]
    for module in declared["entry-points"]["vaezoo"].values():
        assert f"{module.replace('.', '/')}/__init__.py" in names, f"plugin package {module} is missing from the wheel"
    from vaezoo.version import __version__

    assert wheel.name.startswith(f"vaezoo-{__version__}-")  # one version: vaezoo/version.py's


def test_wheel_ships_every_zoo_card_and_its_weights(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    cards = zoo_cards()
    assert cards, "zoo_cards/ holds no card"
    for card in cards:
        assert f"vaezoo_zoo/{card.path.name}" in names
        if card.weights is not None and card.weights.file is not None:
            assert f"vaezoo_zoo/{card.weights.file}" in names, f"weights of {card.name} are missing from the wheel"


def test_wheel_carries_every_file_of_the_packages(wheel):
    """Every module, template, recipe, card and weights file of vaezoo/ and plugins/: nothing is listed by hand."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    expected = set()
    for root, prefix in ((REPO / "vaezoo", "vaezoo"), (REPO / "plugins", "")):
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                expected.add(f"{prefix}/{path.relative_to(root).as_posix()}".lstrip("/"))
    assert expected - names == set()
    assert "vaezoo/cli/__init__.py" in names and "vaezoo/py.typed" in names


def install_outside(wheel: Path, tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """``(target, env, outside)``: the wheel installed into ``target``, an environment whose Python finds it
    and the environment's dependencies but not the .pth files (so not the editable install's hook), and an
    empty folder outside the checkout to run from."""
    target = tmp_path / "target"
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                             "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    site = [sysconfig.get_paths()[key] for key in ("purelib", "platlib")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAEZOO_") or k == "VAEZOO_HOME"}
    env["PYTHONPATH"] = os.pathsep.join([str(target), *dict.fromkeys(site)])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    return target, env, outside


def test_installed_wheel_loads_the_zoo_outside_the_checkout(wheel, tmp_path):
    target, env, outside = install_outside(wheel, tmp_path)
    result = subprocess.run([sys.executable, "-S", "-c", CHECK_INSTALLED], cwd=outside, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])

    # the checkout itself is not importable (a virtual environment inside it, as in CI, is allowed)
    checkout = [entry for entry in report["sys_path"]
                if entry and Path(entry).is_relative_to(REPO) and not Path(entry).is_relative_to(sys.prefix)]
    assert not checkout, checkout
    for module, path in report["modules"].items():
        assert path is None or Path(path).is_relative_to(target), f"{module} came from {path}"
    assert all(status == "ok" for status in report["status"].values()), report["status"]
    expected = {card.name: card for card in zoo_cards()}
    assert sorted(report["loaded"]) == sorted(expected)
    for name, loaded in report["loaded"].items():
        assert Path(loaded["card"]).is_relative_to(target)
        assert loaded["pretrained"] == (expected[name].weights is not None)
        assert loaded["parameters"] > 0 and loaded["training"] is False


def _installed_cli(wheel: Path, tmp_path: Path):
    """Run the wheel's ``vaezoo`` command (``-S``: no editable-install hook) from a folder outside the checkout."""
    _, env, outside = install_outside(wheel, tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess:
        code = "import sys; from vaezoo.cli import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-S", "-c", code, *args], cwd=outside, env=env,
                              capture_output=True, text=True, timeout=600)

    return run, outside


def test_installed_wheel_runs_every_command_outside_the_checkout(wheel, tmp_path):
    from vaezoo.cli import COMMANDS

    run, outside = _installed_cli(wheel, tmp_path)
    result = run("--help")
    assert result.returncode == 0, result.stderr
    for command in COMMANDS:
        assert command in result.stdout
        helped = run(command, "--help")
        assert helped.returncode == 0 and "usage: vaezoo" in helped.stdout, (command, helped.stderr[-2000:])
    names = [card.name for card in zoo_cards()]
    listed = run("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(entry["name"] for entry in json.loads(listed.stdout)) == sorted(names)
    for args in (("list",), ("info", names[0]), ("plugins",), ("verify",)):
        result = run(*args)
        assert result.returncode == 0, (args, result.stderr[-2000:])
        assert result.stdout.strip(), args
    assert "Traceback" not in run("info", "no-such-model").stderr
    picture = outside / "samples.png"
    shown = run("show", "jointvae-mnist", "sample", "--n", "4", "-o", str(picture))
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert picture.read_bytes().startswith(b"\x89PNG")


# --- the sdist ----------------------------------------------------------------------------------------------------

def test_sdist_is_the_checkout_with_the_zoo_once(sdist, source):
    """What git tracks (the tests, docs, examples, benchmarks with their results, CONTRIBUTING, LICENSE, zoo_cards/)
    but CI's script, each file once: the zoo's cards and weights in zoo_cards/, not again through their link."""
    with tarfile.open(sdist) as archive:
        names = [member.name.partition("/")[2] for member in archive.getmembers() if member.isfile()]
    assert len(names) == len(set(names)), "a file is in the sdist twice"
    ignored = pathspec.GitIgnoreSpec.from_lines((source / ".gitignore").read_text(encoding="utf-8").splitlines())
    checkout = {(Path(folder) / file).relative_to(source).as_posix()  # os.walk does not follow the link
                for folder, _, files in os.walk(source) for file in files}
    assert ".ci/run" in checkout
    expected = {name for name in checkout if not ignored.match_file(name) and not name.startswith(".ci/")}
    assert set(names) == expected | {"PKG-INFO"}
    for card in zoo_cards():
        assert f"zoo_cards/{card.path.name}" in names
        if card.weights is not None and card.weights.file is not None:
            assert f"zoo_cards/{card.weights.file}" in names
    assert not [name for name in names if name.startswith("plugins/vaezoo_zoo/")]


def test_the_wheel_built_from_the_sdist_is_the_checkouts(sdist_wheel, wheel):
    with zipfile.ZipFile(wheel) as ours, zipfile.ZipFile(sdist_wheel) as theirs:
        names = sorted(ours.namelist())
        assert sorted(theirs.namelist()) == names
        for name in names:
            mine, other = ours.read(name), theirs.read(name)
            if name.endswith(".dist-info/RECORD"):  # the same files, hashes and sizes, listed in another order
                mine, other = sorted(mine.splitlines()), sorted(other.splitlines())
            assert mine == other, f"{name} differs"
    assert [n for n in names if n.startswith("vaezoo_zoo/") and n.endswith(".safetensors")]


SUITE_PART = ["tests/test_card_comments.py", "tests/test_docs.py", "tests/test_layers.py", "tests/test_betatcvae.py",
              "tests/test_device_campaign.py", "tests/test_dsprites.py"]
"""Tests that read the checkout beyond vaezoo/: zoo_cards/, the docs, plugins/, benchmarks/' scripts."""


SKIPS = ("absent here (../shared beside the repository)", "marked no-run")
"""Why a test of SUITE_PART may skip, from the sdist as from the checkout copy (neither has ../shared beside it)."""


def test_the_test_suite_reads_from_the_sdist_what_it_reads_from_the_checkout(source, unpacked, sdist_wheel,
                                                                           tmp_path):
    """The tests, run from the unpacked sdist with vaezoo installed from it: the checkout's tests, none fails, and
    none skips but for want of ../shared or as a page's no-run example (as from the checkout)."""
    _, env, _ = install_outside(sdist_wheel, tmp_path / "installed")
    env["VAEZOO_HOME"] = str(tmp_path / "home")
    pytest_command = [sys.executable, "-S", "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                      "-m", "not slow"]
    collected = subprocess.run([*pytest_command, "--collect-only", *SUITE_PART], cwd=source, env=env,
                               capture_output=True, text=True, timeout=900)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    expected = {line for line in collected.stdout.splitlines() if "::" in line}
    report = tmp_path / "sdist.xml"
    ran = subprocess.run([*pytest_command, f"--junitxml={report}", *SUITE_PART], cwd=unpacked, env=env,
                         capture_output=True, text=True, timeout=900)
    assert report.exists(), ran.stdout[-3000:] + ran.stderr[-3000:]
    outcomes = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        path = case.get("classname").replace(".", "/")  # tests.test_docs -> tests/test_docs(.py)
        outcomes[f"{path}.py::{case.get('name')}"] = next(
            ((part.tag, part.get("message", "")) for part in case if part.tag in ("failure", "error", "skipped")),
            ("passed", ""))
    assert set(outcomes) == expected, (sorted(expected - set(outcomes))[:5], sorted(set(outcomes) - expected)[:5])
    assert [o for o in outcomes.values() if o[0] == "passed"]
    failed = {test: outcome for test, outcome in outcomes.items() if outcome[0] in ("failure", "error")}
    assert not failed, failed
    skipped = {test: why for test, (what, why) in outcomes.items() if what == "skipped"}
    assert all(any(reason in why for reason in SKIPS) for why in skipped.values()), skipped
