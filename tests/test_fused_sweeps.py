"""A sweep of float settings is one stack and one step: each swept member equals its solo run at its value."""

from __future__ import annotations

import math

import pytest
import torch
from test_ensemble import ARCHITECTURES, TOY_JOINT, relative_difference, small

from vaezoo.training import ensemble
from vaezoo.training.settings import differing, float_settings, swapped
from vaezoo.training.sweeps import Sweep
from vaezoo.training.train import train, train_seeds


def stacks_made(monkeypatch) -> list:
    """The stacks :func:`fit_ensemble` makes, as it makes them."""
    made, init = [], ensemble.Stack.__init__

    def noted(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(ensemble.Stack, "__init__", noted)
    return made


def steps_taken(monkeypatch) -> list:
    taken, take = [], ensemble.Stack.take_step

    def noted(self, *args, **kwargs):
        taken.append(self)
        return take(self, *args, **kwargs)

    monkeypatch.setattr(ensemble.Stack, "take_step", noted)
    return taken


JOINT_SWEEPS = [Sweep("model.temperature", (0.5, 1.0)), Sweep("model.capacity.continuous", ([0.0, 5.0, 20, 30.0],
                                                                                              [1.0, 3.0, 20, 10.0]))]
CASES = {
    "betatcvae beta": ("betatcvae", [Sweep("model.beta", (1.0, 6.0))]),
    "betavae lr": ("betavae", [Sweep("train.optimizer.lr", (1e-3, 3e-4))]),
    "jointvae temperature and capacity": ("jointvae", JOINT_SWEEPS),
}
MODELS = {**{name: model for name, model in ARCHITECTURES.values()}, "jointvae": {**TOY_JOINT, "temperature": 0.67}}


@pytest.mark.slow
@pytest.mark.parametrize("formulation", ["loop", "vmap"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_swept_member_equals_its_solo_run_and_the_sweep_is_one_stack(data_plugin, tmp_path, monkeypatch, case,
                                                                       formulation):
    architecture, sweeps = CASES[case]
    card = small(architecture, MODELS[architecture])
    made, taken = stacks_made(monkeypatch), steps_taken(monkeypatch)
    results = train_seeds(card, tmp_path / "sweep", [0, 1], sweeps, formulation=formulation)
    members = 2 * math.prod(len(s.values) for s in sweeps)
    assert len(results) == members and len(made) == 1 and len(made[0].members) == members
    assert len(taken) == 100  # one step for all the members, 100 times
    last = results[-1]  # the last value of every sweep, seed 1
    monkeypatch.undo()
    alone = train(_solo_card(card, sweeps), tmp_path / "alone", seed=1)
    assert last.step == alone.step == 100
    assert relative_difference(last.model.state_dict(), alone.model.state_dict()) < 1e-4


def _solo_card(card, sweeps):
    """``card`` with each sweep's last value."""
    from vaezoo.training.sweeps import members

    [spec] = members(card, [0], [Sweep(s.key, s.values[-1:]) for s in sweeps])
    return spec.card


def test_float_settings_are_found_and_swapped_back(data_plugin):
    from vaezoo.assemble import build_model

    models = [build_model(_solo_card(small("jointvae", MODELS["jointvae"]), [s])) for s in
              (Sweep("model.temperature", (0.5,)), Sweep("model.temperature", (1.0,)))]
    varied = differing(models)
    assert list(varied) == ["latent.families.discrete0.temperature"] and varied[next(iter(varied))] == [0.5, 1.0]
    before = float_settings(models[0])
    group = "regularizers.0.groups.0.gamma"
    assert group in before
    with swapped(models[0], {group: torch.tensor(2.0)}) as model:
        assert float(model.regularizers[0].groups[0].gamma) == 2.0
    assert float_settings(models[0]) == before


@pytest.mark.parametrize(("preset", "formulation"), [("tiny", "vmap"), ("toy", "loop")])
def test_the_cpu_default_formulation_is_vmap_unless_the_model_convolves(data_plugin, tmp_path, monkeypatch, preset,
                                                                        formulation):
    from kit import make_card

    from vaezoo.entries.schema import Card

    made = stacks_made(monkeypatch)
    train_seeds(Card.model_validate(make_card(preset)), tmp_path, [0, 1], max_steps=1)
    assert [s.formulation for s in made] == [formulation]
