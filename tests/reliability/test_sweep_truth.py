"""Sweeps tell the truth (vaezoo.training.sweeps): a swept field that an ensemble refuses, or that changes no
member's training (``compile``, the fields a run records), is refused up front in one line, before any folder is
made; no two members of a sweep train one recipe; a card key that holds a dot is swept or refused in one line, never
a ``KeyError`` traceback."""

from __future__ import annotations

import tomllib

import pytest
from kit import cli, make_card, write_toml

from vaezoo.entries.recipe import RESUMED, recipe
from vaezoo.entries.schema import Card
from vaezoo.errors import TrainingError
from vaezoo.training.sweeps import Sweep, members


@pytest.fixture
def tiny(data_plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core,testdata")
    return tmp_path


@pytest.mark.parametrize("sweep", ["compile=false,true", "train.compile=true,false", "compile=true"])
def test_a_sweep_of_compile_is_refused_up_front(tiny, capsys, sweep):
    """'--sweep compile=false,true' was accepted although ensembles refused compile: both runs had identical weights
    and one card claimed compile = true. An ensemble compiles its one shared step for all its members or for none,
    so compile is still not swept."""
    path = write_toml(tiny / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tiny / "out"), "--sweep", sweep)
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "the members of an ensemble share one step, compiled for all or for none" in err and "--compile" in err
    assert not (tiny / "out").exists()


def _other(value, path: str):
    """A second value for the field ``path`` that holds ``value``."""
    if path == "train.precision":
        return "fp32"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, list):
        return [*value, *value]
    return None if value is None else f"{value}-other"


def test_no_field_sweeps_into_members_that_train_one_recipe():
    """The class: every field of the card either is refused up front or gives members whose recipes (what decides
    the weights, less what a run records) all differ."""
    card = Card.model_validate(make_card("tiny"))
    refused = set()
    for path, value in card.flat().items():
        sweep = Sweep(path, (value, _other(value, path)))
        try:
            made = members(card, [0], [sweep])
        except TrainingError:
            refused.add(path)
            continue
        recipes = [recipe(member.card, RESUMED - {"train.epochs"}) for member in made]
        assert recipes[0] != recipes[1], path
    assert {"train.compile", "train.steps", "train.budget", "train.checkpoint_every", "train.seed"} <= refused
    assert "train.epochs" not in refused and "model.regularizers.0.beta" not in refused


def _dotted_card(tiny, **model):
    data = make_card("tiny")
    data["model"]["encoder"].update(model)
    return write_toml(tiny / "tiny.toml", data)


@pytest.mark.parametrize("key", ["odd.key", '"odd.key"', 'model.encoder."odd.key"'])
def test_a_model_key_holding_a_dot_is_swept_or_refused_in_one_line(tiny, capsys, key):
    """A [model] key that contains a dot gave a KeyError traceback."""
    path = _dotted_card(tiny, **{"odd.key": 1})
    code, out, err = cli(capsys, "train", str(path), "--out", str(tiny / "out"), "--sweep", f"{key}=1,2")
    assert "Traceback" not in err and "KeyError" not in err
    assert code != 0 and len(err.strip().splitlines()) == 1, err  # the mlp encoder takes no such argument
    assert "odd.key" in err


def test_a_key_holding_a_dot_reaches_its_own_field(tiny):
    """The dotted key and a nested table it looks like are two fields: the quoted path names one, the bare one the
    nested table's (and says so where both match)."""
    card = Card.model_validate(tomllib.loads(_dotted_card(tiny, **{"a.b": 1, "a": {"b": 2}}).read_text()))
    quoted = members(card, [0], [Sweep('encoder."a.b"', (5, 7))])
    assert [m.card.model["encoder"]["a.b"] for m in quoted] == [5, 7]
    assert {m.card.model["encoder"]["a"]["b"] for m in quoted} == {2}
    nested = members(card, [0], [Sweep("model.encoder.a.b", (5, 7))])
    assert [m.card.model["encoder"]["a"]["b"] for m in nested] == [5, 7]
    alone = Card.model_validate(tomllib.loads(_dotted_card(tiny, **{"odd.key": 1}).read_text()))
    assert [m.card.model["encoder"]["odd.key"] for m in members(alone, [0], [Sweep("odd.key", (3, 4))])] == [3, 4]
    with pytest.raises(TrainingError, match="no such field; the fields it sweeps are .*model.encoder.\"odd.key\""):
        members(alone, [0], [Sweep("nothing", (3, 4))])


@pytest.mark.parametrize("key, values", [("epochs", (1, 2)), ("batch_size", (4, 8))])
def test_a_member_of_another_length_drops_the_budget_that_told_the_cards_own_run(key, values):
    """'--sweep epochs=1,2' on a card whose budget says '2 epochs (16 steps of 8)' wrote that budget on the 1-epoch
    member's card, as if it had been that run; --epochs drops it, and so does a sweep of the run's length now."""
    budget = "2 epochs (16 steps of 8): 1 second on a laptop"
    card = Card.model_validate(make_card("tiny", train={"budget": budget}))
    shorter, own = members(card, [0, 1], [Sweep(key, values)])[::2]
    assert shorter.card.train.budget is None
    assert own.card.train.budget == budget


@pytest.mark.parametrize("option, sweep", [(["--epochs", "4"], "epochs=1,2"),
                                           (["--precision", "bf16"], "precision=fp32,bf16-mixed")])
def test_an_option_and_a_sweep_of_its_field_are_refused_together(tiny, capsys, option, sweep):
    """'--epochs 4 --sweep epochs=1,2' trained the 1- and 2-epoch members without a word about --epochs 4."""
    path = write_toml(tiny / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tiny / "out"), *option, "--sweep", sweep)
    field, _, values = sweep.partition("=")
    said = values.replace(",", ", ")
    assert code == 1 and err.strip().splitlines() == [
        f"error: {' '.join(option)} and --sweep both set train.{field} (the members': {said}); give it once"], err
    assert not (tiny / "out").exists()


@pytest.mark.parametrize("again, member, old", [("beta=1.0,2.0", "beta=1.0", "beta=1"),
                                                ("model.regularizers.0.beta=1,2", "model.regularizers.0.beta=1",
                                                 "beta=1"),
                                                ("beta=1,2.0", "beta=2.0", "beta=2")])
def test_a_resume_that_spells_a_sweep_otherwise_is_refused_not_started_afresh(tiny, capsys, again, member, old):
    """'--sweep beta=1,2' resumed as '--sweep beta=1.0,2.0' (the same values) trained both members again from step 0
    in new folders beta=1.0/seed-0 and beta=2.0/seed-0, beside the stopped runs, with only a note."""
    path, out = write_toml(tiny / "tiny.toml", make_card("tiny")), tiny / "out"
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--sweep", "beta=1,2", "--max-steps", "2")
    assert code == 0, err
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--sweep", again, "--resume")
    assert code == 1 and err.strip().splitlines() == [
        f"error: --out {out} holds the run of {member} seed 0 in {out / old / 'seed-0'}, where --sweep now spells it "
        f"{member}: resumed so, it would start afresh in {out / member / 'seed-0'}; resume with the values spelled "
        f"as the run was started ({old})"], err
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["beta=1", "beta=2"]
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--sweep", "beta=1,2,3", "--resume")
    assert code == 0, err  # the runs' own spelling resumes them, and a new value starts beside them
