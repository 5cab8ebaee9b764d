"""``vaezoo seeds``: a card's metrics over runs of its recipe, one per seed, from folders as `vaezoo train` leaves them.

The runs here are completed cards written by hand with other seeds and metrics: what is tested is how the
command reads, checks and summarises them, not training.
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
from pathlib import Path

import pytest
from kit import assert_one_line_error, cli, make_card, refuse_writes, write_card

from vaezoo.entries.catalog import get_card
from vaezoo.errors import VaezooError

WEIGHTS = {"file": "toy.safetensors", "sha256": "ab" * 32, "size": 1234}
SELECTION = "the recipe's seed, fixed before any run; not chosen by its score"


def metric(value: float, **fields) -> dict:
    return {"value": value, "command": "vaezoo eval toy --write", "vaezoo_version": "0.1.0", **fields}


def card_dict(seed: int = 0, values: dict[str, float] | None = None, train: dict | None = None, **fields) -> dict:
    """The tiny preset's card with ``values`` as metrics, trained with ``seed``."""
    values = {"acc": 0.5, "mig": 0.1} if values is None else values
    return make_card("tiny", "toy", train={"seed": seed, **(train or {})}, **{
        "eval_metrics": ["acc", "mig"], "metrics": {name: metric(v) for name, v in values.items()}, **fields})


@pytest.fixture
def work(tmp_path, monkeypatch):
    """The working folder: ``cards/toy.toml`` (seed 0, acc 0.5, mig 0.1, with weights) and no zoo."""
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(tmp_path / "cards"))
    monkeypatch.chdir(tmp_path)
    write_card(tmp_path / "cards", card_dict(weights=WEIGHTS, headline="acc",
                                             metrics={"acc": metric(0.5, note="seed 0"), "mig": metric(0.1)}))
    return tmp_path


def write_run(folder: str, seed: int, values: dict[str, float] | None = None, train: dict | None = None,
              **fields) -> str:
    """A run folder as `vaezoo train --seed SEED --out FOLDER` leaves it: the completed card ``toy-run.toml``."""
    card = {**card_dict(seed, values, {"steps": 16, **(train or {})}, **fields), "name": "toy-run"}
    write_card(Path(folder), card)
    return folder


def table_rows(text: str) -> list[list[str]]:
    """The body rows of a rich table, as lists of stripped cells."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


def test_table_gives_n_median_min_max_and_each_seed(work, capsys):
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3}), write_run("runs/s2", 2, {"acc": 0.6, "mig": 0.2})]
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", *runs)
    assert code == 0, err
    # odd n: the middle value
    assert table_rows(out) == [["acc", "3", "0.6", "0.5", "0.7", "s0 0.5  s1 0.7  s2 0.6"],
                               ["mig", "3", "0.2", "0.1", "0.3", "s0 0.1  s1 0.3  s2 0.2"]]
    runs.append(write_run("runs/s3", 3, {"acc": 0.9, "mig": 0.4}))
    code, out, _ = cli(capsys, "seeds", "cards/toy.toml", *runs, "--metrics", "acc")
    assert code == 0
    # even n: the mean of the two middle values
    assert table_rows(out) == [["acc", "4", "0.65", "0.5", "0.9", "s0 0.5  s1 0.7  s2 0.6  s3 0.9"]]


def test_json_gives_the_same_numbers(work, capsys):
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3}), write_run("runs/s2", 2, {"acc": 0.6, "mig": 0.2})]
    code, out, _ = cli(capsys, "seeds", "cards/toy.toml", *runs, "--metrics", "mig", "--json")
    assert code == 0
    assert json.loads(out) == {"name": "toy", "shipped": 0, "metrics": {"mig": {
        "n": 3, "median": 0.2, "min": 0.1, "max": 0.3,
        "runs": [{"seed": 0, "value": 0.1}, {"seed": 1, "value": 0.3}, {"seed": 2, "value": 0.2}]}}}


def test_the_card_counts_as_the_run_of_its_own_seed(work, capsys):
    write_card(work / "cards", card_dict(seed=7, values={"acc": 0.8, "mig": 0.1}))
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3}), write_run("runs/s2", 2, {"acc": 0.6, "mig": 0.2})]
    code, out, _ = cli(capsys, "seeds", "cards/toy.toml", *runs, "--metrics", "acc", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["shipped"] == 7
    assert result["metrics"]["acc"]["runs"] == [{"seed": 1, "value": 0.7}, {"seed": 2, "value": 0.6},
                                                {"seed": 7, "value": 0.8}]
    assert result["metrics"]["acc"]["max"] == 0.8


def test_write_records_the_spreads_and_keeps_the_rest_of_the_card(work, capsys):
    before = get_card(work / "cards" / "toy.toml")
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3}), write_run("runs/s2", 2, {"acc": 0.6, "mig": 0.2}),
            write_run("runs/s3", 3, {"acc": 0.9, "mig": 0.4})]
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", *runs, "--write")
    assert code == 0, err
    assert "wrote the spread over 4 seeds of acc, mig" in err
    after = get_card(work / "cards" / "toy.toml")  # parses and validates
    acc = after.metrics["acc"].seeds
    assert [(r.seed, r.value) for r in acc.runs] == [(0, 0.5), (1, 0.7), (2, 0.6), (3, 0.9)]
    assert (acc.n, acc.min, acc.max, acc.shipped) == (4, 0.5, 0.9, 0) and acc.median == pytest.approx(0.65)
    assert acc.selection == SELECTION
    assert acc.command == ("vaezoo train cards/toy.toml --seed N --out DIR for each run, then "
                           "vaezoo seeds cards/toy.toml runs/s1 runs/s2 runs/s3 --write")
    mig = after.metrics["mig"].seeds
    assert [(r.seed, r.value) for r in mig.runs] == [(0, 0.1), (1, 0.3), (2, 0.2), (3, 0.4)]
    # everything else as it was: values, notes, weights
    unseeded = after.model_dump()
    for name in ("acc", "mig"):
        unseeded["metrics"][name]["seeds"] = None
    assert unseeded == before.model_dump()
    assert after.weights.sha256 == WEIGHTS["sha256"] and after.metrics["acc"].note == "seed 0"


def test_an_interruption_after_the_card_is_written_says_it_was_written(work, capsys, monkeypatch):
    """Ctrl-C while the table was printed, the card already written whole, said only 'error: interrupted'."""
    import vaezoo.cli.seeds

    monkeypatch.setattr(vaezoo.cli.seeds, "_print", lambda *_: signal.raise_signal(signal.SIGINT))
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3})]
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", *runs, "--write")
    assert code == 130
    assert err.splitlines()[-2:] == [f"the spread over 2 seeds of acc, mig was written to "
                                     f"{work / 'cards' / 'toy.toml'} before the interruption; the card is whole",
                                     "error: interrupted"]
    assert get_card(work / "cards" / "toy.toml").metrics["acc"].seeds.n == 2


def test_without_runs_it_prints_the_spreads_the_card_records(work, capsys):
    code, _, err = cli(capsys, "seeds", "cards/toy.toml")
    assert code == 1 and err == ("error: card 'toy' records no spread over seeds; give runs of its recipe with other "
                                 "seeds (vaezoo train toy --seed N --out DIR makes one)\n")
    run = write_run("runs/s0", 0)  # a run's card is no zoo entry: its name ('toy-run') trains nothing
    code, _, err = cli(capsys, "seeds", run)
    assert code == 1 and err == (f"error: card 'toy-run' records no spread over seeds; give runs of its recipe with "
                                 f"other seeds (vaezoo train {work / run / 'toy-run.toml'} --seed N --out DIR makes "
                                 f"one)\n")
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3}), write_run("runs/s2", 2, {"acc": 0.6, "mig": 0.2})]
    written = cli(capsys, "seeds", "cards/toy.toml", *runs, "--json")[1]
    assert cli(capsys, "seeds", "cards/toy.toml", *runs, "--write")[0] == 0

    code, out, _ = cli(capsys, "seeds", "cards/toy.toml", "--json")
    assert code == 0 and json.loads(out) == json.loads(written)
    code, out, _ = cli(capsys, "seeds", "toy", "--metrics", "mig")
    assert code == 0 and table_rows(out) == [["mig", "3", "0.2", "0.1", "0.3", "s0 0.1  s1 0.3  s2 0.2"]]
    code, _, err = cli(capsys, "seeds", "toy", "--metrics", "nll")
    assert code == 1 and "card 'toy' records no spread over seeds of nll; it records one of acc, mig" in err
    code, _, err = cli(capsys, "seeds", "toy", "--write")
    assert code == 1 and "--write and --selection record the spread over RUN folders; give the runs" in err


def test_write_by_zoo_name_records_the_selection_given(work, capsys):
    run = write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3})
    code, _, err = cli(capsys, "seeds", "toy", run, "--metrics", "acc", "--write",
                       "--selection", "the better of two runs")
    assert code == 0, err
    acc = get_card(work / "cards" / "toy.toml").metrics["acc"].seeds
    assert acc.selection == "the better of two runs" and acc.shipped == 0
    assert acc.command == ("vaezoo train cards/toy.toml --seed N --out DIR for each run, then "
                           "vaezoo seeds toy runs/s1 --metrics acc --write")
    assert get_card(work / "cards" / "toy.toml").metrics["mig"].seeds is None


def test_a_card_outside_the_working_folder_is_named_as_given(work, capsys, monkeypatch):
    (work / "elsewhere").mkdir()
    write_run("runs/s1", 1)
    monkeypatch.chdir(work / "elsewhere")
    code, _, err = cli(capsys, "seeds", "toy", "../runs/s1", "--write")
    assert code == 0, err
    assert get_card(work / "cards" / "toy.toml").metrics["acc"].seeds.command.startswith(
        "vaezoo train toy --seed N --out DIR for each run, then vaezoo seeds toy ../runs/s1 --write")


def test_absolute_paths_inside_the_working_folder_are_recorded_relative_to_it(work, capsys):
    """The spread's command names no folder of this machine above the working folder (a home, a temporary folder):
    a card and runs given by absolute paths under it are recorded as the vaezoo train part names the card."""
    runs = [str(work / write_run("runs/s1", 1)), str(work / write_run("s2", 2))]
    code, _, err = cli(capsys, "seeds", str(work / "cards" / "toy.toml"), *runs, "--write")
    assert code == 0, err
    command = get_card(work / "cards" / "toy.toml").metrics["acc"].seeds.command
    assert command == ("vaezoo train cards/toy.toml --seed N --out DIR for each run, then "
                       "vaezoo seeds cards/toy.toml runs/s1 ./s2 --write")  # a bare s2 would name a zoo entry


def test_a_metric_missing_from_some_run_is_named_on_stderr_by_default(work, capsys):
    run = write_run("runs/s1", 1, {"acc": 0.7})
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 0
    assert "not a finite number in every run (missing, NaN or infinite): mig" in err
    assert [row[0] for row in table_rows(out)] == ["acc"]


def test_a_metric_that_is_nan_in_some_run_is_left_out_and_refused_when_asked_for(work, capsys):
    run = write_run("runs/s1", 1, {"acc": 0.7, "mig": float("nan")})
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 0 and "not a finite number in every run (missing, NaN or infinite): mig" in err
    assert [row[0] for row in table_rows(out)] == ["acc"]
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", run, "--metrics", "acc,mig", "--write")
    assert code == 1 and out == ""
    assert_one_line_error(err, "run runs/s1 records mig = nan", "leave 'mig' out of --metrics")
    assert get_card(work / "cards" / "toy.toml").metrics["acc"].seeds is None


def test_a_metric_no_run_records_is_named_with_those_they_record(work, capsys):
    run = write_run("runs/s1", 1, {"acc": 0.7})
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", run, "--metrics", "nosuch")
    assert code == 1 and out == ""
    last = assert_one_line_error(err, "no run records a metric 'nosuch'; name metrics they record with --metrics: ")
    assert "acc" in last.rpartition(": ")[2] and "vaezoo eval" not in last


@pytest.mark.parametrize("asked", ["mig", "acc,mig"])
def test_a_run_without_a_requested_metric_is_a_one_line_error(work, capsys, asked):
    run = write_run("runs/s1", 1, {"acc": 0.7})
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", run, "--metrics", asked, "--write")
    assert code == 1 and out == ""
    assert_one_line_error(err, "run runs/s1 records no metric 'mig'", "vaezoo eval", "--metrics mig --write")
    assert get_card(work / "cards" / "toy.toml").metrics["acc"].seeds is None


def test_no_eval_metric_on_every_run_is_an_error(work, capsys):
    run = write_run("runs/s1", 1, {"loss": 3.0})
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 1
    assert_one_line_error(err, "run runs/s1 records none of card toy's eval_metrics (acc, mig); measure them with "
                          "'vaezoo eval runs/s1 --write', or name others with --metrics")


def test_eval_metrics_missing_or_not_finite_in_some_run_each_are_named_with_why(work, capsys):
    """A run that records a metric as NaN was told to measure it again ('none ... is on every run; measure them with
    vaezoo eval RUN --write'), which gives the NaN again, and neither the run nor the metric was named."""
    runs = [write_run("runs/s1", 1, {"acc": math.nan, "mig": 0.3}), write_run("runs/s2", 2, {"acc": 0.6})]
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", *runs)
    assert code == 1
    assert_one_line_error(err, "none of card toy's eval_metrics is a finite number on every run (acc: run runs/s1 "
                          "records nan; mig: run runs/s2 records none); measure one a run lacks with 'vaezoo eval "
                          "RUN --write', or name others with --metrics")
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", write_run("runs/s3", 3, {"acc": math.inf, "mig": math.nan}))
    assert code == 1
    assert_one_line_error(err, "none of card toy's eval_metrics is a finite number on every run (acc: run runs/s3 "
                          "records inf; mig: run runs/s3 records nan)")


def test_an_empty_run_is_refused_not_read_as_the_current_folder(work, capsys, monkeypatch):
    # "$RUN" of an unset variable, in a run's folder: the run was spread over without a word
    write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3})
    monkeypatch.chdir(work / "runs" / "s1")
    code, out, err = cli(capsys, "seeds", str(work / "cards" / "toy.toml"), "", "--write")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].endswith("error: argument RUN: give a path, not an empty string")
    assert get_card(work / "cards" / "toy.toml").metrics["acc"].seeds is None


def test_a_seed_given_twice_is_an_error_naming_both(work, capsys):
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", write_run("runs/a", 0))
    assert code == 1
    assert_one_line_error(err, "run runs/a has seed 0, the seed of card toy, which counts as the run of its own "
                          "seed; spread the runs around one run's card, which records its metrics: "
                          "'vaezoo seeds runs/a RUN...'")
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", write_run("runs/b", 3), write_run("runs/c", 3))
    assert code == 1
    assert_one_line_error(err, "run runs/c has seed 3, as has run runs/b")


def test_the_command_recorded_with_a_spread_does_not_depend_on_the_terminals_encoding(work, monkeypatch):
    """Under PYTHONIOENCODING=ascii the card recorded 'vaezoo train $'cart\\xc3\\xa9s/toy.toml' ...'."""
    import io
    import shutil
    import sys

    from vaezoo.cli import main

    shutil.copytree("cards", "cart\u00e9s")
    runs = [write_run("runs/s\u00e91", 1, {"acc": 0.7, "mig": 0.3}), write_run("runs/s\u00e92", 2, {"acc": 0.6})]
    for stream in ("stdout", "stderr"):
        monkeypatch.setattr(sys, stream, io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    assert main(["seeds", "cart\u00e9s/toy.toml", *runs, "--metrics", "acc", "--write"]) == 0
    assert get_card(work / "cart\u00e9s" / "toy.toml").metrics["acc"].seeds.command == (
        "vaezoo train 'cart\u00e9s/toy.toml' --seed N --out DIR for each run, then vaezoo seeds "
        "'cart\u00e9s/toy.toml' 'runs/s\u00e91' 'runs/s\u00e92' --metrics acc --write")


def test_runs_given_as_paths_are_named_in_the_advice_as_the_same_runs_given_as_strings(work):
    from vaezoo.errors import CardError
    from vaezoo.evaluation.seeds import seed_report

    runs = [write_run("runs/a", 0), write_run("runs/b", 1)]
    said = []
    for given in (runs, [Path(run) for run in runs]):  # the paths were an AttributeError traceback
        with pytest.raises(CardError, match="the seed of card toy, which counts as the run of its own seed") as caught:
            seed_report("cards/toy.toml", given)
        said.append(str(caught.value))
    assert said[1] == said[0] and "'vaezoo seeds runs/a runs/b'" in said[0]


def test_a_run_given_twice_is_named_as_such(work, capsys):
    run = write_run("runs/a", 1)
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run, run)
    assert code == 1
    assert_one_line_error(err, "run runs/a is the same run given twice; give each run once")
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run, "runs/a/toy-run.toml")
    assert code == 1
    assert_one_line_error(err, "run runs/a/toy-run.toml is the same run given twice (as run runs/a); give each run "
                          "once")
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", "cards/toy.toml")
    assert code == 1
    assert_one_line_error(err, "run cards/toy.toml is the same run given twice (as card toy); give each run once")


def test_a_copy_of_a_run_under_another_seed_is_an_error_naming_both(work, capsys):
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", write_run("runs/a", 1, weights=WEIGHTS))
    assert code == 1
    assert_one_line_error(err, "run runs/a has the weights of card toy (sha256 abababababab...), so it is a copy "
                               "of that run, not a run of seed 1; give runs each trained with its own seed")
    other = {**WEIGHTS, "sha256": "cd" * 32}
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", write_run("runs/b", 2, weights=other),
                         write_run("runs/c", 3, weights=other))
    assert code == 1
    assert_one_line_error(err, "run runs/c has the weights of run runs/b")
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", "runs/b", write_run("runs/d", 3))
    assert code == 0, err  # runs without weights on their cards are not compared


@pytest.mark.parametrize("changes, message", [
    ({"train": {"batch_size": 64}}, "train.batch_size is 64, the card's is 8"),
    ({"train": {"optimizer": {"name": "SGD", "lr": 0.01}}}, "train.optimizer.name is 'SGD', the card's is 'Adam'"),
    ({"train": {"epochs": 3}}, "train.epochs is 3, the card's is 2"),
    # the recipe's own spelling was shown: "train.precision is 'bf16', the card sets none"
    ({"train": {"precision": "bf16-mixed"}}, "train.precision is 'bf16-mixed', the card's is 'tf32-conv'"),
    ({"train": {"precision": "fp32"}}, "train.precision is 'fp32', the card's is 'tf32-conv'"),
    ({"dataset": "toy_bars"}, "dataset is 'toy_bars', the card's is 'tiny_blobs'"),
    ({"model": {"image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 3},
                "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]},
                "regularizers": [{"type": "beta", "beta": 1.0}]}}, "model.latent.dim is 3, the card's is 2"),
    ({"model": {"image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
                "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]},
                "regularizers": [{"type": "beta", "beta": 4.0}]}},
     "model.regularizers.0.beta is 4.0, the card's is 1.0"),
    ({"model": {"image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
                "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]}}},
     "model.regularizers is not set, the card's is [{'type': 'beta', 'beta': 1.0}]"),
])
def test_a_run_of_another_recipe_is_an_error_naming_the_field(work, capsys, changes, message):
    train = changes.get("train", {})
    run = write_run("runs/s1", 1, train=train, **{k: v for k, v in changes.items() if k != "train"})
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run, "--write")
    assert code == 1
    assert_one_line_error(err, f"run runs/s1: {message}; seeds must share the recipe")
    assert get_card(work / "cards" / "toy.toml").metrics["acc"].seeds is None


def test_a_run_of_another_recipe_with_the_cards_seed_is_named_by_its_recipe_not_its_seed(work, capsys):
    # a sweep's members share the seed: they were told to spread the runs around the other member's card
    run = write_run("runs/beta-4", 0, model={**make_card("tiny")["model"], "regularizers": [{"type": "beta",
                                                                                            "beta": 4.0}]})
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 1
    assert_one_line_error(err, "run runs/beta-4: model.regularizers.0.beta is 4.0, the card's is 1.0; seeds must "
                               "share the recipe")


def test_steps_budget_and_checkpoints_are_not_the_recipe(work, capsys):
    run = write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3},
                    train={"steps": 5, "budget": "1 minute on 2 cores", "checkpoint_every": 2})
    code, out, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 0, err
    assert table_rows(out)[0][:2] == ["acc", "2"]


def test_a_run_stopped_short_of_the_others_steps_is_refused_not_spread(work, capsys):
    """A run stopped by --max-steps has its recipe's card: only its steps tell it from the finished runs."""
    finished, stopped = write_run("runs/s1", 1, train={"steps": 16}), write_run("runs/s2", 2, train={"steps": 3})
    before = (work / "cards" / "toy.toml").read_bytes()
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", finished, stopped, "--write")
    assert code == 1
    assert_one_line_error(err, "run runs/s2 stopped at step 3, where run runs/s1 made 16: a run stopped short of its "
                               "recipe's steps is not its result; finish it with 'vaezoo train ... --resume', or leave "
                               "it out")
    assert (work / "cards" / "toy.toml").read_bytes() == before


def test_a_card_stopped_short_of_its_runs_steps_is_named_not_the_finished_run(work, capsys):
    """The stopped card was reported as 'card toy 3', after a finished run that the message told to resume."""
    write_card(work / "cards", card_dict(weights=WEIGHTS, train={"steps": 3}))
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", write_run("runs/s1", 1))
    assert code == 1
    assert_one_line_error(err, "card toy stopped at step 3, where run runs/s1 made 16: a run stopped short of its "
                               "recipe's steps is not its result; finish it with 'vaezoo train ... --resume', or "
                               "give a finished run's card")


def test_a_metric_measured_with_other_settings_is_an_error(work, capsys):
    write_card(work / "cards", card_dict(metrics={"acc": metric(0.5, parameters={"points": 1000}),
                                                  "mig": metric(0.1)}))
    run = write_run("runs/s1", 1, metrics={"acc": metric(0.7, parameters={"points": 100}), "mig": metric(0.2)})
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 1
    assert_one_line_error(err, "acc is measured with points = 100 on run runs/s1 and 1000 on card toy: runs measured "
                               "otherwise are not compared; measure them alike with 'vaezoo eval RUN --metrics acc "
                               "--write --force' (and --set acc.points=VALUE")


@pytest.mark.parametrize("run, fragment", [
    ("runs/none", "cannot read card"),
    ("runs", "must hold exactly one card"),
])
def test_a_run_that_is_not_a_card_is_a_one_line_error(work, capsys, run, fragment):
    (work / "runs").mkdir()
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run)
    assert code == 1
    assert_one_line_error(err, fragment)


def test_a_card_that_cannot_be_written_is_left_as_it_was(work, capsys, monkeypatch):
    path = work / "cards" / "toy.toml"
    before = path.read_bytes()
    run = write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3})
    refuse_writes(monkeypatch, work / "cards", errno.EROFS)
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", run, "--write")
    assert code == 1
    assert_one_line_error(err, f"card toy: its folder {path.parent} takes no new file (Read-only file system)")
    assert path.read_bytes() == before
    assert sorted(p.name for p in (work / "cards").iterdir()) == ["toy.toml"]


def test_card_text_is_shown_as_text_not_markup(work, capsys):
    name = "[red]acc[/red]"
    write_card(work / "cards", card_dict(values={name: 0.5}))
    run = write_run("runs/s1", 1, {name: 0.7})
    code, out, _ = cli(capsys, "seeds", "cards/toy.toml", run, "--metrics", name)
    assert code == 0
    assert table_rows(out)[0][0] == name


def test_the_report_from_python_gives_the_spreads_and_writes_them_when_asked(work):
    from vaezoo.evaluation.seeds import seed_report

    runs = [write_run("runs/s1", 1, {"acc": 0.7}), write_run("runs/s2", 2, {"acc": 0.6, "mig": 0.2})]
    before = (work / "cards" / "toy.toml").read_bytes()
    report = seed_report("toy", runs)
    assert (report.metrics, report.left_out, report.written) == (["acc"], ["mig"], None)
    assert [r.seed for r in report.runs] == [0, 1, 2] and report.spreads["acc"].median == pytest.approx(0.6)
    assert report.spreads["acc"].command == "vaezoo train cards/toy.toml --seed N --out DIR for each run"
    assert (work / "cards" / "toy.toml").read_bytes() == before
    written = seed_report("toy", runs, ["acc"], write=True).written
    assert written.metrics["acc"].seeds.n == 3 and get_card("toy").metrics["acc"].seeds == written.metrics["acc"].seeds
    with pytest.raises(VaezooError, match="^selection is empty"):
        seed_report("toy", runs, selection=" ")
    for given in ({"runs": "runs/s1"}, {"runs": Path("runs/s1")}, {"metrics": "acc"}):  # read letter by letter
        name, value = next(iter(given.items()))
        with pytest.raises(TypeError, match=rf"^{name} takes a list, e.g. \['{value}'\], not a "):
            seed_report("toy", **{"runs": runs, **given})


@pytest.mark.parametrize("changed", ["metric", "weights"])
def test_write_refuses_a_card_written_again_while_the_runs_were_read(work, changed):
    """``seeds --write`` while ``eval --write --force`` or ``train --resume`` rewrites the card: the spread, whose
    seed-0 value is the card's as first read, was recorded beside the card's new value (or over new weights)."""
    import threading
    import time

    from vaezoo.evaluation.seeds import seed_report
    from vaezoo.store.locks import card_lock

    path = work / "cards" / "toy.toml"
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3})]
    failed = []

    def gather():
        try:
            seed_report("cards/toy.toml", runs, ["acc"], write=True)
        except VaezooError as exc:
            failed.append(str(exc))

    other = {"metric": {"metrics": {"acc": metric(0.9), "mig": metric(0.1)}},
             "weights": {"weights": {**WEIGHTS, "sha256": "cd" * 32}}}[changed]
    with card_lock(path):  # as another writer holds it while it writes the card
        thread = threading.Thread(target=gather)
        thread.start()
        time.sleep(1.0)  # the runs are read and spread; the write waits for the lock
        write_card(work / "cards", card_dict(**{"weights": WEIGHTS, "headline": "acc",
                                                "metrics": {"acc": metric(0.5), "mig": metric(0.1)}, **other}))
    thread.join(30)
    why = {"metric": "acc is now 0.9, not 0.5", "weights": "it names other weights"}[changed]
    assert failed == [f"card 'toy' at {path} was written again while the runs were read ({why}); run the command "
                      f"again to spread what it holds now"]
    assert get_card("cards/toy.toml").metrics["acc"].seeds is None  # the other writer's card, as it wrote it


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EFBIG])
def test_write_onto_a_full_disk_keeps_the_card_and_says_to_make_room(work, capsys, monkeypatch, error):
    """A card update (``seeds --write``, ``eval --write``) the disk cannot take said 'choose another output path',
    which neither command has."""
    runs = [write_run("runs/s1", 1, {"acc": 0.7, "mig": 0.3})]
    path = work / "cards" / "toy.toml"
    before = path.read_bytes()
    write_bytes = Path.write_bytes

    def full(self, data):
        if self.parent == path.parent:
            raise OSError(error, os.strerror(error), str(self))
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    code, _, err = cli(capsys, "seeds", "cards/toy.toml", *runs, "--write")
    assert code == 1 and "Traceback" not in err
    assert err.splitlines()[-1] == (f"error: cannot write {path}: {os.strerror(error)}; the card is kept as it was; "
                                    f"make room on its disk, then run the command again")
    assert path.read_bytes() == before  # and no temporary file left beside it:
    assert sorted(p.name for p in path.parent.iterdir()) == [".toy.toml.lock", "toy.toml"]
