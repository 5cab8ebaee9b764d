"""A test that reads ../shared skips where it is absent, and fails instead under VAEZOO_REQUIRE_SHARED=1 (CI)."""

from __future__ import annotations

import pytest

from kit import REPO, REQUIRE_SHARED, require_shared


def test_a_missing_shared_path_skips_naming_it(tmp_path, monkeypatch):
    monkeypatch.delenv(REQUIRE_SHARED, raising=False)
    require_shared(tmp_path)  # present: nothing happens
    with pytest.raises(pytest.skip.Exception, match="nothing-here absent here"):
        require_shared(tmp_path, tmp_path / "nothing-here")


def test_a_missing_shared_path_fails_when_ci_requires_shared(tmp_path, monkeypatch):
    monkeypatch.setenv(REQUIRE_SHARED, "1")
    with pytest.raises(pytest.fail.Exception, match=f"nothing-here absent here .*; {REQUIRE_SHARED}=1 requires it"):
        require_shared(tmp_path / "nothing-here")


def test_ci_requires_shared_before_it_runs_the_tests():
    script = (REPO / ".ci" / "run").read_text()
    assert script.index(f"export {REQUIRE_SHARED}=1") < script.index('bash -euo pipefail -c "$tests"')
