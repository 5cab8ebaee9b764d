"""Careless use, as a user meets vaezoo (round 15): a card folder removed or looping in the middle of a batch, a
batch stopped with Ctrl-C, a gallery into a folder that is a loop of links, VAEZOO_HOME a file, a dataset's name
mistyped, the conformance kit given a name where it takes a model. Each is one line naming the problem."""

from __future__ import annotations


import pytest
from kit import cli, make_card, write_entry



@pytest.fixture
def two_runs(data_plugin, cards_dir, tmp_path):
    """Two folders each holding the tiny card with its weights: runs/a, runs/b."""
    return [write_entry(tmp_path / "runs" / name, make_card("tiny"))[0].parent for name in ("a", "b")]


def test_a_batch_names_a_card_it_cannot_read_once(two_runs, tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, _, err = cli(capsys, "eval", str(two_runs[0]), str(loop))
    assert code == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"error: {loop}: cannot read card") and f"{loop}: {loop}:" not in line, err
