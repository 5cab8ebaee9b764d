"""``vaezoo eval RUN [RUN ...]``: several runs measured with one read of their dataset, one table, each card written
as it is measured; a second call skips what holds its metrics; one run that cannot be measured does not stop
the others."""

from __future__ import annotations

import json
import shlex
import signal
import shutil
import tomllib

import pytest
from kit import cli, count_fit_pools, make_card, write_toml

import vaezoo.evaluation.report as report_module
from vaezoo.cli import main
from vaezoo.errors import CardError, DeviceError, MetricError
from vaezoo.evaluation.report import evaluate_cards


@pytest.fixture
def runs(data_plugin, tmp_path):
    """Two finished runs of the toy card (runs/a, runs/b), their cards' metrics removed."""
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 0
    folders = []
    for name in ("a", "b"):
        folder = tmp_path / "runs" / name
        shutil.copytree(tmp_path / "out", folder)
        card = folder / "toyvae-bars-run.toml"
        data = tomllib.loads(card.read_text())
        data.pop("metrics")
        data.pop("headline", None)
        write_toml(card, data)
        folders.append(folder)
    return folders


def metrics_of(folder) -> dict:
    return tomllib.loads((folder / "toyvae-bars-run.toml").read_text()).get("metrics", {})


def test_several_runs_are_written_in_one_table_and_a_second_call_skips_them(runs, capsys, monkeypatch):
    from vaezoo.assemble import card_dataset

    reads = []
    monkeypatch.setattr(report_module, "card_dataset", lambda *args: reads.append(args) or card_dataset(*args))
    code, out, err = cli(capsys, "eval", *map(str, runs), "--write")
    assert code == 0, err
    assert len(reads) == 1  # one dataset read for both runs
    assert all("reconstruction" in metrics_of(folder) and "cluster_accuracy" in metrics_of(folder) for folder in runs)
    assert out.count("2 runs") == 1 and all(str(folder) in out for folder in runs)  # one table, a row per run
    assert "2 of 2 runs measured, written" in err

    before = [(folder / "toyvae-bars-run.toml").read_bytes() for folder in runs]
    code, out, err = cli(capsys, "eval", *map(str, runs), "--write")
    assert code == 0 and "0 of 2 runs measured, written, 2 skipped" in err
    assert out.count("skipped") == 2
    assert [(folder / "toyvae-bars-run.toml").read_bytes() for folder in runs] == before

    code, _, err = cli(capsys, "eval", *map(str, runs), "--write", "--force")
    assert code == 0 and "2 of 2 runs measured, written" in err

    card = runs[1] / "toyvae-bars-run.toml"
    data = tomllib.loads(card.read_text())
    data["metrics"]["cluster_accuracy"]["value"] += 0.01
    write_toml(card, data)
    code, out, err = cli(capsys, "eval", *map(str, runs), "--check")
    assert code == 1 and out.count("checked") == 1 and out.count("failed") == 1
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: {runs[1]}: 1 metric differs") and "cluster_accuracy: card" in line

    # a metric that float rounding alone moves by 0.02 is allowed that spread, and the summary names it once
    monkeypatch.setattr(report_module, "metric_rounding", lambda names: {"cluster_accuracy": 0.02})
    code, out, err = cli(capsys, "eval", *map(str, runs), "--check")
    assert code == 0 and out.count("checked") == 2, err
    assert err.splitlines()[-1] == ("2 of 2 runs measured, checked against their cards within relative tolerance "
                                    "0.0001; cluster_accuracy within 0.02 (float rounding alone moves it that far)")


def test_the_json_of_a_batch_names_each_runs_card_as_the_json_of_one_run_does(runs, capsys, tmp_path):
    # a row gave only the run as given: a script had to read each card again to learn its name
    missing = tmp_path / "nosuch.toml"
    code, out, _ = cli(capsys, "eval", *map(str, runs), str(missing), "--write", "--json")
    assert code == 1
    assert [(row["run"], row["name"], row["skipped"]) for row in json.loads(out)] == [
        (str(runs[0]), "toyvae-bars-run", False), (str(runs[1]), "toyvae-bars-run", False), (str(missing), None, False)]
    code, out, _ = cli(capsys, "eval", *map(str, runs), "--write", "--json")
    assert code == 0
    assert [(row["name"], row["skipped"]) for row in json.loads(out)] == [("toyvae-bars-run", True)] * 2
    code, out, _ = cli(capsys, "eval", str(runs[0]), "--json")
    assert json.loads(out)["name"] == "toyvae-bars-run"


def test_each_run_of_a_batch_records_the_command_that_names_its_folder_as_one_run_does(runs, capsys):
    assert main(["eval", str(runs[0]), "--write"]) == 0
    code, _, err = cli(capsys, "eval", *map(str, runs), "--write", "--force")
    assert code == 0, err
    for folder in runs:
        assert {metric["command"] for metric in metrics_of(folder).values()} == {shlex.join(["vaezoo", "eval",
                                                                                              str(folder)])}


@pytest.mark.parametrize(("options", "error"), [({"device": "cuda:99"}, DeviceError), ({"metrics": []}, MetricError),
                                                ({"metrics": iter(["cluster_accuracy"])}, None)])
def test_a_batch_checks_its_options_once_before_any_run_rather_than_fail_each(runs, options, error):
    if error is not None:
        with pytest.raises(error):
            evaluate_cards(runs, **options)
    else:  # a metrics iterable is read once, for every run
        batch = evaluate_cards(runs, **options)
        assert [sorted(run.report.results) for run in batch.runs] == [["cluster_accuracy"]] * 2


@pytest.mark.parametrize("options", [{"write": "no"}, {"write": True, "force": "no"}, {"jobs": "2"}, {"jobs": 0},
                                     {"jobs": True}, {"checkpoint": 3}, {"data_root": 3}])
def test_an_option_of_the_wrong_type_is_named_before_any_card_is_read_or_written(runs, options, monkeypatch):
    before = [(folder / "toyvae-bars-run.toml").read_bytes() for folder in runs]
    monkeypatch.setattr(report_module, "get_card", lambda *_: pytest.fail("a card was read"))
    name = next(iter(options.keys() - {"write"}), "write")
    with pytest.raises(TypeError, match=f"^evaluate: {name} = {options[name]!r} is not |^jobs takes .*got 0$"):
        evaluate_cards(runs if "checkpoint" not in options else runs[:1], **options)
    with pytest.raises(TypeError):
        report_module.evaluate_card(runs[0], **options)
    assert [(folder / "toyvae-bars-run.toml").read_bytes() for folder in runs] == before


def test_one_card_given_twice_is_refused_before_anything_is_measured_as_seeds_refuses_a_run_twice(runs, capsys,
                                                                                                 monkeypatch):
    monkeypatch.setattr(report_module, "load_model", lambda *_, **__: pytest.fail("a model was loaded"))
    card = runs[0] / "toyvae-bars-run.toml"
    code, _, err = cli(capsys, "eval", str(runs[0]), str(runs[1]), str(card))
    assert code == 1 and err.strip().splitlines()[-1] == (
        f"error: {card} is the same card given twice (as {runs[0]}); give each card once")
    with pytest.raises(CardError, match=f"^{runs[1]} is the same card given twice; give each card once$"):
        evaluate_cards([str(runs[1]), str(runs[1])])


@pytest.mark.parametrize("cards", ["runs/a", None, 3])
def test_cards_are_a_list_not_one_name_split_into_its_letters(cards):
    with pytest.raises(TypeError, match="^cards takes a list of cards, e.g. "):
        evaluate_cards(cards)


def test_a_vaezoo_jobs_that_is_no_number_of_processes_is_refused_before_anything_is_measured(runs, capsys,
                                                                                             monkeypatch):
    load_model = report_module.load_model
    monkeypatch.setattr(report_module, "load_model", lambda *_, **__: pytest.fail("a model was loaded"))
    for wrong in ("abc", "0"):
        monkeypatch.setenv("VAEZOO_JOBS", wrong)
        code, _, err = cli(capsys, "eval", str(runs[0]), "--metrics", "cluster_accuracy")
        assert code == 1 and err.strip().splitlines()[-1] == (
            f"error: VAEZOO_JOBS='{wrong}' is not a whole number of processes >= 1; set it to one, e.g. 2, or unset "
            f"it for the cores this process may use")
    monkeypatch.setattr(report_module, "load_model", load_model)
    assert main(["eval", str(runs[0]), "--metrics", "cluster_accuracy", "--jobs", "1"]) == 0  # --jobs wins

def test_a_full_disk_under_one_runs_lock_is_one_line_and_the_other_runs_are_measured(runs, capsys, monkeypatch):
    import errno
    import os

    from vaezoo.store import files

    write_beside = files.write_beside

    def full_under_the_first(path, data):
        if path.parent == runs[0]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_beside(path, data)

    monkeypatch.setattr(files, "write_beside", full_under_the_first)
    code, _, err = cli(capsys, "eval", *map(str, runs), "--write")
    card = runs[0] / "toyvae-bars-run.toml"
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and line.startswith(f"error: {runs[0]}: cannot write {card}: No space left on device (its "
                                         f"lock's holder file {runs[0]}/.toyvae-bars-run.toml.lock.holder cannot be "
                                         f"written); make room on its disk, then run again"), err
    assert metrics_of(runs[0]) == {} and "reconstruction" in metrics_of(runs[1])
    assert not list(runs[0].glob(".*.holder")) and not list(runs[0].glob(".*.tmp"))


def test_an_interrupted_batch_resumes_where_it_stopped(runs, monkeypatch):
    measured = []
    original = report_module.evaluate

    def interrupted_on_the_second(model, *args, **kwargs):
        if measured:
            raise KeyboardInterrupt
        measured.append(model)
        return original(model, *args, **kwargs)

    monkeypatch.setattr(report_module, "evaluate", interrupted_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        evaluate_cards(runs, write=True)
    assert "reconstruction" in metrics_of(runs[0]) and metrics_of(runs[1]) == {}  # the first was written at once

    monkeypatch.setattr(report_module, "evaluate", original)
    batch = evaluate_cards(runs, write=True)
    assert [run.skipped for run in batch.runs] == [True, False]
    assert "reconstruction" in metrics_of(runs[1])


def test_a_run_whose_model_cannot_serve_a_metric_is_named_and_the_others_are_measured(runs, capsys):
    card = runs[1] / "toyvae-bars-run.toml"
    data = tomllib.loads(card.read_text())
    data["eval_metrics"] = [*data["eval_metrics"], "mig_chen"]  # the toy bars have no ground-truth factors
    write_toml(card, data)
    code, out, err = cli(capsys, "eval", *map(str, runs), "--write")
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {runs[1]}: ")
    assert "metric 'mig_chen' needs a dataset with ground-truth factors" in errors[0]
    assert "Traceback" not in err and "1 of 2 runs measured, written" in err
    assert "reconstruction" in metrics_of(runs[0]) and metrics_of(runs[1]) == {}


def test_a_checkpoint_is_of_one_run_and_jobs_must_be_a_whole_number_from_one(runs, capsys):
    code, _, err = cli(capsys, "eval", *map(str, runs), "--checkpoint", str(runs[0] / "checkpoint.pt"))
    assert code == 1 and err.strip().splitlines()[-1] == (
        "error: --checkpoint is a checkpoint of one card's model: give one card with it")
    for jobs in ("0", "two"):
        code, _, err = cli(capsys, "eval", str(runs[0]), "--jobs", jobs)
        assert code == 2 and err.strip().splitlines()[-1].endswith(
            f"argument --jobs: give a whole number of processes >= 1, e.g. 2, got '{jobs}'")


def test_jobs_reaches_the_metrics_fits(runs, monkeypatch):
    from vaezoo.metrics import parallel

    seen = []
    original = report_module.evaluate

    def evaluate(*args, **kwargs):
        seen.append(parallel.get_jobs())
        return original(*args, **kwargs)

    monkeypatch.setattr(report_module, "evaluate", evaluate)
    monkeypatch.setenv(parallel.JOBS_VARIABLE, "5")
    assert main(["eval", str(runs[0]), "--jobs", "3"]) == 0
    assert seen == [3] and parallel.get_jobs() == 5  # the setting holds for the evaluation only


def test_the_runs_of_a_batch_fit_their_metrics_on_one_pool_of_worker_processes(runs, monkeypatch):
    """Each evaluation started its own pools (three for the fitted metrics), each fresh interpreters importing
    scikit-learn; a batch of runs now starts one."""
    from vaezoo.metrics import parallel

    started, fitted = count_fit_pools(monkeypatch)
    assert main(["eval", str(runs[0]), str(runs[1]), "--jobs", "2"]) == 0
    assert fitted == [1, 2, 3, 4] * 2 and started == [2]
    assert parallel._here.pool is None  # stopped with the batch


@pytest.mark.parametrize("several", [False, True], ids=["one run", "two runs"])
def test_an_interruption_after_the_cards_are_written_says_they_were_written(runs, capsys, monkeypatch, several):
    """Ctrl-C while the table was printed, the cards already written whole, said only 'error: interrupted'."""
    import vaezoo.cli.eval

    given = runs if several else runs[:1]
    monkeypatch.setattr(vaezoo.cli.eval, "print_table", lambda *_, **__: signal.raise_signal(signal.SIGINT))
    code, _, err = cli(capsys, "eval", *map(str, given), "--write")
    assert code == 130
    cards = ", ".join(str(folder / "toyvae-bars-run.toml") for folder in given)
    count = "2 cards" if several else "1 card"  # "1 card(s)" before
    assert err.splitlines()[-2:] == [f"{count} written before the interruption, each whole: {cards}",
                                     "error: interrupted"]
    assert all("reconstruction" in metrics_of(folder) for folder in given)


def test_a_batch_reads_the_zoo_once_to_name_the_runs_in_the_commands_it_records(runs, capsys, monkeypatch):
    import vaezoo.entries.catalog as catalog

    scans = []
    scan = catalog._scan
    monkeypatch.setattr(catalog, "_scan", lambda: scans.append(1) or scan())
    code, _, err = cli(capsys, "eval", *map(str, runs), "--write")
    assert code == 0, err
    assert len(scans) == 1  # not one per run written: a zoo of thousands of cards would be read again per run
    assert all("cluster_accuracy" in metrics_of(folder) for folder in runs)
