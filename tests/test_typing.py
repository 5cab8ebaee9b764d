"""vaezoo ships ``py.typed``: its type hints are a promise to its users' type checkers, checked here as one reads
them, and so do the packages authors start from (``vaezoo new-plugin``'s and examples/vaezoo-laplace)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kit import REPO
from vaezoo.cli import main
from vaezoo.extras.scaffold import KINDS

PUBLIC_API = REPO / "tests" / "typing" / "public_api.py"
EXAMPLE = REPO / "examples" / "vaezoo-laplace"


@pytest.fixture(scope="module")
def strict_type_check(tmp_path_factory) -> tuple[list[Path], subprocess.CompletedProcess]:
    """ONE ``mypy --strict`` run (each run reads vaezoo's and torch's hints anew, most of its time) over
    tests/typing/public_api.py, examples/vaezoo-laplace's package and tests, and the package and tests of each kind
    new-plugin writes, with vaezoo's own modules' errors silenced as an installed package's are:
    ``(the packages' folders, mypy's result)``."""
    src = tmp_path_factory.mktemp("src")
    packages = [EXAMPLE / "vaezoo_laplace", EXAMPLE / "tests"]
    for kind in sorted(KINDS):
        assert main(["new-plugin", f"demo-{kind}", "--kind", kind, "--dir", str(src)]) == 0
        root = src / f"vaezoo-demo-{kind}"
        packages += [root / f"vaezoo_demo_{kind}", root / "tests"]
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir",
                             str(tmp_path_factory.mktemp("cache")), str(PUBLIC_API), *map(str, packages)],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: errors found; 2: mypy could not check
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert errors == errors_in(result, [PUBLIC_API, *packages]), result.stdout  # each is one of the tests' below
    return packages, result


def errors_in(result: subprocess.CompletedProcess, sources: list[Path]) -> list[str]:
    """mypy's error lines in the files under ``sources`` (mypy names a file under its working folder, REPO,
    relative to it)."""
    names = [str(source.relative_to(REPO) if source.is_relative_to(REPO) else source) for source in sources]
    return [line for line in result.stdout.splitlines()
            if ": error:" in line and any(line.startswith(name) for name in names)]


@pytest.mark.slow
def test_the_public_api_as_the_docs_call_it_passes_a_users_strict_type_check(strict_type_check):
    """tests/typing/public_api.py calls the public API as README.md, docs/plugins.md and CONTRIBUTING.md do, with
    the types they give; ``mypy --strict`` reads it against the checkout's vaezoo, whose own modules' errors are
    silenced as an installed package's are, so that each error is one a wrong or missing hint gives a user."""
    _, result = strict_type_check
    assert not errors_in(result, [PUBLIC_API]), result.stdout + result.stderr


@pytest.mark.slow
def test_every_kind_of_package_and_the_example_plugin_pass_a_strict_type_check(strict_type_check):
    """The packages authors start from ship ``py.typed`` and hold to ``mypy --strict`` against vaezoo's hints, as
    vaezoo's public API does: every kind's package and tests, and examples/vaezoo-laplace's."""
    packages, result = strict_type_check
    assert not errors_in(result, packages), result.stdout + result.stderr
