"""The first hour, round 2: what a newcomer meets after the README. ``vaezoo seeds`` after ``train --seeds 0,1``
says what to type instead; no card in the zoo carries a machine's path; tables keep headers and numbers whole;
a seed plot shows its title once."""

from __future__ import annotations

import html
import re
import shlex
import tomllib
from pathlib import Path

import pytest
from kit import assert_one_line_error, cli, write_card
from test_gallery import tiny_zoo  # noqa: F401  (a fixture)
from test_seeds import WEIGHTS, card_dict, work, write_run  # noqa: F401  (work is a fixture)

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "zoo_cards"


def _typed(err: str) -> list[list[str]]:
    """The commands an error line quotes ('vaezoo seeds ...'), as a shell splits them."""
    return [shlex.split(command) for command in re.findall(r"'(vaezoo [^']*)'", err)]


def test_seeds_over_every_seed_of_train_seeds_says_to_spread_around_a_run(work, capsys):
    """'vaezoo seeds CARD runs/x/seed-0 runs/x/seed-1' answered 'run ... has seed 0, as has card ...; give each seed
    once': the card counts as its own seed's run. The message gives the command that works, which does."""
    write_card(work / "recipe", {**card_dict(0), "metrics": {}})  # the recipe card: no metrics, no weights
    for seed in (0, 1):
        write_run(f"runs/x/seed-{seed}", seed, {"acc": 0.5 + seed / 10, "mig": 0.1})
    code, out, err = cli(capsys, "seeds", "recipe/toy.toml", "runs/x/seed-0", "runs/x/seed-1")
    assert (code, out) == (1, "")
    assert_one_line_error(err, "run runs/x/seed-0 has seed 0, the seed of card toy, which counts as the run of its own "
                          "seed; spread the runs around one run's card, which records its metrics: "
                          "'vaezoo seeds runs/x/seed-0 runs/x/seed-1'")
    assert "leave that run out" not in err  # the recipe card records no metric: that command would fail too
    [suggested] = _typed(err)
    code, out, err = cli(capsys, *suggested[1:])
    assert code == 0 and "2 seeds" in out, err


def test_a_card_that_records_its_metrics_may_also_leave_its_seed_out(work, capsys):
    write_run("runs/x/seed-0", 0)
    write_run("runs/x/seed-1", 1, {"acc": 0.6, "mig": 0.2})
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", "runs/x/seed-0", "runs/x/seed-1")
    assert code == 1
    commands = _typed(err)
    assert commands[0][1:] == ["seeds", "runs/x/seed-0", "runs/x/seed-1"]
    assert commands[1][1:] == ["seeds", "toy", "runs/x/seed-1"]  # the card by its name: VAEZOO_CARDS_PATH finds it
    for command in commands:
        assert cli(capsys, *command[1:])[0] == 0


def test_one_run_beside_a_card_without_its_metrics_blames_the_card(work, capsys):
    """With one run it said 'none of card ...'s eval_metrics ... is on every run' when the card lacked them."""
    write_card(work / "recipe", {**card_dict(0), "metrics": {}})
    write_run("runs/x/seed-1", 1)
    code, _, err = cli(capsys, "seeds", "recipe/toy.toml", "runs/x/seed-1")
    assert code == 1
    assert_one_line_error(err, "card toy records none of its eval_metrics (acc, mig), so it is no measured run; "
                          "spread the runs around one run's card, which records its metrics: "
                          "'vaezoo seeds runs/x/seed-1 RUN...'")
    assert "vaezoo eval" not in err  # the recipe card has no weights to measure


def test_a_card_with_weights_but_no_metrics_is_told_how_to_measure_it(work, capsys):
    write_card(work / "cards", {**card_dict(0, weights={"file": "toy.safetensors", "sha256": "ab" * 32,
                                                         "size": 1234}), "metrics": {}})
    write_run("runs/x/seed-1", 1)
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", "runs/x/seed-1")
    assert code == 1
    assert_one_line_error(err, "card toy records none of its eval_metrics", "; or measure the card with "
                          "'vaezoo eval toy --write'")


def test_runs_none_of_which_is_measured_are_told_to_measure_them_not_to_spread_around_one(work, capsys):
    """Over runs trained with --no-eval it suggested 'vaezoo seeds' around the second run, which records no metric
    either: that command failed alike, suggesting the third. The runs need measuring first."""
    for seed in (0, 1, 2):  # each run its own weights, as training writes them
        write_run(f"runs/x/seed-{seed}", seed, {}, weights={**WEIGHTS, "sha256": f"{seed}" * 64})
    code, out, err = cli(capsys, "seeds", "runs/x/seed-0", "runs/x/seed-1", "runs/x/seed-2")
    assert (code, out) == (1, "")
    line = assert_one_line_error(err, "card toy-run records none of its eval_metrics (acc, mig), nor does any run "
                                 "given; measure them first: 'vaezoo eval ")
    assert "vaezoo seeds" not in line
    [command] = _typed(line)
    assert command[:2] == ["vaezoo", "eval"] and command[-1] == "--write"
    assert [Path(p).resolve() for p in command[2:-1]] == [
        (work / "runs/x/seed-0/toy-run.toml").resolve(), (work / "runs/x/seed-1").resolve(),
        (work / "runs/x/seed-2").resolve()]


def _strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


ABSOLUTE = re.compile(r"(?:^|[\s'\"=:(])(?:/(?:work|home|Users|root|tmp|mnt|data|scratch|opt|srv)\b|~/|[A-Za-z]:\\)")


@pytest.mark.parametrize("card", sorted(ZOO.glob("*.toml")), ids=lambda path: path.stem)
def test_no_card_in_the_zoo_holds_a_machine_s_path(card):
    """The dSprites cards' seed commands named a developer's folder (/work/runs/gpu/...)."""
    found = [s for s in _strings(tomllib.loads(card.read_text(encoding="utf-8"))) if ABSOLUTE.search(s)]
    assert found == []
    assert "/work/" not in card.read_text(encoding="utf-8")


@pytest.mark.slow  # draws from 1,000 MNIST test images
def test_the_gallery_s_drawn_by_command_names_the_data_root_and_redraws_the_picture(tiny_zoo, tmp_path, mnist_root,
                                                                                   monkeypatch):
    """The "drawn by" commands omitted --data-root: run where the data is not in the default place, they failed or
    drew another picture."""
    from vaezoo.cli import main
    from vaezoo.extras.gallery import build_gallery

    site = tmp_path / "site"
    page = build_gallery(site, data_root=mnist_root, seed=1).read_text(encoding="utf-8")
    commands = [html.unescape(c) for c in re.findall(r"<code>(vaezoo show tiny-trained traverse[^<]*)</code>", page)]
    assert len(commands) == 1 and f"--data-root {shlex.quote(str(mnist_root))}" in commands[0]
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(commands[0])[1:]) == 0
    assert (tmp_path / "tiny-trained.traverse.png").read_bytes() == (site / "tiny-trained.traverse.png").read_bytes()


@pytest.mark.slow  # a gallery
def test_every_seed_plot_shows_its_title_once(tiny_zoo, tmp_path):
    """The SVG draws its title and the page captioned it again."""
    from vaezoo.extras.gallery import build_gallery

    page = build_gallery(tmp_path / "site", use_data=False).read_text(encoding="utf-8")
    plots = re.findall(r'<img src="(seeds-[^"]+\.svg)" alt="([^"]*)"', page)
    assert plots
    for file, alt in plots:
        svg = (tmp_path / "site" / file).read_text(encoding="utf-8")
        title = re.search(r'font-weight="bold">([^<]*)</text>', svg)[1]  # "kl_digit on mnist"
        shown = re.sub(r"<[^>]+>", " ", page)  # the page's text, without tags and attributes (alt text)
        assert shown.count(title) == 0 and html.unescape(alt) not in shown
        assert svg.count(f">{title}</text>") == 1
