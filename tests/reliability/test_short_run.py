"""A short run keeps its model: ``vaezoo train ... --max-steps N`` writes the weights and a card marked as stopped at
step N of M (``train.steps = N``, its summary), which ``vaezoo.load(FOLDER)`` loads and ``vaezoo eval FOLDER``
evaluates; ``--resume`` continues the run to its end and the finished run's card and weights replace them."""

from __future__ import annotations

import pytest
import torch
from kit import cli, make_card, write_toml

import vaezoo
from vaezoo.entries.catalog import parse_card
from vaezoo.training.train import train, train_seeds


@pytest.fixture
def tiny(data_plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core,testdata")
    return write_toml(tmp_path / "tiny.toml", make_card("tiny", eval_metrics=["elbo"]))  # 16 steps


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_short_run_leaves_a_model_that_loads_and_evaluates_and_resumes_to_its_end(tiny, tmp_path, capsys):
    """--max-steps N wrote no weights: a user who trained a few hundred steps had nothing to load."""
    out = tmp_path / "short"
    code, printed, err = cli(capsys, "train", str(tiny), "--out", str(out), "--max-steps", "5")
    assert code == 0, err
    card_path = out / "tiny-blobs-run.toml"
    assert printed.split() == [str(card_path)]
    assert "not evaluated; measure it with: vaezoo eval" in err and "stopped at step 5 of 16; continue with: " in err
    short = parse_card(card_path)
    assert short.train.steps == 5 and short.summary.startswith("Stopped at step 5 of 16 (--max-steps)")
    assert short.metrics == {}
    loaded = vaezoo.load(str(out))
    assert loaded.card.train.steps == 5

    code, _, err = cli(capsys, "eval", str(out), "--write")
    assert code == 0, err
    assert "elbo" in parse_card(card_path).metrics

    code, printed, err = cli(capsys, "train", str(tiny), "--out", str(out), "--resume")
    assert code == 0, err
    finished = parse_card(card_path)
    assert finished.train.steps == 16 and not finished.summary.startswith("Stopped")
    assert "elbo" in finished.metrics  # measured again on the finished run
    whole = train(parse_card(tiny), tmp_path / "whole")  # the same run, never stopped
    assert _same(vaezoo.load(str(out)).state_dict(), whole.model.state_dict())
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "checkpoint.pt", "tiny-blobs-run.safetensors", "tiny-blobs-run.toml"]


def test_a_short_run_resumed_short_again_moves_its_card_on(tiny, tmp_path):
    out = tmp_path / "short"
    first = train(parse_card(tiny), out, max_steps=3)
    again = train(parse_card(tiny), out, resume=True, max_steps=9)
    assert first.card_path == again.card_path
    card = parse_card(again.card_path)
    assert card.train.steps == 9 and card.summary.startswith("Stopped at step 9 of 16")
    assert _same(vaezoo.load(str(out)).state_dict(), again.model.state_dict())


def test_each_member_of_a_short_ensemble_keeps_its_model(tiny, tmp_path):
    results = train_seeds(parse_card(tiny), tmp_path / "runs", [0, 1], max_steps=4)
    for seed, result in enumerate(results):
        assert result.card_path == tmp_path / "runs" / f"seed-{seed}" / "tiny-blobs-run.toml"
        card = parse_card(result.card_path)
        assert (card.train.steps, card.train.seed) == (4, seed) and card.summary.startswith("Stopped at step 4 of 16")
        assert _same(vaezoo.load(str(result.card_path.parent)).state_dict(), result.model.state_dict())


def test_a_run_trained_from_a_stopped_runs_card_says_only_what_it_did(tiny, tmp_path):
    """'vaezoo train SHORT --out NEW' of a run stopped at step 3 wrote a finished 16-step card whose summary began
    'Stopped at step 3 of 16 (--max-steps): not the finished run', and stopped again, two such notes."""
    short = train(parse_card(tiny), tmp_path / "short", max_steps=3)
    summary = parse_card(tiny).summary
    finished = parse_card(train(short.card_path, tmp_path / "new", evaluate=False).card_path)
    assert (finished.train.steps, finished.summary) == (16, summary)
    stopped = parse_card(train(short.card_path, tmp_path / "again", max_steps=2).card_path)
    assert stopped.summary == (f"Stopped at step 2 of 16 (--max-steps): not the finished run; resume it with "
                               f"--resume. {summary}")
