"""vaezoo ships ``py.typed``: its type hints are a promise to its users' type checkers, checked here as one reads
them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kit import REPO


@pytest.mark.slow
def test_the_public_api_as_the_docs_call_it_passes_a_users_strict_type_check(tmp_path):
    """tests/typing/public_api.py calls the public API as README.md, docs/plugins.md and CONTRIBUTING.md do, with
    the types they give; ``mypy --strict`` reads it against the checkout's vaezoo, whose own modules' errors are
    silenced as an installed package's are, so that each error is one a wrong or missing hint gives a user."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir",
                             str(tmp_path / "cache"), "tests/typing/public_api.py"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
