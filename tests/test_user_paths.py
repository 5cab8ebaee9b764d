"""Paths as a careless user gives them: ``~`` left to vaezoo by the shell, and a folder, file or checkpoint
given where another kind of thing is expected."""

from __future__ import annotations

import pytest
from kit import cli, make_card, write_card


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder of its own, and a working folder beside it (not inside it)."""
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return home


def test_a_tilde_the_shell_left_in_out_and_checkpoint_is_the_home_folder(home, data_plugin, capsys):
    """``--out=~/run`` (the shell expands no ``~`` after ``=``, nor in quotes): the run goes in the home folder,
    as a card's path is read there; it made a folder named ``~`` in the working folder, then failed (exit 2)
    reading the card back from the home folder."""
    card = write_card(home.parent / "cards", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(card), "--out=~/run", "--max-steps", "2", "--no-eval")
    assert code == 0, err
    assert not (home.parent / "work" / "~").exists()
    assert (home / "run" / "tiny-blobs-run.toml").is_file() and (home / "run" / "checkpoint.pt").is_file()
    assert out.strip() == str(home / "run" / "tiny-blobs-run.toml")
    code, out, err = cli(capsys, "eval", "~/run", "--checkpoint", "~/run/checkpoint.pt", "--json")
    assert code == 0, err
    assert '"step": 2' in out
