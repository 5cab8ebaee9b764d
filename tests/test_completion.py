"""Shell completion: ``vaezoo completion SHELL`` prints a script; with it, a Tab completes commands, options,
zoo names and paths, plugins' commands included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kit import child_env, install_plugin, make_card, run_vaezoo, write_card

GREETER = '''
import vaezoo
from vaezoo.cli import Command


@vaezoo.hookimpl
def vaezoo_register_commands(register):
    register("hello", Command(help="say hello", run=lambda args: None))
'''


def complete(line: str, env: dict[str, str], cwd: Path) -> list[str]:
    """What a Tab at the end of ``line`` offers in bash, with the script ``vaezoo completion bash`` prints sourced."""
    script = run_vaezoo("completion", "bash", env=env).stdout
    tab = f'''
        source /dev/stdin <<'SCRIPT'
{script}
SCRIPT
        COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; read -ra COMP_WORDS <<< "$COMP_LINE"
        [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
        COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
        _python_argcomplete vaezoo
        printf '%s\\n' "${{COMPREPLY[@]}}"
    '''
    path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])  # the vaezoo script
    done = subprocess.run(["bash", "-c", tab], env={**env, "PATH": path}, cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=True)
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return child_env(tmp_path / "home")


def test_a_tab_completes_zoo_names(env, tmp_path):
    offered = complete("vaezoo info jointvae-m", env, tmp_path)
    assert "jointvae-mnist" in offered
    assert all(word.startswith("jointvae-m") for word in offered)


def test_a_tab_completes_commands_and_options(env, tmp_path):
    assert complete("vaezoo ev", env, tmp_path) == ["eval"]
    assert complete("vaezoo eval jointvae-mnist --dev", env, tmp_path) == ["--device"]


def test_a_tab_completes_a_card_file_s_path(env, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my-card.toml").write_text("", encoding="utf-8")
    assert complete("vaezoo info mine/my", env, tmp_path) == ["mine/my-card.toml"]


@pytest.mark.parametrize("verb", ["info", "eval", "show", "verify"])
def test_a_tab_after_a_card_offers_folders_and_toml_files_not_other_files(env, tmp_path, verb):
    # it offered every file of the folder ('zz-a.png'), which no card can be
    for name in ("zz-a.png", "zz-notes.txt", "zz-card.toml"):
        (tmp_path / name).write_text("", encoding="utf-8")
    (tmp_path / "zz-runs").mkdir()
    assert sorted(complete(f"vaezoo {verb} zz", env, tmp_path)) == ["zz-card.toml", "zz-runs/"]


def test_a_tab_completes_a_plugin_s_command(tmp_path):
    site = tmp_path / "site"
    install_plugin(site, "greeter", GREETER)
    assert complete("vaezoo hel", child_env(tmp_path / "home", site=site), tmp_path) == ["hello"]


@pytest.mark.parametrize("shell", ["zsh", "fish", "tcsh", "powershell"])
def test_each_shell_gets_a_script_for_vaezoo(env, shell):
    done = run_vaezoo("completion", shell, env=env)
    assert done.returncode == 0 and "vaezoo" in done.stdout


def test_a_command_runs_where_the_completion_variable_is_left_set(env):
    done = run_vaezoo("list", "jointvae-mnist", env={**env, "_ARGCOMPLETE": "1"})
    assert done.returncode == 0 and "jointvae-mnist" in done.stdout


@pytest.mark.parametrize("line", ["vaezoo list --dataset ds", "vaezoo leaderboard mig_chen --dataset ds"])
def test_a_tab_completes_a_dataset_filter_with_the_zoo_s_datasets_not_paths(env, tmp_path, line):
    # it offered the folder's files ('dsfile'), which no card is of
    (tmp_path / "dsfile").write_text("", encoding="utf-8")
    assert complete(line, env, tmp_path) == ["dsprites"]


def test_a_tab_does_not_send_a_card_s_dataset_with_control_characters_to_the_shell(tmp_path):
    cards = tmp_path / "cards"
    write_card(cards, make_card(name="toy-odd", dataset="ds\x1b[31m\nx"))
    assert complete("vaezoo list --dataset ds", child_env(tmp_path / "home", cards=cards), tmp_path) == ["dsprites"]


@pytest.mark.parametrize("line, offered", [("vaezoo leaderboard mig_c", ["mig_chen"]),
                                           ("vaezoo leaderboard mig_chen,mig_", ["mig_chen,mig_dlib"]),
                                           ("vaezoo leaderboard --dataset dsprites mig_c", ["mig_chen"])])
def test_a_tab_completes_the_leaderboard_s_metrics_with_those_the_cards_record_not_paths(env, tmp_path, line, offered):
    # it offered the folder's files ('mig_cfile'), which no card records
    (tmp_path / "mig_cfile").write_text("", encoding="utf-8")
    assert complete(line, env, tmp_path) == offered


def test_a_tab_does_not_send_a_card_s_metric_with_control_characters_or_a_comma_to_the_shell(tmp_path):
    cards = tmp_path / "cards"
    metric = {"value": 0.5, "command": "vaezoo eval toy-odd", "vaezoo_version": "0.1.0"}
    write_card(cards, make_card(name="toy-odd", metrics={"mig_c\x1b[31m": metric, "mig_c,x": metric}))
    assert complete("vaezoo leaderboard mig_c", child_env(tmp_path / "home", cards=cards), tmp_path) == ["mig_chen"]


def test_a_tab_offers_the_card_files_names_without_reading_a_card(cards, tmp_path, monkeypatch):
    # each Tab read and validated every card of every card folder: 12.3 s a Tab beside 5,000 cards
    # (benchmarks/bench_lookups.py), now the names of the files alone
    import vaezoo.entries.catalog as catalog
    from vaezoo.cli.common import complete_card

    for name in ("lab-10", "lab-2", "other"):
        write_card(cards, make_card(name=name))
    (cards / "lab-1.toml").write_text("not [toml", encoding="utf-8")  # offered: no card is read to know better
    (cards / "lab-\x1b[31m.toml").write_text("", encoding="utf-8")  # no card's name: never sent to the shell
    read, read_text = [], catalog._read_text
    monkeypatch.setattr(catalog, "_read_text", lambda path: read.append(path) or read_text(path))
    monkeypatch.chdir(tmp_path)
    assert complete_card("lab-") == ["lab-1", "lab-2", "lab-10"]
    assert read == []


def test_a_tab_completes_datasets_and_metrics_from_the_card_files_text_without_parsing_them(cards, tmp_path,
                                                                                            monkeypatch):
    # each Tab of --dataset or of leaderboard's metrics parsed and validated every card of every card folder: 6.5
    # and 9.2 s beside 5,000 cards (benchmarks/bench_lookups.py); now it reads two kinds of line off each file
    import tomllib

    from vaezoo.cli.common import complete_dataset
    from vaezoo.extras.commands.leaderboard import complete_metrics

    metric = {"value": 0.5, "command": "vaezoo eval x", "vaezoo_version": "0.1.0"}
    write_card(cards, make_card(name="one", dataset="dsprites", metrics={"mig_chen": metric}))
    write_card(cards, make_card(name="two", dataset="dshapes", metrics={"mig_dlib": metric, "elbo": metric}))
    (cards / "three.toml").write_text("dataset = 'dsx'  # a literal string\n[metrics.mig_x.seeds]\n",
                                      encoding="utf-8")
    (cards / "four.toml").write_text('name = "four"\n[train]\ndataset = "dsno"\n', encoding="utf-8")  # not the card's
    monkeypatch.setattr(tomllib, "loads", lambda *args, **kwargs: pytest.fail("a Tab parsed a card"))
    monkeypatch.chdir(tmp_path)
    assert complete_dataset("ds") == ["dshapes", "dsprites", "dsx"]
    assert complete_metrics("mig_") == ["mig_chen", "mig_dlib", "mig_x"]
    assert complete_metrics("mig_chen,") == ["mig_chen,elbo", "mig_chen,mig_dlib", "mig_chen,mig_x"]
