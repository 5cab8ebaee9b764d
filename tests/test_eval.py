"""``vaezoo eval``: the card that ``vaezoo train`` writes checks out, and a tampered one does not."""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import tomllib

import pytest
import torch
from kit import MNIST_ROOT, REPO, cli, install_plugin, make_card, require_shared, write_toml

from vaezoo.assemble import metric_rounding
from vaezoo.cli import main
from vaezoo.entries.catalog import get_card
from vaezoo.entries.schema import Metric
from vaezoo.errors import CardError, MetricError, TrainingError
from vaezoo.evaluation.report import EvalReport, compare, evaluate_card


@pytest.fixture
def trained(data_plugin, tmp_path):
    """The completed card of a finished run of the toy card."""
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 0
    return tmp_path / "out" / "toyvae-bars-run.toml"


def error_lines(err: str) -> list[str]:
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_check_passes_on_a_fresh_card_and_fails_on_a_tampered_metric(trained, capsys):
    capsys.readouterr()
    assert main(["eval", str(trained), "--check", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    card = tomllib.loads(trained.read_text())
    assert report["check_failures"] == []
    assert report["metrics"].keys() == card["metrics"].keys()
    for name, value in report["metrics"].items():
        assert value == pytest.approx(card["metrics"][name]["value"], abs=1e-6)

    card["metrics"]["cluster_accuracy"]["value"] += 0.01
    write_toml(trained, card)
    assert main(["eval", str(trained), "--check"]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert "error: 1 metric differs from the card" in line and "cluster_accuracy: card" in line


@pytest.mark.parametrize("only", [False, True], ids=["the card's metrics", "--metrics"])
def test_check_names_a_metric_measured_that_the_card_does_not_hold(trained, capsys, only):
    """It was measured and left out of the check without a word: 'check: 3 of 3 metrics match', exit 0."""
    card = tomllib.loads(trained.read_text())
    if not only:
        del card["metrics"]["cluster_accuracy"]
        write_toml(trained, card)
    capsys.readouterr()
    assert main(["eval", str(trained), "--check", *(["--metrics", "cluster_accuracy,mutual_info_score"] if only
                                                    else [])]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"note: not on the card, so not checked: {'mutual_info_score' if only else 'cluster_accuracy'}"
    assert err[-2].startswith(f"check: {1 if only else len(card['metrics'])} of ")


def test_check_refuses_a_card_without_metrics(trained, capsys):
    card = tomllib.loads(trained.read_text())
    del card["metrics"]
    write_toml(trained, card)
    capsys.readouterr()
    assert main(["eval", str(trained), "--check"]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert line.endswith(f"has no metrics to check against; record them first with vaezoo eval {trained} --write")


def test_check_refuses_a_card_without_metrics_before_measuring_it(trained, capsys, monkeypatch):
    """The check measured the whole suite first (503 s on a dSprites card: benchmarks/bench_metric_suite.py) to say
    that nothing could be compared; in a batch, one such card lost every other run's table."""
    import vaezoo.evaluation.report as report

    card = tomllib.loads(trained.read_text())
    del card["metrics"]
    bare = write_toml(trained.parent / "bare.toml", card)
    measured = []
    monkeypatch.setattr(report, "load_model", lambda card, *a, **k: measured.append(card.name) or
                        pytest.fail("a card without metrics was loaded to be checked"))
    capsys.readouterr()
    assert main(["eval", str(bare), "--check"]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert line.endswith(f"has no metrics to check against; record them first with vaezoo eval {bare} --write")
    with pytest.raises(CardError, match="has no metrics to check against"):
        evaluate_card(bare, check=True)
    assert measured == []

    monkeypatch.undo()
    assert main(["eval", str(trained), str(bare), "--check"]) == 1
    out, err = capsys.readouterr()
    assert str(trained) in out and "checked against their cards" in err
    assert error_lines(err) == [f"error: {bare}: card 'toyvae-bars-run' has no metrics to check against; record "
                                f"them first with vaezoo eval {bare} --write"]


def test_check_of_a_card_without_metrics_that_cannot_record_them_says_why(trained, capsys):
    """It advised --write, which refuses a downloaded card and an installed package's."""
    card = get_card(trained).model_copy(update={"metrics": {}})
    card._source = "hf-hub:owner/tiny"
    with pytest.raises(CardError, match=r"^card 'toyvae-bars-run' has no metrics to check against, and cannot "
                                        r"record them: card toyvae-bars-run comes from hf-hub:owner/tiny, not from "
                                        r"a local card file; give the path of a copy to record metrics on$"):
        evaluate_card(card, check=True)


def test_check_of_a_card_without_the_metrics_asked_says_how_to_record_them_or_why_it_cannot(trained, capsys,
                                                                                          monkeypatch):
    """A card that held other metrics was told "writing the report records them", a downloaded one too, whose
    --write is refused; and a folder where the card's lock file belongs made the check of a card without metrics
    an error about that folder alone."""
    import vaezoo.evaluation.report as report

    monkeypatch.setattr(report, "load_model", lambda *a, **k: pytest.fail("a card that cannot be checked was loaded"))
    capsys.readouterr()
    assert main(["eval", str(trained), "--metrics", "mutual_info_score", "--check"]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert line.endswith(f"card 'toyvae-bars-run' has none of mutual_info_score to check against; record them first "
                         f"with vaezoo eval {trained} --metrics mutual_info_score --write")
    card = get_card(trained)
    card._source = "hf-hub:owner/tiny"
    with pytest.raises(CardError, match=r"^card 'toyvae-bars-run' has none of mutual_info_score to check against, "
                                        r"and cannot record them: card toyvae-bars-run comes from hf-hub:owner/tiny"):
        evaluate_card(card, metrics=["mutual_info_score"], check=True)

    lock = trained.parent / f".{trained.name}.lock"
    lock.unlink()
    lock.mkdir()
    bare = get_card(trained).model_copy(update={"metrics": {}})
    with pytest.raises(CardError, match=r"^card 'toyvae-bars-run' has no metrics to check against, and cannot record "
                                        r"them: .*\.toyvae-bars-run\.toml\.lock"):
        evaluate_card(bare, check=True)


def metric(value: float) -> Metric:
    return Metric(value=value, command="vaezoo eval x", vaezoo_version="0")


def disagreeing(comparisons) -> list[str]:
    return [c.name for c in comparisons if not c.agrees]


def test_compare_uses_a_tolerance_relative_to_the_larger_of_one_and_the_value():
    card = {"big": metric(1000.0), "small": metric(0.5), "missing": metric(1.0)}
    # tolerance 1e-3: 1 for "big" (relative to 1000), 1e-3 for "small" (relative to 1)
    compared = compare(card, {"big": 1000.9, "small": 0.5009}, 1e-3)
    assert [c.name for c in compared] == ["big", "small", "missing"]
    assert [str(c) for c in compared if not c.agrees] == ["missing: on the card but not computed"]
    compared = compare(card, {"big": 1001.1, "small": 0.5011, "missing": 1.0}, 1e-3)
    assert disagreeing(compared) == ["big", "small"]
    assert str(compared[0]) == "big: card 1000.0 vs measured 1001.100000"


def test_a_metric_that_float_rounding_moves_is_allowed_its_spread_and_no_other_is():
    card = {"dci_informativeness": metric(0.56468), "mig_dlib": metric(0.217459), "reconstruction": metric(39.9183)}
    measured = {"dci_informativeness": 0.56328, "mig_dlib": 0.217459 + 1.4e-3, "reconstruction": 39.9183}
    rounding = metric_rounding(card)  # the registered metrics' own: DCI's trees, not MIG or a loss
    assert set(rounding) == {"dci_informativeness"} and 1.4e-3 < rounding["dci_informativeness"] < 1e-2
    compared = compare(card, measured, 1e-4, rounding)
    assert disagreeing(compared) == ["mig_dlib"]
    assert [c.rounding for c in compared] == [rounding["dci_informativeness"], 0.0, 0.0]
    assert disagreeing(compare(card, {**measured, "dci_informativeness": 0.56468 + 2e-2}, 1e-4, rounding)) \
        == ["dci_informativeness", "mig_dlib"]
    assert disagreeing(compare(card, measured, 1e-4)) == ["dci_informativeness", "mig_dlib"]  # asked for none


@pytest.mark.parametrize("tolerance", ["nan", "-1", "inf", "1e-4x"])
def test_a_tolerance_that_is_not_a_finite_number_from_zero_up_is_refused(capsys, tolerance):
    code = main(["eval", "jointvae-mnist", "--check", f"--tolerance={tolerance}"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].endswith(
        f"argument --tolerance: give a finite number >= 0, e.g. 1e-4, got '{tolerance}'")


@pytest.mark.parametrize("tolerance", [math.nan, -1, math.inf, "1e-4", True])
def test_compare_in_python_refuses_the_tolerances_the_cli_refuses(tolerance):
    """inf passed a barely trained checkpoint as the card's model; NaN and -1 failed every metric."""
    with pytest.raises(MetricError, match=r"^tolerance must be a finite number >= 0, got "):
        compare({"a": metric(1.0)}, {"a": 1.0}, tolerance)
    assert compare({"a": metric(1.0)}, {"a": 1.0}, 0)[0].agrees


def test_compare_matches_nan_only_with_nan_and_an_infinity_only_with_itself():
    card = {"nan": metric(math.nan), "inf": metric(math.inf), "finite": metric(2.5)}
    assert disagreeing(compare(card, {"nan": math.nan, "inf": math.inf, "finite": 2.5}, 1e-4)) == []
    assert disagreeing(compare(card, {"nan": 2.5, "inf": 5.0, "finite": math.nan}, 1e-4)) == ["nan", "inf", "finite"]
    assert disagreeing(compare(card, {"nan": math.inf, "inf": -math.inf, "finite": math.inf}, 1e-4)) \
        == ["nan", "inf", "finite"]


def test_write_records_the_measured_metrics_on_the_card(trained, capsys):
    card = tomllib.loads(trained.read_text())
    measured = {name: metric["value"] for name, metric in card.pop("metrics").items()}
    write_toml(trained, card)
    assert main(["eval", str(trained), "--write"]) == 0
    written = tomllib.loads(trained.read_text())["metrics"]
    assert {name: metric["value"] for name, metric in written.items()} == pytest.approx(measured, abs=1e-6)
    # the card is not in the zoo: its commands name it by its path, shell-quoted, and run as written
    assert {metric["command"] for metric in written.values()} == {shlex.join(["vaezoo", "eval", str(trained)])}
    capsys.readouterr()
    assert main(shlex.split(written["reconstruction"]["command"])[1:] + ["--check"]) == 0


def test_write_keeps_the_notes_on_the_card(trained, capsys):
    card = tomllib.loads(trained.read_text())
    card["metrics"]["reconstruction"]["note"] = "why this number is what it is"
    write_toml(trained, card)
    assert main(["eval", str(trained), "--write"]) == 0
    written = tomllib.loads(trained.read_text())["metrics"]
    assert written["reconstruction"]["note"] == "why this number is what it is"
    assert all("note" not in metric for name, metric in written.items() if name != "reconstruction")


def test_write_and_check_exclude_each_other(trained, capsys):
    before = trained.read_bytes()
    capsys.readouterr()
    code, _, err = cli(capsys, "eval", str(trained), "--write", "--check")
    assert code == 2
    assert err.splitlines()[-1] == "vaezoo eval: error: argument --check: not allowed with argument --write"
    checkpoint = trained.parent / "checkpoint.pt"
    assert main(["eval", str(trained), "--write", "--checkpoint", str(checkpoint)]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert line == ("error: --write records the card's own weights' metrics, not a checkpoint's: use it without "
                    "--checkpoint")
    with pytest.raises(CardError, match="^write records .* use it without checkpoint$"):
        evaluate_card(trained, checkpoint=checkpoint, write=True)
    assert trained.read_bytes() == before


def test_the_report_checks_and_writes_from_python(trained):
    card = get_card(trained)
    report = evaluate_card(card)
    assert report.results.keys() == card.metrics.keys()
    assert all(c.agrees for c in report.check()) and len(report.check()) == len(card.metrics)
    tampered = card.model_copy(update={"metrics": {**card.metrics, "reconstruction": metric(1e6)}})
    assert disagreeing(EvalReport(tampered, report.results).check()) == ["reconstruction"]
    with pytest.raises(CardError, match="has no metrics to check against"):
        EvalReport(card.model_copy(update={"metrics": {}}), report.results).check()
    stripped = tomllib.loads(trained.read_text())
    del stripped["metrics"]
    write_toml(trained, stripped)
    written = report.write()
    assert written.metrics.keys() == card.metrics.keys()
    assert written.metrics["reconstruction"].command == shlex.join(["vaezoo", "eval", str(trained)])


def test_a_report_is_not_written_on_a_card_published_again_since_it_was_measured(trained):
    """A run published again (resumed for more epochs) names other weights: the report's numbers are not theirs."""
    report = evaluate_card(get_card(trained), metrics=["cluster_accuracy"])
    assert main(["train", str(trained.parent.parent / "toy.toml"), "--out", str(trained.parent), "--resume",
                 "--epochs", "5"]) == 0
    before = trained.read_bytes()
    with pytest.raises(CardError, match="names other weights than those measured"):
        report.write()
    assert trained.read_bytes() == before


def test_publish_keeps_what_eval_write_recorded_while_it_evaluated(data_plugin, tmp_path, monkeypatch):
    """A run's final card is written under the card's lock from the card on disk: an ``eval --write`` that landed
    during the run's evaluation stays."""
    import vaezoo.evaluation.report

    recorded = {}

    def evaluate_then_another_writer(model, card, *args, **kwargs):
        results = original(model, card, *args, **kwargs)
        if not recorded:  # the run's own evaluation: another writer records meanwhile (its evaluation is not caught)
            recorded["writing"] = True
            path = tmp_path / "out" / f"{card.name}.toml"
            recorded.update(evaluate_card(path, metrics=["cluster_accuracy"], write=True).written.metrics)
        return results

    original = vaezoo.evaluation.report.evaluate  # the one recorder's measuring, which a run's publishing goes through
    monkeypatch.setattr(vaezoo.evaluation.report, "evaluate", evaluate_then_another_writer)
    path = write_toml(tmp_path / "toy.toml", make_card("toy", eval_metrics=[]))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 0
    final = get_card(tmp_path / "out" / "toyvae-bars-run.toml")
    assert "cluster_accuracy" in recorded and final.metrics["cluster_accuracy"] == recorded["cluster_accuracy"]
    assert "reconstruction" in final.metrics and "cluster_accuracy" in final.eval_metrics


def test_a_checkpoints_report_is_of_its_step_and_is_not_written_on_the_card(trained):
    card = get_card(trained)
    report = evaluate_card(card, checkpoint=trained.parent / "checkpoint.pt")
    assert report.card.train.steps == card.train.steps and all(c.agrees for c in report.check())
    with pytest.raises(CardError, match="are not those of card 'toyvae-bars-run'"):
        report.write()
    with pytest.raises(TrainingError, match="does not exist"):
        evaluate_card(card, checkpoint=trained.parent / "nothing.pt")


def test_checkpoint_evaluates_a_run_at_its_step(trained, capsys):
    checkpoint = trained.parent / "checkpoint.pt"
    capsys.readouterr()
    assert main(["eval", str(trained), "--checkpoint", str(checkpoint), "--check"]) == 0
    steps = get_card(trained).train.steps
    title = capsys.readouterr().out.split("┏")[0]  # the table's title, wrapped to its width
    assert title.split()[:2] == ["toyvae-bars-run", "(checkpoint"] and title.split()[-3:] == ["at", "step", f"{steps})"]
    code, out, _ = cli(capsys, "eval", str(trained), "--checkpoint", str(checkpoint), "--json")
    assert code == 0 and {k: json.loads(out)[k] for k in ("checkpoint", "step")} == {"checkpoint": str(checkpoint),
                                                                                      "step": steps}
    code, out, _ = cli(capsys, "eval", str(trained), "--json")
    assert code == 0 and {k: json.loads(out)[k] for k in ("checkpoint", "step")} == {"checkpoint": None, "step": None}

    other = trained.parent / "not-a-checkpoint.pt"
    torch.save(torch.zeros(3), other)
    assert main(["eval", str(trained), "--checkpoint", str(other)]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert "is not a checkpoint written by 'vaezoo train'" in line


def test_a_weights_file_given_as_the_checkpoint_is_named_as_one_with_what_to_give(trained, capsys):
    weights = trained.with_suffix(".safetensors")
    assert main(["eval", str(trained), "--checkpoint", str(weights)]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert f"{weights} is a weights file (safetensors), not a training checkpoint" in line
    assert "the card folder holding it" in line and "OUT/checkpoint.pt of a 'vaezoo train' run" in line


def test_metrics_option_computes_only_those_and_write_adds_them(tmp_path, capsys):
    """``--metrics`` skips the losses, --check compares only what it measured, --write adds to the card."""
    import shutil

    from vaezoo.entries.catalog import parse_card

    for name in ("vae-mnist.toml", "vae-mnist.safetensors"):
        shutil.copy(REPO / "zoo_cards" / name, tmp_path / name)
    card_path = tmp_path / "vae-mnist.toml"
    before = parse_card(card_path)
    small = ["--data-root", str(MNIST_ROOT)]
    require_shared(MNIST_ROOT / "MNIST" / "raw")
    assert main(["eval", str(card_path), "--metrics", "elbo", "--json", *small]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"] == {"elbo": pytest.approx(before.metrics["elbo"].value,
                                                                                     rel=1e-4)}
    assert main(["eval", str(card_path), "--metrics", "elbo", "--check", *small]) == 0
    assert "check: 1 of 1 metrics match" in capsys.readouterr().err
    assert main(["eval", str(card_path), "--metrics", "mutual_info_score", "--check", *small]) == 1
    assert "has none of mutual_info_score to check against" in capsys.readouterr().err
    assert main(["eval", str(card_path), "--metrics", "nope", *small]) == 1
    assert "unknown metric 'nope'" in capsys.readouterr().err
    assert main(["eval", str(card_path), "--metrics", "mutual_info_score", "--write", *small]) == 0
    assert f"wrote 1 metric to {card_path}\n" in capsys.readouterr().err  # it said "wrote 1 metrics"
    after = parse_card(card_path)
    assert after.metrics.keys() == before.metrics.keys() | {"mutual_info_score"}
    assert after.eval_metrics == [*before.eval_metrics, "mutual_info_score"]
    assert after.metrics["mutual_info_score"].command.endswith("--metrics mutual_info_score")
    assert after.metrics["mutual_info_score"].libraries


def test_a_metric_asked_for_that_the_model_cannot_serve_is_to_be_left_out_of_the_option(capsys):
    assert main(["eval", "vae-mnist", "--metrics", "mig_chen"]) == 1
    [line] = error_lines(capsys.readouterr().err)
    assert "metric 'mig_chen' needs a dataset with ground-truth factors" in line
    assert line.endswith("(leave it out of --metrics)")


FAILING_METRICS = """
import vaezoo

@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    def divides_by_zero(model, dataset, device=None, batch_size=64):
        return 1 / 0

    def says_high(model, dataset, device=None, batch_size=64):
        return "high"

    def says_true(model, dataset, device=None, batch_size=64):
        return True

    register("divides_by_zero", divides_by_zero)
    register("says_high", says_high)
    register("says_true", says_true)
"""


def test_a_metric_that_raises_is_named_with_its_plugin_and_the_others_are_measured_and_written(
        trained, data_plugin, capsys):
    from vaezoo.entries.catalog import parse_card

    install_plugin(data_plugin, "failing", FAILING_METRICS)
    metrics = "divides_by_zero,mutual_info_score,says_high"
    assert main(["eval", str(trained), "--metrics", metrics, "--write"]) == 1
    err = capsys.readouterr().err
    assert error_lines(err) == [
        "error: metric 'divides_by_zero' of plugin 'failing' failed: ZeroDivisionError: division by zero",
        "error: metric 'says_high' of plugin 'failing' failed: TypeError: it returned str 'high', not a number (a "
        "metric returns one float)"]
    written = parse_card(trained)
    assert "mutual_info_score" in written.metrics and not {"divides_by_zero", "says_high"} & written.metrics.keys()
    # a metric that failed was added to eval_metrics all the same, and every later evaluation failed on it
    assert "mutual_info_score" in written.eval_metrics
    assert not {"divides_by_zero", "says_high"} & set(written.eval_metrics)
    report = evaluate_card(trained, metrics=["says_high", "mutual_info_score", "says_true"])
    assert list(report.results) == ["mutual_info_score"] and list(report.failed) == ["says_high", "says_true"]
    assert report.failed["says_true"].endswith("TypeError: it returned bool True, not a number (a metric returns "
                                               "one float)")  # it was recorded as 1.0


NOT_FINITE_METRICS = """
import math
import vaezoo

@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    def gives_nan(model, dataset, device=None, batch_size=64):
        return math.nan

    def gives_inf(model, dataset, device=None, batch_size=64):
        return math.inf

    register("gives_nan", gives_nan)
    register("gives_inf", gives_inf)
"""
SAYS_NOTHING = "not a finite number: metric '{0}' of plugin 'nonfinite' does not say when it gives one"


def notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("note:")]


def test_a_metric_that_is_not_a_finite_number_is_named_with_why_by_the_table_the_json_the_card_and_the_check(
        trained, data_plugin, capsys):
    # eval printed nan and inf in its table, null in its JSON and wrote nan and inf to the card, without a word
    from vaezoo.entries.catalog import parse_card

    install_plugin(data_plugin, "nonfinite", NOT_FINITE_METRICS)
    asked = ["eval", str(trained), "--metrics", "gives_nan,gives_inf"]
    code, _, err = cli(capsys, *asked, "--write")
    assert code == 0 and notes(err) == [f"note: gives_nan is NaN, {SAYS_NOTHING.format('gives_nan')} (nan on the card)",
                                        f"note: gives_inf is inf, {SAYS_NOTHING.format('gives_inf')} (inf on the card)"]
    written = parse_card(trained).metrics
    assert math.isnan(written["gives_nan"].value) and written["gives_inf"].value == math.inf
    code, out, err = cli(capsys, *asked, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["metrics"] == {"gives_nan": None, "gives_inf": None}
    assert shown["not_finite"] == {"gives_nan": "nan", "gives_inf": "inf"}
    assert [line.endswith("(null in the JSON)") for line in notes(err)] == [True, True]
    code, _, err = cli(capsys, *asked, "--check")  # NaN agrees with NaN, inf with inf: said, not failed
    assert code == 0 and len(notes(err)) == 2 and "check: 2 of 2 metrics match the card" in err


def test_a_run_whose_metric_is_not_a_finite_number_says_so_as_its_card_records_it(data_plugin, tmp_path):
    from vaezoo.entries.catalog import parse_card
    from vaezoo.errors import PublishWarning
    from vaezoo.training.train import train

    install_plugin(data_plugin, "nonfinite", NOT_FINITE_METRICS)
    card = make_card("toy", eval_metrics=["gives_nan"])
    with pytest.warns(PublishWarning) as warned:
        result = train(write_toml(tmp_path / "toy.toml", card), tmp_path / "out")
    assert [str(w.message) for w in warned if "gives_nan" in str(w.message)] == [
        f"gives_nan is NaN, {SAYS_NOTHING.format('gives_nan')} (nan on the card)"]
    assert math.isnan(parse_card(result.card_path).metrics["gives_nan"].value)


def test_a_metric_s_spec_says_why_it_is_not_finite_and_a_loss_that_some_image_s_loss_is_not():
    card = get_card("vae-mnist")
    said = EvalReport(card, {"gaussian_total_correlation": math.nan, "mutual_info_score": 0.5},
                      metrics=["gaussian_total_correlation", "mutual_info_score"]).not_finite
    assert said == {"gaussian_total_correlation": "gaussian_total_correlation is NaN, not a finite number: NaN when a "
                    "dimension of the mean code is constant over the points drawn (its correlation with the others is "
                    "undefined), inf when the code's correlation matrix is singular (a dimension a linear function of "
                    "others, as a joint latent's one-hot columns, which sum to 1)"}
    assert EvalReport(card, {"reconstruction": math.inf, "objective": 1.0}).not_finite == {
        "reconstruction": "reconstruction is inf, not a finite number: the loss of some test image is not finite"}


HOSTILE = "x; touch PWNED #"


def recorded_commands(value) -> list[str]:
    """Every ``command`` string anywhere in a card's table."""
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in ([v] if k == "command" and isinstance(v, str)
                                                        else recorded_commands(v))]
    return [c for item in value for c in recorded_commands(item)] if isinstance(value, list) else []


def words_in_a_shell(command: str, cwd) -> list[str]:
    """The words ``sh`` hands to the program ``command`` runs (vaezoo or python, made to print them)."""
    shown = 'printf "%s\\0" "$@"'
    script = f"vaezoo() {{ {shown}; }}; python() {{ {shown}; }}; {command}"
    done = subprocess.run(["sh", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


@pytest.mark.parametrize("how", ["train", "eval --write"])
def test_commands_recorded_on_a_card_are_shell_quoted(data_plugin, tmp_path, capsys, how):
    """A ``--data-root`` holding ``;`` and ``#`` is recorded as one quoted word: the command, run by a shell,
    passes it back whole and runs nothing else."""
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    extra = ["--data-root", HOSTILE] if how == "train" else []
    assert main(["train", str(path), "--out", str(tmp_path / "out"), *extra]) == 0
    card = tmp_path / "out" / "toyvae-bars-run.toml"
    if how == "eval --write":
        assert main(["eval", str(card), "--write", "--data-root", HOSTILE]) == 0
    commands = recorded_commands(tomllib.loads(card.read_text()))
    given = [words_in_a_shell(command, tmp_path) for command in commands]
    assert given == [shlex.split(command)[1:] for command in commands]
    rooted = [words for words in given if "--data-root" in words]  # the labels command of a run without one has none
    assert len(rooted) >= 5 and all(words[words.index("--data-root") + 1] == HOSTILE for words in rooted)
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED #").exists()


def test_a_card_records_a_small_value_to_six_significant_digits_and_a_large_one_to_six_decimals():
    from vaezoo.entries.schema import Card
    from vaezoo.evaluation.report import as_metrics

    card = Card.model_validate(make_card("mnist"))
    results = {"reconstruction": -89.744512345, "kl_z": 3.525812345e-05, "objective": 1e-9, "kl_c": math.nan}
    written = {name: entry.value for name, entry in as_metrics(card, results).items()}
    assert written["reconstruction"] == -89.744512 and written["kl_z"] == 3.52581e-05 and written["objective"] == 1e-9
    assert math.isnan(written["kl_c"])
