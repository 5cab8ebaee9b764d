"""What decides a run (vaezoo.entries.recipe): one recipe, one fingerprint, one diff, one check for checkpoints
and seeds."""

from __future__ import annotations

import copy

import pytest
from kit import make_card

from vaezoo.cli import _show_warning
from vaezoo.entries.recipe import ABSENT, RESUMED, SEEDED, Difference, check_recipe, differences, fingerprint, recipe
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, TrainingError
from vaezoo.evaluation.seeds import Run
from vaezoo.entries.checkpoints import Checkpoint, check_model


def card(**train) -> Card:
    return Card.model_validate(make_card("tiny", train=train))


def test_records_are_never_the_recipe_and_each_question_leaves_out_its_own_fields():
    for leave_out in (RESUMED, SEEDED):
        assert recipe(card(steps=5, budget="1 minute", checkpoint_every=2), leave_out) == recipe(card(), leave_out)
    assert recipe(card(epochs=9, compile=True)) == recipe(card())  # a resumed run may extend itself
    assert recipe(card(epochs=9), SEEDED) != recipe(card(), SEEDED)  # runs over seeds may not
    assert recipe(card(seed=3), SEEDED) == recipe(card(), SEEDED)
    assert recipe(card(seed=3)) != recipe(card())


def test_the_resumed_recipe_keeps_the_shape_checkpoints_stored_before_it_had_a_module():
    # checkpoints on disk store this recipe; a new key would refuse every one of them
    made = recipe(card())
    assert set(made) == {"architecture", "model", "train"}
    assert "precision" not in made["train"] and recipe(card(precision="bf16"))["train"]["precision"] == "bf16"
    assert fingerprint(made) == fingerprint(dict(reversed(list(made.items()))))  # keys sorted before hashing


def test_differences_walk_tables_and_lists_of_tables_but_compare_lists_of_numbers_whole():
    other = {"model": {"hidden": [8], "regs": [{"beta": 4.0}], "extra": 1}, "lr": 0.1}
    mine = {"lr": 0.1, "model": {"hidden": [16], "regs": [{"beta": 1.0}], "dim": 2}}
    assert differences(other, mine) == [
        Difference("model.hidden", [8], [16]), Difference("model.regs.0.beta", 4.0, 1.0),
        Difference("model.dim", ABSENT, 2), Difference("model.extra", 1, ABSENT)]
    assert differences(mine, mine) == []


def test_one_check_for_every_recorded_run_in_its_own_words(tmp_path):
    mine = card()
    check_recipe(Run("run a", card(seed=4, steps=7)), mine)
    with pytest.raises(CardError, match=r"^run b: train\.batch_size is 64, the card's is \d+; seeds must share"):
        check_recipe(Run("run b", card(batch_size=64)), mine)


def test_a_checkpoint_older_than_recipes_resumes_with_a_warning_of_one_line(tmp_path, capsys):
    older = Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, None, None)
    with pytest.warns(UserWarning, match=r"checkpoint .*checkpoint\.pt holds no recipe .* card 'tiny-blobs'") as said:
        check_recipe(older, card())
    # the command line shows vaezoo's own warnings as one line: this one, a plain UserWarning, was shown as Python
    # shows a library's, with the file, line number and source line of vaezoo's code that warned
    _show_warning(said[0].message, said[0].category, said[0].filename, said[0].lineno)
    assert capsys.readouterr().err.splitlines() == [f"warning: {said[0].message}"]


def test_a_value_written_as_an_equal_number_of_another_type_is_the_same_recipe(tmp_path):
    # beta = 1 beside a checkpoint of beta = 1.0: the fingerprints differed and the values did not, and the run was
    # refused "with another recipe than card 'tiny-blobs': ; resume with the card that started the run"
    made, data = card(), make_card("tiny")
    data["model"]["regularizers"][0]["beta"] = 1
    written = Card.model_validate(data)
    assert fingerprint(recipe(written)) != fingerprint(recipe(made))
    check_recipe(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, made.name, recipe(made)), written)
    check_recipe(Run("run a", made), written)
    check_model(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, made.name, recipe(made)), written)
    data["model"]["regularizers"][0]["beta"] = 2
    with pytest.raises(TrainingError, match=r"model.regularizers.0.beta 1.0 in the checkpoint, 2 in card"):
        check_recipe(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, made.name, recipe(made)),
                     Card.model_validate(data))


def test_a_setting_written_at_the_default_its_part_declares_is_the_same_recipe_as_one_left_out(tmp_path):
    # FactorVAE's lr = 1e-4 and betas = [0.5, 0.9] written on the card, left out where the run started: --resume,
    # vaezoo seeds and eval --checkpoint refused it ("model.regularizers.0.lr absent in the checkpoint, 0.0001")
    data = make_card("tiny")
    data["model"]["regularizers"] = [{"type": "factorvae", "gamma": 10.0, "layers": 2, "hidden": 8}]
    made = Card.model_validate(copy.deepcopy(data))
    data["model"]["regularizers"][0].update(lr=1e-4, betas=[0.5, 0.9])
    data["model"]["likelihood"] = "bernoulli"  # the architecture's own default
    written = Card.model_validate(copy.deepcopy(data))
    for left, right in ((made, written), (written, made)):
        check_recipe(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, left.name, recipe(left)), right)
        check_recipe(Run("run a", left), right)
        check_model(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, left.name, recipe(left)), right)
    data["model"]["regularizers"][0]["lr"] = 1e-3
    with pytest.raises(TrainingError, match=r"another recipe than card 'tiny-blobs': model.regularizers.0.lr absent "
                                            r"in the checkpoint, 0.001 in card 'tiny-blobs'; resume"):
        check_recipe(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, made.name, recipe(made)),
                     Card.model_validate(data))


def test_a_check_under_a_prefix_refuses_only_a_difference_there_and_is_silent_on_no_recipe(tmp_path, recwarn):
    """A resume's early check, made before its data is read (``under="train.data."``): another batch size is left to
    the whole check that follows, another dataset option is refused naming every field that differs, and a
    checkpoint older than recipes passes without the warning the whole check gives it."""
    def checkpoint(made: Card) -> Checkpoint:
        return Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, made.name, recipe(made))

    mine = card()
    check_recipe(checkpoint(card(batch_size=64)), mine, under="train.data.")
    other = card(batch_size=64, data={"name": "tiny_blobs", "options": {"noise": 0.5}})
    with pytest.raises(TrainingError, match=r": train\.data\.options\.noise 0\.5 in the checkpoint, absent in card "
                                            r"'tiny-blobs'; train\.batch_size 64 in the checkpoint, 8 in card"):
        check_recipe(checkpoint(other), mine, under="train.data.")
    check_recipe(Checkpoint(tmp_path / "checkpoint.pt", 0, {}, {}, {}, None, None), mine, under="train.data.")
    assert not recwarn.list
