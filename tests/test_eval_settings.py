"""A card's ``eval_settings`` and ``vaezoo eval --set``: the settings its metrics run with, checked before any image
is read, recorded beside each value; and the quick settings the conformance kit's trial runs measure a metric with."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from kit import assert_one_line_error, cli, install_plugin, make_card, write_entry

from vaezoo.assemble import build_model, card_dataset, metric
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.entry import load_state_dict, write_card
from vaezoo.entries.schema import Card
from vaezoo.errors import MetricError
from vaezoo.evaluation.measure import evaluate
from vaezoo.evaluation.report import as_metrics, evaluate_card
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.spec import MetricSpec


def tiny(**fields) -> Card:
    return Card.model_validate(make_card("tiny", eval_metrics=["importance_log_likelihood"], **fields))


def test_a_metric_runs_with_the_cards_settings_and_the_card_records_them(data_plugin):
    card = tiny(eval_settings={"importance_log_likelihood": {"samples": 3, "seed": 1}})
    model = build_model(card).eval()
    measured = evaluate(model, card)["importance_log_likelihood"]
    test = card_dataset(card, None, "test")
    spec = metric("importance_log_likelihood")
    assert measured == spec.measure(Evaluation(model, test), samples=3, seed=1)
    assert measured != spec.measure(Evaluation(model, test), samples=3, seed=2)  # the seed did reach it
    recorded = as_metrics(card, {"importance_log_likelihood": measured})["importance_log_likelihood"]
    assert recorded.parameters == {"samples": 3, "seed": 1}


def test_a_cards_settings_are_written_back_with_it(tmp_path):
    card = tiny(eval_settings={"importance_log_likelihood": {"samples": 3}})
    write_card(card, tmp_path / "tiny.toml")
    assert parse_card(tmp_path / "tiny.toml").eval_settings == {"importance_log_likelihood": {"samples": 3}}


def test_a_metric_without_settings_on_the_card_runs_and_is_recorded_with_its_defaults(data_plugin):
    card = tiny()
    assert "eval_settings" not in card.model_dump()  # a written card gains no empty table
    recorded = as_metrics(card, {"importance_log_likelihood": -1.0})["importance_log_likelihood"]
    assert recorded.parameters == dict(metric("importance_log_likelihood").settings) == {"samples": 5000, "seed": 0}


@pytest.mark.parametrize("settings, problem", [
    ({"points": 5}, "metric 'importance_log_likelihood' takes no argument 'points'; accepted arguments: samples, seed"),
    ({"samples": "many"}, "metric 'importance_log_likelihood': samples = 'many' is not"),
])
def test_a_setting_the_metric_does_not_take_is_refused_before_any_image_is_read(data_plugin, monkeypatch, settings,
                                                                                 problem):
    card = tiny(eval_settings={"importance_log_likelihood": settings})
    model = build_model(card)
    monkeypatch.setattr("vaezoo.evaluation.measure.card_dataset", lambda *a, **k: pytest.fail("the data was read"))
    with pytest.raises(MetricError, match=f"card 'tiny-blobs': eval_settings: {problem}".replace("(", r"\(")):
        evaluate(model, card)


def test_settings_for_a_metric_no_plugin_registers_are_refused_not_ignored(data_plugin):
    card = tiny(eval_settings={"importance_loglikelihood": {"samples": 10}})
    misspelt = "card 'tiny-blobs': eval_settings: unknown metric 'importance_loglikelihood'"
    with pytest.raises(MetricError, match=misspelt):
        evaluate(build_model(card), card)


def test_vaezoo_eval_refuses_a_wrong_setting_in_one_line(data_plugin, tmp_path, capsys):
    card = make_card("tiny", eval_metrics=["elbo"], eval_settings={"importance_log_likelihood": {"samples": "ten"}})
    path, _, _ = write_entry(tmp_path, card)
    code, out, err = cli(capsys, "eval", str(path), "--metrics", "elbo")
    assert code == 1 and out == ""
    assert_one_line_error(err, "eval_settings: metric 'importance_log_likelihood': samples = 'ten' is not")


def test_a_card_whose_eval_settings_hold_a_wrong_seed_is_refused_when_read():
    card = make_card("tiny", eval_settings={"elbo": {"seed": -1}})
    with pytest.raises(ValueError, match=r"eval_settings.elbo.seed = -1 is not a seed"):
        Card.model_validate(card)


def test_a_plain_function_metrics_settings_are_checked_against_its_own_signature():
    def histogram_spread(model, dataset, device=None, batch_size=64, bins: int = 10) -> float:
        return float(bins)

    spec = MetricSpec.of(histogram_spread)
    spec.check_settings({"bins": 3}, "metric 'histogram_spread'")
    for wrong, problem in (({"bins": "3"}, "bins = '3' is not"), ({"device": "cuda"}, "takes no argument 'device'")):
        with pytest.raises(ValueError, match=problem):
            spec.check_settings(wrong, "metric 'histogram_spread'")


def test_the_kits_trial_measures_each_metric_with_its_quick_settings(data_plugin, monkeypatch):
    from vaezoo import testing

    seen = []
    assert metric("importance_log_likelihood").quick == {"samples": 20}
    measure = MetricSpec.measure

    def watched(self, evaluation, **settings):
        seen.append(settings)
        return measure(self, evaluation, **settings)

    monkeypatch.setattr(MetricSpec, "measure", watched)
    testing.check_training(tiny(eval_settings={"importance_log_likelihood": {"seed": 4}}))
    assert seen == [{"seed": 4, "samples": 20}]


def test_vaezoo_eval_set_runs_a_metric_with_a_setting_and_write_records_it_so_that_check_reproduces(
        data_plugin, tmp_path, capsys):
    path, _, _ = write_entry(tmp_path, make_card("tiny", eval_metrics=["elbo"]))
    ill = ["--metrics", "importance_log_likelihood", "--set", "importance_log_likelihood.samples=3", "--json"]
    code, out, _ = cli(capsys, "eval", str(path), *ill)
    assert code == 0
    card = parse_card(path)
    model = build_model(card)
    model.load_state_dict(load_state_dict(card))
    expected = metric("importance_log_likelihood").measure(Evaluation(model.eval(), card_dataset(card)), samples=3)
    assert json.loads(out)["metrics"] == {"importance_log_likelihood": pytest.approx(expected, abs=1e-9)}

    assert cli(capsys, "eval", str(path), *ill, "--write")[0] == 0
    written = parse_card(path)
    assert written.eval_settings == {"importance_log_likelihood": {"samples": 3}}
    assert written.metrics["importance_log_likelihood"].parameters == {"samples": 3, "seed": 0}
    code, _, err = cli(capsys, "eval", str(path), "--metrics", "importance_log_likelihood", "--check")
    assert code == 0 and "check: 1 of 1 metrics match" in err and "note:" not in err
    code, _, err = cli(capsys, "eval", str(path), *ill[:-2], "importance_log_likelihood.samples=4")
    assert code == 0 and ("note: importance_log_likelihood ran with samples = 4, seed = 0; the card's value was "
                          "measured with samples = 3, seed = 0") in err


UNSET = """
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    def scaled_mean(model, dataset, device=None, batch_size=64, scale: float | None = None):
        return float(dataset.batch(slice(0, 8)).float().mean()) * (1.0 if scale is None else scale)

    def constant(model, dataset, device=None, batch_size=64):
        return 1.0

    register("scaled_mean", scaled_mean)
    register("constant", constant)
"""


def test_a_metric_whose_defaults_are_all_none_records_them_so_that_other_settings_are_told_apart(
        data_plugin, tmp_path, capsys):
    # its settings were {} and recorded as none at all, which no comparison reads: --set gave no note, and a
    # --write measured with the defaults kept settings another command had recorded meanwhile beside its value
    install_plugin(data_plugin, "unset", UNSET)
    path, _, _ = write_entry(tmp_path, make_card("tiny", eval_metrics=["elbo"]))
    assert cli(capsys, "eval", str(path), "--metrics", "scaled_mean", "--write")[0] == 0
    assert parse_card(path).metrics["scaled_mean"].parameters == {}  # [metrics.scaled_mean.parameters], empty
    scaled = ["--metrics", "scaled_mean", "--set", "scaled_mean.scale=2"]
    code, _, err = cli(capsys, "eval", str(path), *scaled)
    assert code == 0 and ("note: scaled_mean ran with scale = 2; the card's value was measured with the "
                          "metric's defaults") in err
    defaults = evaluate_card(path, metrics=["scaled_mean"])  # measured with the defaults; written after
    assert cli(capsys, "eval", str(path), *scaled, "--write")[0] == 0  # another command, meanwhile
    assert parse_card(path).metrics["scaled_mean"].parameters == {"scale": 2}
    code, _, err = cli(capsys, "eval", str(path), "--metrics", "scaled_mean")  # with the card's settings now
    assert code == 0 and "note:" not in err
    defaults.write()
    written = parse_card(path)
    assert written.metrics["scaled_mean"].parameters == {} and "scaled_mean" not in written.eval_settings
    assert written.metrics["scaled_mean"].value == pytest.approx(defaults.results["scaled_mean"], rel=1e-5)
    assert as_metrics(written, {"constant": 1.0}, measured=["constant"])["constant"].parameters is None  # a metric
    # that takes no setting records none, as the zoo's cards record cluster_accuracy


@pytest.mark.parametrize("given, problem, code", [
    ("samples=3", "give METRIC.SETTING=VALUE", 2),
    ("importance_log_likelihood.samples=", "give METRIC.SETTING=VALUE", 2),
    ("importance_log_likelihood.samples=5\nx=1", "holds more than one value", 2),
    ("importance_log_likelihood.samples=" + "[" * 3000 + "]" * 3000, "nests too deeply", 2),
    ("importance_log_likelihood.sample=3", "takes no argument 'sample'", 1),
    ("importance_log_likelihood.seed=-1", "metric 'importance_log_likelihood': seed = -1 is not a whole number (int), "
                                          "at least 0 and at most 9,223,372,036,854,775,807", 1),
    ("importance_log_likelihood.seed=1180591620717411303424", "seed = 1180591620717411303424 is not a whole number",
     1),
    ("importance_loglikelihood.samples=3", "unknown metric 'importance_loglikelihood'", 1),
    ("elbo.seed=3", "settings were given for metric 'elbo', which this evaluation does not measure "
                    "(importance_log_likelihood); name it in --metrics", 1),
])
def test_a_wrong_set_is_refused_before_anything_is_measured_or_written(data_plugin, tmp_path, capsys, given, problem,
                                                                      code):
    path, _, _ = write_entry(tmp_path, make_card("tiny", eval_metrics=["elbo"]))
    before = path.read_bytes()
    got, out, err = cli(capsys, "eval", str(path), "--metrics", "importance_log_likelihood", "--set", given, "--write")
    assert (got, out) == (code, "") and problem in err.strip().splitlines()[-1] and "Traceback" not in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("arguments, problem", [
    ({"metrics": "elbo"}, r"metrics takes a list of metric names, e.g. \['elbo'\], not a string"),
    ({"settings": {"elbo": 5}}, r"settings takes \{metric: \{setting: value\}\}"),
    ({"settings": [1]}, r"settings takes \{metric: \{setting: value\}\}"),
])
def test_evaluate_card_refuses_arguments_of_the_wrong_shape(arguments, problem):
    from vaezoo.evaluation.report import evaluate_card

    with pytest.raises(TypeError, match=problem):
        evaluate_card(tiny(), **arguments)


def test_numpy_integers_are_taken_for_a_metric_s_whole_number_settings_and_recorded_as_plain_ints(data_plugin,
                                                                                                  tmp_path):
    """points=np.int64(50) was refused as no whole number, where vaezoo.context.whole_number takes it."""
    from vaezoo.evaluation.report import evaluate_card

    path, _, _ = write_entry(tmp_path, make_card("tiny", eval_metrics=["elbo"]))
    card = parse_card(path)
    model = build_model(card)
    model.load_state_dict(load_state_dict(card))
    evaluation = Evaluation(model.eval(), card_dataset(card), batch_size=np.int64(16))
    spec = metric("importance_log_likelihood")
    assert spec.measure(evaluation, samples=np.int64(3), seed=np.uint8(1)) == spec.measure(evaluation, samples=3,
                                                                                            seed=1)
    report = evaluate_card(path, metrics=["importance_log_likelihood"], write=True,
                           settings={"importance_log_likelihood": {"samples": np.int32(3), "seed": np.int64(1)}})
    assert report.settings == {"importance_log_likelihood": {"samples": 3, "seed": 1}}
    assert all(type(v) is int for v in report.settings["importance_log_likelihood"].values())
    assert parse_card(path).eval_settings == {"importance_log_likelihood": {"samples": 3, "seed": 1}}
    for value in (np.True_, torch.tensor(True), np.float64(3.0)):
        with pytest.raises(MetricError, match=r"samples = .* is not a whole number \(int\), at least 1"):
            spec.measure(evaluation, samples=value)
