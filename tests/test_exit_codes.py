"""The exit codes README's "Scripts and CI" gives, held for every command: 2 where the command line asks for what
cannot be (argparse's usage errors, and a value out of its range, of the wrong form or excluding another, which
vaezoo refuses itself), 1 where the work fails or is refused (a card, file or name that is not there or not
usable), 0 where it is done."""

from __future__ import annotations

import argparse

import pytest
from kit import cli, make_card, write_entry

from vaezoo.cli import build_parser
from vaezoo.cli.common import whole_arg

# The command line of each command that does its work (or fails at it) but for what a case adds: CARD is the tiny
# card's folder, TMP a folder of the test's own.
BASE = {
    "list": [], "info": ["CARD"], "plugins": [], "verify": ["CARD"], "train": ["CARD", "-o", "TMP/run"],
    "eval": ["CARD"], "seeds": ["CARD"], "convert": ["nosuch", "TMP/x.pt", "--dataset", "tiny_blobs", "-o", "TMP/c"],
    "show": ["CARD", "sample", "-o", "TMP/x.png"], "completion": ["bash"], "gallery": ["TMP/gallery"],
    "install": ["-e", "TMP/nothing"], "uninstall": ["vaezoo", "--yes"], "leaderboard": ["nosuch"],
    "new-plugin": ["scratch", "--dir", "TMP/plugins"], "push": ["CARD", "owner/repo", "--dry-run"],
    "study": ["TMP/study", "TMP/nothing"],
}

# Each command's refusals beyond a whole number out of range (test_a_count_out_of_range_is_a_usage_error): (its
# command line, exit code, the end of its error line).
CASES = {
    "list": [(["--where", "beta"], 2, "--where takes KEY=VALUE, got 'beta'"),
             (["--where", " =6"], 2, "--where needs a field name before '=', got ' =6'")],
    "info": [(["nosuch"], 1, "")],
    "verify": [(["nosuch"], 1, "")],
    "train": [([*BASE["train"], "--epochs", "0"], 2, "--epochs must be greater than 0, got 0"),
              ([*BASE["train"], "--checkpoint-every", "0"], 2, "--checkpoint-every must be greater than 0, got 0"),
              ([*BASE["train"], "--max-steps", "0"], 2, "--max-steps must be at least 1, got 0"),
              ([*BASE["train"], "--sweep", "beta"], 2, "--sweep takes KEY=V1,V2,..., got 'beta'"),
              ([*BASE["train"], "--seeds", "1,1"], 2, "--seeds must name each seed once, got 1,1"),
              ([*BASE["train"], "--sweep", "beta=1,1.0"], 2, "make the same card; give each value once"),
              ([*BASE["train"], "--sweep", "seed=1,2"], 2, "--sweep seed: give the seeds with --seeds"),
              ([*BASE["train"], "--sweep", "epochs=1,2", "--sweep", "train.steps=1,2"], 2,
               "and does not change what it trains; sweep a field of the recipe"),
              ([*BASE["train"], "--epochs", "x"], 2, "argument --epochs: give a whole number, e.g. 10, got 'x'"),
              ([*BASE["train"], "--name", "My Run"], 2, "--name 'My Run' is not a card name: use lowercase letters "
                                                        "and digits joined by '-', '_' or '.'; give the run's card one "
                                                        "with --name"),
              (["nosuch", "-o", "TMP/run"], 1, "")],
    "eval": [(["CARD", "--jobs", "0"], 2, "argument --jobs: give a whole number of processes >= 1, e.g. 2, got '0'"),
             (["nosuch"], 1, "")],
    "seeds": [(["CARD", "TMP/nothing"], 1, "")],
    "convert": [(BASE["convert"], 1, "")],
    "show": [([*BASE["show"], "--scale", "0"], 2, "--scale must be at least 1, got 0"),
             ([*BASE["show"], "--columns", "0"], 2, "--columns must be a whole number >= 1, got 0"),
             ([*BASE["show"], "-n", "0"], 2, "--n must be a whole number >= 1, got 0"),
             (["CARD", "sample", "-o", "TMP/x.jpg"], 1, "give a .png file name, not 'TMP/x.jpg'")],
    "completion": [(["nosh"], 2, "argument shell: invalid choice: 'nosh' (choose from 'bash', 'zsh', 'fish', "
                                  "'tcsh', 'powershell')")],
    "gallery": [(BASE["gallery"], 1, "")],
    "install": [(BASE["install"], 1, "")],
    "uninstall": [(BASE["uninstall"], 1, "")],
    "leaderboard": [(BASE["leaderboard"], 1, "")],
    "new-plugin": [(["Not_A_Name", "--dir", "TMP/plugins"], 2, "invalid plugin name 'Not_A_Name': use lowercase "
                    "letters, digits and single hyphens, starting with a letter (e.g. 'sparse-vae')"),
                   (["vaezoo-x", "--dir", "TMP/plugins"], 2, "give it without the 'vaezoo-' prefix, which is added "
                                                             "to the package's name")],
    "push": [(["CARD", "--all", "owner"], 2, "--all OWNER pushes the whole zoo; give no CARD or OWNER/REPO with it"),
             (["CARD", "--dry-run"], 2, "give CARD and OWNER/REPO (vaezoo push CARD OWNER/REPO), or --all OWNER "
                                        "--dry-run"),
             ([*BASE["push"], "-m", "x"], 2, "--commit-message and --revision go with an upload; --dry-run commits "
                                             "nothing")],
    "study": [(BASE["study"], 1, "")],
}


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.fixture
def run(data_plugin, cards_dir, tmp_path, monkeypatch, capsys):
    """Run ``vaezoo COMMAND WORDS`` (CARD: the tiny card's folder, TMP: the test's folder): ``(code, stdout,
    stderr)``."""
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "testdata")  # no zoo: the tiny card alone, on no card folder
    card = write_entry(tmp_path / "entry", make_card("tiny"))[0].parent
    monkeypatch.chdir(tmp_path)

    def run_command(command: str, words: list[str]) -> tuple[int, str, str]:
        return cli(capsys, command, *(w.replace("CARD", str(card)).replace("TMP", str(tmp_path)) for w in words))

    return run_command


def test_every_command_has_its_cases():
    assert set(_commands()) == set(BASE)
    assert set(CASES) | {"plugins"} == set(BASE)


@pytest.mark.parametrize(("command", "words", "code", "said"),
                         [(command, *case) for command, cases in CASES.items() for case in cases])
def test_a_command_s_refusal_has_the_readme_s_exit_code(run, tmp_path, command, words, code, said):
    got, out, err = run(command, words)
    last = err.strip().splitlines()[-1]
    assert (got, out) == (code, ""), err
    assert "error: " in last and last.endswith(said.replace("TMP", str(tmp_path))) and "Traceback" not in err, err
    assert not (tmp_path / "run").exists() and not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("command", sorted(BASE))
def test_an_unknown_option_is_a_usage_error(run, command):
    code, out, err = run(command, [*BASE[command], "--no-such-option"])
    assert (code, out) == (2, "")
    assert err.strip().splitlines()[-1] == f"vaezoo {command}: error: unrecognized arguments: --no-such-option"


def _counts() -> list[tuple[str, str]]:
    """Every option of every command that takes a whole number (a count, a step), as its longest flag."""
    return [(command, max(action.option_strings, key=len)) for command, parser in _commands().items()
            for action in parser._actions if action.type is whole_arg]


@pytest.mark.parametrize(("command", "option"), _counts())
def test_a_count_out_of_range_is_a_usage_error(run, tmp_path, command, option):
    code, out, err = run(command, [*BASE[command], option, "-1"])
    assert (code, out) == (2, ""), err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") and option in last and last.endswith("got -1"), err
    assert not (tmp_path / "run").exists() and not (tmp_path / "x.png").exists()


def test_a_run_s_default_name_that_its_card_s_long_name_makes_too_long_is_no_usage_error(run, tmp_path):
    """The command line gives no --name: the card's own name, of 197 characters, makes the default CARD-run too
    long, which the command line alone does not show; it exited 2 saying '--name has 201 characters'."""
    long = write_entry(tmp_path / "long", make_card("tiny", "x" * 197))[0].parent
    code, out, err = run("train", [str(long), "-o", "TMP/run"])
    assert (code, out) == (1, ""), err
    assert err.strip().splitlines()[-1] == ("error: the default name of the run's card has 201 characters, more than "
                                            "the 200 a card name may have (files are named after it); give the run's "
                                            "card a shorter one with --name")
    assert not (tmp_path / "run").exists()
