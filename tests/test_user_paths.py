"""Paths as a careless user gives them: ``~`` left to vaezoo by the shell, a folder, file or checkpoint given
where another kind of thing is expected, and a run folder tidied by hand."""

from __future__ import annotations

import json
import re

import pytest
from kit import cli, make_card, serve_entry, write_card, write_entry


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


def test_a_checkpoint_that_may_not_be_read_is_not_called_damaged_nor_to_be_removed(tmp_path, data_plugin, capsys,
                                                                                   monkeypatch):
    """A checkpoint its user may not read (chmod 000, another user's run): ``train --resume`` said it was not a file
    torch.save wrote, or damaged, and told the user to remove it to start over, losing the run."""
    from vaezoo.entries import checkpoints

    card = write_card(tmp_path / "cards", make_card("tiny"))
    out = tmp_path / "run"
    assert cli(capsys, "train", str(card), "--out", str(out), "--max-steps", "4", "--no-eval")[0] == 0

    def refused(path, *args, **kwargs):  # as torch.load meets chmod 000 for a user without root (the tests run as root)
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(checkpoints.torch, "load", refused)
    for argv in (["train", str(card), "--out", str(out), "--resume"],
                 ["eval", str(out), "--checkpoint", str(out / "checkpoint.pt")]):
        code, _, err = cli(capsys, *argv)
        assert code == 1 and "Traceback" not in err
        assert err.splitlines()[-1] == (f"error: cannot read checkpoint {out / 'checkpoint.pt'}: Permission denied; "
                                        f"make it readable (chmod u+r), or give a copy you can read")
    assert (out / "checkpoint.pt").is_file()


@pytest.mark.parametrize("command", ["info", "eval", "seeds"])
def test_the_folder_of_an_ensemble_given_as_a_run_names_its_runs(tmp_path, capsys, cards, command):
    """``vaezoo train --seeds 1,2 --out runs/s`` writes ``runs/s/seed-1`` and ``runs/s/seed-2``; giving ``runs/s``
    (to ``seeds`` beside the card, say) said the folder must hold one card and to give the card file's path."""
    out = tmp_path / "s"
    for folder in ("seed-1", "beta=2/seed-1", "beta=2/seed-2", "beta=4/seed-1"):
        write_card(out / folder, make_card("tiny"))
    card = write_card(tmp_path / "mine", make_card("tiny"))
    argv = {"info": [str(out)], "eval": [str(out)], "seeds": [str(card), str(out)]}[command]
    code, _, err = cli(capsys, command, *argv)
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"error: folder {out} holds no card of its own but 4 folder(s) holding one (as 'vaezoo train --seeds' or "
        f"'--sweep' writes its runs): {out / 'beta=2/seed-1'}, {out / 'beta=2/seed-2'}, {out / 'beta=4/seed-1'} and 1 "
        f"more; give those")


def test_the_folder_of_a_run_not_finished_names_its_checkpoint(tmp_path, capsys, cards):
    """A run still training (or stopped) holds only its checkpoint: ``vaezoo eval RUN`` said to give the card file's
    path, which does not exist yet."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"\0")
    code, _, err = cli(capsys, "eval", str(run), "--write")
    assert code == 1 and err.splitlines()[-1] == (
        f"error: folder {run} holds no card yet, only the checkpoint of a run that has not finished: finish it with "
        f"'vaezoo train CARD --out {run} --resume', or measure the checkpoint with 'vaezoo eval CARD --checkpoint "
        f"{run / 'checkpoint.pt'}'")
    (run / "checkpoint.pt").unlink()
    code, _, err = cli(capsys, "eval", str(run))
    assert err.splitlines()[-1] == f"error: folder {run} must hold exactly one card, found no *.toml file; give the " \
                                   f"card file's path"


@pytest.mark.parametrize("text", [b"", b"\n  \n"], ids=["empty", "blank"])
def test_an_empty_card_file_is_called_empty(tmp_path, capsys, cards, text):
    """An empty ``mine.toml`` (touched, or truncated) said ``field 'name': Field required (and 8 more problems)``."""
    (cards / "mine.toml").write_bytes(text)
    code, _, err = cli(capsys, "info", str(cards / "mine.toml"))
    assert code == 1 and err == (f"error: {cards / 'mine.toml'}: is an empty file, not a card; write the card's TOML "
                                 f"in it ('vaezoo info NAME' prints a zoo card's), or give another file\n")
    code, out, err = cli(capsys, "list", "--skipped")
    assert code == 0 and "mine.toml: is an empty file, not a card" in out


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_list_skipped_of_no_skipped_card_says_so(capsys, cards, as_json):
    """It printed nothing at all, where a list that matches no card says so on stderr (README, Scripts and CI)."""
    write_card(cards, make_card(name="fine"))
    code, out, err = cli(capsys, "list", "--skipped", *(["--json"] if as_json else []))
    assert code == 0 and out == ("[]\n" if as_json else "")
    assert err == "no card was skipped: the 1 card found all read\n"


def test_resume_of_a_run_whose_checkpoint_was_removed_keeps_its_card_and_weights(tmp_path, data_plugin, capsys):
    """A finished run's folder after its user removed the big checkpoint.pt: ``train --resume`` said 'no checkpoint;
    starting from step 0', trained afresh and replaced the run's weights and card (its metrics with it)."""
    card = write_card(tmp_path / "cards", make_card("tiny"))
    out = tmp_path / "run"
    assert cli(capsys, "train", str(card), "--out", str(out), "--no-eval")[0] == 0
    (out / "checkpoint.pt").unlink()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = cli(capsys, "train", str(card), "--out", str(out), "--resume", "--epochs", "3")
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1] == (f"error: --out {out} holds the run's tiny-blobs-run.toml, "
                                    f"tiny-blobs-run.safetensors but no checkpoint.pt to resume from (removed?), and "
                                    f"starting afresh would replace them; to train it again, choose another --out")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    fresh = tmp_path / "fresh"  # --resume where nothing was trained yet still starts the run
    code, _, err = cli(capsys, "train", str(card), "--out", str(fresh), "--resume", "--max-steps", "1", "--no-eval")
    assert code == 0 and f"no checkpoint in {fresh}; starting from step 0" in err



NO_USER = "vaezoo-no-such-user"  # a user this machine does not know (the test checks it)


@pytest.mark.parametrize("where", ["VAEZOO_HOME", "VAEZOO_DATA", "the card", "--data-root", "-o/--out"])
def test_a_tilde_of_a_user_this_machine_lacks_is_one_line(home, cards_dir, data_plugin, server, capsys, monkeypatch,
                                                          where):
    """``~vaezoo-no-such-user/x`` (a typo of ``~/x``, or a user of another machine): one line naming the path and
    why it is no home folder, nothing written; pathlib raised ``RuntimeError: Could not determine home directory``
    (a traceback), and ``show -o`` wrote into a folder named ``~vaezoo-no-such-user`` in the working folder."""
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwnam(NO_USER)
    serve_entry(server, "/tiny.safetensors", cards_dir, make_card("tiny"), stem="tiny")
    path = f"~{NO_USER}/x.png"
    argv = {"the card": ["info", path], "--data-root": ["eval", "tiny-blobs", "--data-root", path],
            "-o/--out": ["show", "tiny-blobs", "sample", "-o", path]}.get(where, ["eval", "tiny-blobs"])
    if where.startswith("VAEZOO_"):
        monkeypatch.setenv(where, path)
    code, out, err = cli(capsys, *argv)
    said = (f"'{path}' begins with '~{NO_USER}', which is no home folder (no user '{NO_USER}' is known on this "
            f"machine); write the path whole, or ~/... for your own home folder")
    if where.startswith("-"):  # the command line alone shows it wrong: argparse's usage error
        assert (code, out) == (2, "") and err.endswith(f"error: argument {where}: the path {said}\n"), err
    else:
        assert (code, out) == (1, "") and err == f"error: {where} {said}\n"
    assert list((home.parent / "work").iterdir()) == [] and server.gets == {}


@pytest.fixture
def homeless(home, monkeypatch):
    """A container's user: no HOME, and no entry in the system's user list (``docker run -u 1234``, ``env -i``)."""
    import pwd

    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.delenv("HOME")
    monkeypatch.setattr(pwd, "getpwuid", no_entry)


def test_a_tilde_without_home_nor_a_user_entry_is_one_line(homeless, capsys):
    """``~/x`` there: one line saying so, not pathlib's ``RuntimeError`` traceback."""
    code, out, err = cli(capsys, "info", "~/x.toml")
    assert (code, out) == (1, "")
    assert err == ("error: the card '~/x.toml' begins with '~', which is no home folder (HOME is not set, and this "
                   "user has no home folder in the system's user list); write the path whole, or set HOME\n")


@pytest.mark.parametrize("folder", ["weights cache", "data folder"])
def test_the_default_folders_without_home_nor_a_user_entry_are_one_line(homeless, home, cards_dir, data_plugin,
                                                                         server, capsys, monkeypatch, folder):
    """The weights cache and the data folder where neither VAEZOO_HOME nor VAEZOO_DATA is set: platformdirs cannot
    place them under a home folder, and its ``RuntimeError`` was a traceback; now one line naming the variable to
    set, nothing fetched or written."""
    monkeypatch.delenv("VAEZOO_HOME")
    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    if folder == "weights cache":
        serve_entry(server, "/tiny.safetensors", cards_dir, make_card("tiny"), stem="tiny")
        said = "cannot tell where the weights cache goes: {}; set VAEZOO_HOME to a folder you can write to"
        card = "tiny-blobs"
    else:
        card = str(write_entry(cards_dir, make_card("mnist", "mnist-home"))[0])
        said = ("cannot tell where the default data folder is: {}; give --data-root, or set VAEZOO_DATA to the folder "
                "holding the datasets")
    code, out, err = cli(capsys, "eval", card)
    assert (code, out) == (1, ""), err
    assert re.fullmatch(re.escape("error: " + said).replace(r"\{\}", ".*home directory.*") + "\n", err), err
    assert list((home.parent / "work").iterdir()) == [] and server.gets == {}


def test_a_tilde_in_the_cards_path_is_the_home_folder(home, capsys, monkeypatch):
    """``VAEZOO_CARDS_PATH='~/cards'`` (quoted, or from a ``.env`` file, which no shell expands): the cards of the home
    folder's ``cards``, as VAEZOO_HOME and VAEZOO_DATA read a ``~``; the entry was skipped as no such folder."""
    write_card(home / "cards", make_card(name="mine-mnist"))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", "~/cards")
    code, out, err = cli(capsys, "list", "--json")
    assert (code, err) == (0, "")
    assert "mine-mnist" in [card["name"] for card in json.loads(out)]


def test_a_tilde_of_a_user_this_machine_lacks_as_trains_out_from_python(home, tmp_path, data_plugin):
    """``vaezoo.training.train.train(card, "~vaezoo-no-such-user/run")``: the one line, nothing written (pathlib's
    ``RuntimeError``)."""
    from vaezoo.errors import VaezooError
    from vaezoo.training.train import train

    card = write_card(tmp_path / "cards", make_card("tiny"))
    with pytest.raises(VaezooError, match=f"^the path '~{NO_USER}/run' begins with '~{NO_USER}', which is no home "
                                          f"folder"):
        train(card, f"~{NO_USER}/run", max_steps=1, evaluate=False)
    assert list((home.parent / "work").iterdir()) == [] and list(home.iterdir()) == []
