"""Ensembles (``vaezoo train --seeds/--sweep``): each member ends as its own run trained alone would.

Every built-in architecture is trained as an ensemble of two seeds, in both formulations of the stacked
step ("loop": the members' forward passes in turn; "vmap": one batched pass with replayed noise), and its
second member is compared with that seed trained alone.
"""

from __future__ import annotations

import os
import re
import signal
import tomllib
from pathlib import Path

import pytest
import torch
from kit import assert_member_checkpoint_is_the_solo_runs, count_fit_pools, make_card, write_toml

from vaezoo.cli import main
from vaezoo.data import ImageDataset
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import TrainingError
from vaezoo.entries.checkpoints import CHECKPOINT
from vaezoo.training.ensemble import Member
from vaezoo.training.sweeps import Sweep, members, parse_sweep
from vaezoo.training.train import Interrupted, train, train_seeds

TOY_JOINT = {"image_size": 16, "channels": 1, "continuous": 2, "discrete": [3], "hidden": 32,
             "capacity": {"continuous": [0.0, 5.0, 20, 30.0], "discrete": [0.0, 1.0, 20, 30.0]}}
CONV = {"encoder": {"type": "conv_encoder", "hidden": 32}, "decoder": {"type": "conv_decoder", "hidden": 32},
        "likelihood": "bernoulli"}
ARCHITECTURES = {
    "jointvae": ("jointvae", TOY_JOINT),
    "betatcvae": ("betatcvae", {"latent_dim": 3, "beta": 6.0, "sampling": "mss", "hidden": 32}),
    "betavae": ("betavae", {"latent_dim": 3, "beta": 4.0, "hidden": 32}),
    "vae, joint latent, mss TC and capacity": ("vae", {
        **CONV,
        "latent": {"type": "joint", "parts": [{"type": "gaussian", "name": "cont", "dim": 2},
                                              {"type": "gumbel_categorical", "name": "cat", "categories": 3}]},
        "regularizers": [{"type": "total_correlation", "sampling": "mss", "part": "cont", "beta": 6.0},
                         {"type": "capacity", "groups": [{"name": "discrete", "parts": ["cat"], "max": 1.0,
                                                          "iterations": 20, "gamma": 30.0}]}]}),
}


def toy(architecture: str = "jointvae", model: dict | None = None, **train) -> Card:
    joint = architecture == "jointvae" or "joint" in str(model)
    data = make_card("toy", model=model or TOY_JOINT, train=train, architecture=architecture,
                     eval_metrics=["cluster_accuracy"] if joint else ["elbo"])
    return Card.model_validate(data)


def small(architecture: str, model: dict) -> Card:
    """A card of 16 images, 8 a batch: 100 steps in 50 epochs."""
    return toy(architecture, model, epochs=50, batch_size=8, checkpoint_every=25,
               data={"name": "toy_bars", "options": {"size": 16}})


def relative_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(((a[k].float() - b[k].float()).norm() / b[k].float().norm().clamp_min(1e-12)).item() for k in a)


@pytest.mark.slow
@pytest.mark.parametrize("formulation", ["loop", "vmap"])
@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_a_member_equals_its_solo_run(data_plugin, tmp_path, name, formulation):
    architecture, model = ARCHITECTURES[name]
    card = small(architecture, model)
    [_, member] = train_seeds(card, tmp_path / "ensemble", [0, 1], formulation=formulation)
    alone = train(card, tmp_path / "alone", seed=1)
    assert member.step == alone.step == 100
    assert relative_difference(member.model.state_dict(), alone.model.state_dict()) < 1e-4
    together, solo = parse_card(member.card_path), parse_card(alone.card_path)
    assert together.metrics.keys() == solo.metrics.keys() and together.metrics
    for key, metric in solo.metrics.items():
        assert together.metrics[key].value == pytest.approx(metric.value, rel=5e-3, abs=1e-6), key


def test_the_loop_formulation_is_the_solo_run_bit_for_bit(data_plugin, tmp_path):
    [_, member] = train_seeds(toy(), tmp_path / "ensemble", [0, 1], max_steps=10, formulation="loop")
    alone = train(toy(), tmp_path / "alone", seed=1, max_steps=10)
    assert_member_checkpoint_is_the_solo_runs(tmp_path / "ensemble" / "seed-1" / CHECKPOINT,
                                              tmp_path / "alone" / CHECKPOINT, "loop", 2)
    assert relative_difference(member.model.state_dict(), alone.model.state_dict()) == 0


def test_the_help_of_seeds_promises_an_mlp_member_its_solo_run_to_float_rounding_not_bit_for_bit(
        data_plugin, tmp_path, capsys):
    card = toy("vae", {"image_size": 16, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
                       "encoder": {"type": "mlp_encoder", "hidden": [16]},
                       "decoder": {"type": "mlp_decoder", "hidden": [16]}})
    [_, member] = train_seeds(card, tmp_path / "ensemble", [0, 1], max_steps=10, evaluate=False)
    alone = train(card, tmp_path / "alone", seed=1, max_steps=10, evaluate=False)
    assert relative_difference(member.model.state_dict(), alone.model.state_dict()) < 1e-4
    capsys.readouterr()
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "each ends as training that seed alone would, to float rounding (bit for bit for a convolutional " \
           "model on the CPU, whose members run in turn)" in help_text


@pytest.mark.parametrize("formulation", ["loop", "vmap"])
def test_an_ensemble_resumed_mid_run_ends_as_one_never_interrupted(data_plugin, tmp_path, formulation):
    whole = train_seeds(toy(), tmp_path / "whole", [1, 2], max_steps=10, formulation=formulation)
    out = tmp_path / "broken"
    train_seeds(toy(), out, [1, 2], max_steps=6, formulation=formulation)
    resumed = train_seeds(toy(), out, [1, 2], resume=True, max_steps=10, formulation=formulation)
    for a, b in zip(whole, resumed):
        assert b.step == 10
        assert relative_difference(a.model.state_dict(), b.model.state_dict()) == 0


def test_ctrl_c_in_an_ensemble_checkpoints_every_member_at_the_step_reached(data_plugin, tmp_path, monkeypatch):
    batch, cuts = ImageDataset.batch, []

    def interrupted_at_step_5(self, index, *args, **kwargs):
        if not isinstance(index, slice):
            cuts.append(index)
            if len(cuts) == 6:
                os.kill(os.getpid(), signal.SIGINT)
        return batch(self, index, *args, **kwargs)

    monkeypatch.setattr(ImageDataset, "batch", interrupted_at_step_5)
    with pytest.raises(Interrupted) as info:
        train_seeds(toy(), tmp_path, [1, 2])
    assert info.value.step == 6
    for seed in (1, 2):
        assert torch.load(tmp_path / f"seed-{seed}" / CHECKPOINT, weights_only=True)["step"] == 6


def test_a_member_whose_loss_becomes_nan_stops_alone(data_plugin, tmp_path, second_member_diverges, capsys):
    good, bad = train_seeds(toy(), tmp_path, [1, 2])
    err = capsys.readouterr().err
    assert good.error is None and good.step == good.total == 12 and good.card_path.exists()
    assert bad.error and "seed 2: loss became nan at step 9 (epoch 4)" in bad.error and bad.error in err
    assert bad.step == 8 and bad.card_path is None  # its last checkpoint, step 8, stays
    assert torch.load(tmp_path / "seed-2" / CHECKPOINT, weights_only=True)["step"] == 8
    assert all(torch.isfinite(t).all() for t in bad.model.state_dict().values())


@pytest.mark.parametrize("formulation", ["loop", "vmap"])
def test_a_member_whose_term_becomes_inf_is_stopped_naming_that_term(data_plugin, tmp_path, monkeypatch, formulation):
    """As a single run does, so that a broken part is named by its term (``inf_from``: the test plugin's)."""
    start = Member.start.__func__

    def seed_2s_term_inf_from_step_9(cls, card, out, label, model, *args):
        if card.train.seed == 2:
            model.regularizers[1].start.fill_(9)
        return start(cls, card, out, label, model, *args)

    monkeypatch.setattr(Member, "start", classmethod(seed_2s_term_inf_from_step_9))
    card = toy("vae", {**CONV, "latent": {"type": "gaussian", "dim": 2},
                       "regularizers": [{"type": "beta"}, {"type": "inf_from"}]})
    good, bad = train_seeds(card, tmp_path, [1, 2], formulation=formulation, evaluate=False)
    assert good.error is None and good.step == 12
    assert bad.error.startswith("seed 2: loss became inf at step 9 (epoch 4), in its term inf_from; the last good "
                                f"checkpoint is {tmp_path / 'seed-2' / CHECKPOINT} (step 8)")


def test_the_sweeps_members_carry_their_values_on_their_cards(data_plugin, tmp_path):
    card = toy("betavae", ARCHITECTURES["betavae"][1], epochs=1)
    card = card.model_copy(update={"eval_metrics": []})
    results = train_seeds(card, tmp_path, [0, 1], [Sweep("beta", (1.0, 4.0))])
    folders = [r.card_path.parent.relative_to(tmp_path).as_posix() for r in results]
    assert folders == ["beta=1.0/seed-0", "beta=1.0/seed-1", "beta=4.0/seed-0", "beta=4.0/seed-1"]
    written = [tomllib.loads(r.card_path.read_text()) for r in results]
    assert [(c["model"]["beta"], c["train"]["seed"]) for c in written] == [(1.0, 0), (1.0, 1), (4.0, 0), (4.0, 1)]


def test_a_sweep_on_the_command_line(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out), "--sweep", "hidden=16,32"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / f"hidden={h}" / "seed-0" / "toyvae-bars-run.toml") for h in (16, 32)]


def test_a_sweep_trains_the_seed_that_seed_names(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out), "--sweep", "hidden=16,32", "--seed", "3"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / f"hidden={h}" / "seed-3" / "toyvae-bars-run.toml") for h in (16, 32)]
    assert {tomllib.loads(Path(card).read_text())["train"]["seed"] for card in printed} == {3}


@pytest.mark.parametrize(("sweep", "message"), [
    ("nothing=1,2", "--sweep nothing: the card has no such field"),
    ("max", "--sweep takes KEY=V1,V2,..., got 'max'"),
    # a comma too many: '' was swept, refused as the field's value ("beta = '' is not a number", "latent family ''")
    ("lr=1e-3,", "--sweep lr=1e-3,: value 2 is empty; give the values separated by single commas"),
    ("lr=1e-3, ,1e-2", "--sweep lr=1e-3, ,1e-2: value 2 is empty"),
    ("lr=1,1", "--sweep values lr=1 and lr=1 make the same card"),
    ("lr=1,1.0", "--sweep values lr=1 and lr=1.0 make the same card"),
    ('lr=1e-3,"../../escaped"', "--sweep lr=../../escaped: a swept value names its member's folder"),
    ("lr=1e-3\nx=1", "--sweep lr: '1e-3\\nx=1' holds more than one value"),
    ("lr=" + "[" * 3000 + "]" * 3000, "--sweep lr: the value '[[[["),
    ("seed=1,2", "--sweep seed: give the seeds with --seeds"),
    ("steps=1,2", "--sweep steps: train.steps records how a run went or how often it saved, and does not change"),
    ("budget=a,b", "--sweep budget: train.budget records how a run went"),
    ("batch_size=0,4", "--sweep train.batch_size=0: input should be greater than 0"),
    # the values a field takes are quoted as the card spells them (all lower case, 'adam' was refused as not 'adam')
    ("optimizer.name=SGD,sgd",
     '--sweep train.optimizer.name="sgd": input should be \'Adam\', \'AdamW\', \'SGD\' or \'RMSprop\''),
    # a recipe's numbers are strict, as its optimiser options are: they trained an lr of 1.0, 1 epoch, 3 epochs
    ("lr=1e-3,true", "--sweep train.optimizer.lr=true: input should be a valid number"),
    ("epochs=1,true", "--sweep train.epochs=true: input should be a valid integer"),
    ('epochs=1,"3"', '--sweep train.epochs="3": input should be a valid integer'),
    ("epochs=1,2.0", "--sweep train.epochs=2.0: input should be a valid integer"),
    ("hidden=16,-4", "error: hidden=-4 seed 0: "),  # the schema takes it, the model's nets refuse it
])
def test_a_bad_sweep_is_a_one_line_error(data_plugin, tmp_path, capsys, sweep, message):
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    code = main(["train", str(path), "--out", str(tmp_path / "out"), "--sweep", sweep])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and message in err and not (tmp_path / "out").exists()


def test_a_swept_part_no_plugin_registers_names_the_member_that_needs_it(data_plugin, tmp_path, capsys):
    # it said "card 'tiny-blobs' needs the latent family 'nosuch'", of a card whose latent is gaussian
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code = main(["train", str(path), "--out", str(tmp_path / "out"), "--sweep", "model.latent.type=gaussian,nosuch"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and not (tmp_path / "out").exists()
    assert err.startswith("error: model.latent.type=nosuch seed 0: card 'tiny-blobs' needs the latent family "
                          "'nosuch', which no installed plugin registers")


def test_a_sweep_of_a_setting_left_at_its_default_says_to_write_it_on_the_card(data_plugin):
    # regularizers = [{ type = "beta" }] has a beta (1.0) but the card does not state it: '--sweep beta=1,4' said
    # the card had no such field, as of a typo
    model = {**make_card("tiny")["model"], "regularizers": [{"type": "beta"}]}
    card = Card.model_validate(make_card("tiny", model=model))
    with pytest.raises(TrainingError, match=r"sweep beta: the card has no such field; .* \(a setting left at its "
                                            r"default is not on the card: write it there to sweep it\)"):
        members(card, [0], [parse_sweep("beta=1,4")])


def test_a_sweep_of_no_field_lists_only_the_fields_a_sweep_takes(data_plugin):
    # the list named train.seed, train.data.*, train.compile and the records (train.steps, train.machine.0.*),
    # each of which a sweep then refused
    card = Card.model_validate({**make_card("tiny"), "train": {**make_card("tiny")["train"], "compile": False,
                                                               "steps": 10, "budget": "1 min"}})
    with pytest.raises(TrainingError) as caught:
        members(card, [0], [parse_sweep("nothing=1,2")])
    listed = re.search(r"(?:its fields are|the fields it sweeps are) (.*) \(a setting", str(caught.value))[1]
    listed = listed.split(", ")
    assert "train.epochs" in listed and "train.batch_size" in listed
    for name in listed:
        members(card, [0], [parse_sweep(f"{name}={card.flat()[name]!r}".replace("'", '"'))])
    assert not [name for name in listed if name.startswith(("train.seed", "train.data", "train.steps",
                                                            "train.budget", "train.compile", "train.machine"))]


def test_a_sweep_of_arrays_and_strings_holding_commas_keeps_each_value_whole():
    # '--sweep betas=[0.5,0.9],[0.9,0.99]' was cut at every comma: "betas = '[0.5' is not of type tuple[float, float]"
    assert parse_sweep("betas=[0.5,0.9],[0.9, 0.99]").values == ([0.5, 0.9], [0.9, 0.99])
    assert parse_sweep('name="a,b",c, {x = 1, y = 2}').values == ("a,b", "c", {"x": 1, "y": 2})
    assert parse_sweep("beta=1, 4").values == (1, 4)


def test_a_member_that_no_other_shares_a_step_with_is_said_to_train_alone(data_plugin, tmp_path, capsys):
    # members of other latent sizes cannot be stacked: each said "1 runs in one step"
    card = Card.model_validate(make_card("tiny"))
    train_seeds(card, tmp_path, [0], [parse_sweep("model.latent.dim=2,3")], max_steps=1, evaluate=False)
    err = capsys.readouterr().err
    assert err.count("alone in its step") == 2 and "1 runs" not in err


def test_a_sweep_key_that_names_several_fields_asks_for_the_dotted_path():
    card = toy("vae", ARCHITECTURES["vae, joint latent, mss TC and capacity"][1])
    with pytest.raises(TrainingError, match=r"names several fields \(.*\); give the whole dotted path"):
        members(card, [0], [parse_sweep("type=a,b")])


def test_a_model_that_draws_through_an_operation_the_tape_cannot_see_is_refused_not_trained_wrong(
        data_plugin, tmp_path, monkeypatch):
    from vaezoo.latents.gaussian import GaussianPosterior

    def drawn_by_bernoulli(self):  # as a gamma, beta or Dirichlet sampler draws: not through the taped functions
        return self.mean + self.distribution.stddev * (2 * torch.bernoulli(torch.full_like(self.mean, 0.5)) - 1)

    monkeypatch.setattr(GaussianPosterior, "rsample", drawn_by_bernoulli)
    card = small(*ARCHITECTURES["betavae"])
    for formulation in ("loop", "vmap"):
        with pytest.raises(TrainingError, match=r"the model draws random numbers through an operation an ensemble "
                                                r"cannot hand each member its own draws of .*train the runs one at "
                                                r"a time with seed"):
            train_seeds(card, tmp_path / formulation, [0, 1], formulation=formulation)
        assert not list((tmp_path / formulation).rglob("*.toml")), "no member was published"


def test_a_model_vmap_cannot_batch_trains_its_members_in_turn_with_a_warning(data_plugin, tmp_path, monkeypatch):
    from vaezoo.errors import TrainingWarning
    from vaezoo.latents.gaussian import GaussianPosterior

    class Doubled(torch.autograd.Function):  # the pre-2.0 form, without setup_context: functorch refuses it
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    rsample = GaussianPosterior.rsample
    monkeypatch.setattr(GaussianPosterior, "rsample", lambda self: Doubled.apply(rsample(self)) / 2)
    card = toy("betavae", ARCHITECTURES["betavae"][1], epochs=1)
    looped = train_seeds(card, tmp_path / "loop", [0, 1], formulation="loop")
    with pytest.warns(TrainingWarning, match=r"cannot run under torch.func.vmap \(In order to use an autograd.Function"
                                             r".*formulation 'loop'"):
        batched = train_seeds(card, tmp_path / "vmap", [0, 1], formulation="vmap")
    for a, b in zip(looped, batched):
        assert relative_difference(a.model.state_dict(), b.model.state_dict()) == 0


def test_a_sweep_of_epochs_stopped_by_max_steps_says_each_members_own_total(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    args = ["train", str(path), "--out", str(out), "--seeds", "0,1", "--sweep", "epochs=1,2", "--max-steps", "2"]
    assert main(args) == 0
    err = capsys.readouterr().err
    said = re.search(r"stopped at (.*); continue with: ", err).group(1).split(", ")
    runs = [(e, s) for e in (1, 2) for s in (0, 1)]
    assert [re.sub(r" of [\d,]+ ", " of M ", part) for part in said] == [
        f"step 2 of M in {out / f'epochs={e}' / f'seed-{s}'}" for e, s in runs]
    totals = [int(re.search(r" of ([\d,]+) ", part).group(1).replace(",", "")) for part in said]
    assert totals == [totals[0]] * 2 + [2 * totals[0]] * 2 and totals[0] > 2  # epochs=2 makes twice the steps


def test_the_members_evaluations_fit_their_metrics_on_one_pool_of_worker_processes(data_plugin, tmp_path,
                                                                                   monkeypatch):
    """Each member's evaluation started its own pools of fresh interpreters importing scikit-learn (three for the
    fitted metrics); an ensemble's members now share one."""
    from vaezoo.metrics import parallel

    started, fitted = count_fit_pools(monkeypatch)
    with parallel.jobs(2):
        trained = train_seeds(toy(), tmp_path / "ensemble", [0, 1], formulation="loop")
    assert [t.card_path is not None for t in trained] == [True, True]
    assert fitted == [1, 2, 3, 4] * 2 and started == [2]
    assert parallel._here.pool is None


def test_the_progress_of_members_of_other_batch_sizes_shows_no_epoch(data_plugin, tmp_path, capsys, monkeypatch):
    """'--sweep batch_size=8,4' of 64 images showed 'epoch 4/4 step 32/32' where each member trains 2 epochs: the
    first member's 8 steps an epoch, counted over the 4-image member's 32 steps."""
    monkeypatch.setenv("VAEZOO_PROGRESS", "1")
    train_seeds(Card.model_validate(make_card("tiny")), tmp_path / "runs", [0], [Sweep("batch_size", (8, 4))],
                evaluate=False)
    last = [line for line in capsys.readouterr().err.splitlines() if " | eta " in line][-1]
    assert last.startswith("step 32/32 | "), last
    train_seeds(Card.model_validate(make_card("tiny")), tmp_path / "epochs", [0], [Sweep("epochs", (1, 2))],
                evaluate=False)
    last = [line for line in capsys.readouterr().err.splitlines() if " | eta " in line][-1]
    assert last.startswith("epoch 2/2 step 16/16 | "), last


def test_a_members_checkpoint_of_another_seed_is_refused_without_a_single_runs_advice(data_plugin, tmp_path, capsys):
    """seed-0's checkpoint copied into seed-1 was refused with 'resume with --seed 0', which --seeds does not take."""
    card = Card.model_validate(make_card("tiny"))
    train_seeds(card, tmp_path / "runs", [0, 1], max_steps=2)
    copied = tmp_path / "runs" / "seed-1" / CHECKPOINT
    copied.write_bytes((tmp_path / "runs" / "seed-0" / CHECKPOINT).read_bytes())
    before = copied.read_bytes()
    code = main(["train", str(write_toml(tmp_path / "tiny.toml", make_card("tiny"))), "--out", str(tmp_path / "runs"),
                 "--seeds", "0,1", "--resume"])
    assert code == 1 and capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: checkpoint {copied} is of another seed than member seed 1 (train.seed 0 in the checkpoint, 1 in card "
        f"'tiny-blobs'); put it back in its own seed's folder, or remove it to train this member afresh")
    assert copied.read_bytes() == before
