"""An ensemble trained with the recipe's ``compile = true``: its stacked step goes through torch.compile, and each
member ends as the same ensemble trained eagerly, and as its own compiled solo run, up to float rounding; a stack
with training parts (FactorVAE's critics) compiles its model's step and updates its parts eagerly."""

from __future__ import annotations

import textwrap

import pytest
import torch
from kit import install_plugin, make_card
from test_ensemble import relative_difference
from test_stateful_regularizers import CARD, FACTOR, _equal
from test_train_hardware import train_refusing_compile

from vaezoo.cli import main
from vaezoo.entries.checkpoints import read_checkpoint
from vaezoo.entries.schema import Card
from vaezoo.training.train import train, train_seeds

STEPS = 10
ROUNDING = 1e-5
"""How far (largest relative difference of a tensor, by norm) float rounding alone may move a compiled member from
its eager twin and from its compiled solo run after :data:`STEPS` steps of SGD. Inductor fuses and reorders the
float32 sums of the forward and backward passes (each sum's rounding is of the order of float32's epsilon, 1.2e-7),
and each step carries the differences into the next: on the 2-core AVX2 build machine they were 3e-8 to 6e-8 (the
loop formulation's members equal their compiled solo runs bit for bit). 1e-5 leaves room for another CPU's vector
width and another torch, while the other seed's member is 2 and more away."""
CAPACITY = {"type": "capacity",
            "groups": [{"name": "z", "parts": ["z"], "max": 5.0, "iterations": STEPS, "gamma": 5.0}]}


def tiny(**train) -> Card:
    """The tiny card's model with a capacity that rises with the step (so a member given another step differs)."""
    model = {**make_card("tiny")["model"], "regularizers": [CAPACITY]}  # a one-part latent's part is "z"
    return Card.model_validate(make_card("tiny", model=model,
                                         train={"optimizer": {"name": "SGD", "lr": 0.01}, **train}))


def compiled_frames() -> int:
    return torch._dynamo.utils.counters["frames"]["ok"]


@pytest.fixture
def dynamo():
    import torch._dynamo

    if not torch._dynamo.is_dynamo_supported():
        pytest.skip("torch.compile is not available with this Python and torch")
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


@pytest.mark.slow
def test_a_compiled_ensemble_equals_the_eager_one_and_each_members_compiled_solo_run(data_plugin, tmp_path, dynamo):
    solo = [train(tiny(), tmp_path / f"solo-{seed}", seed=seed, max_steps=STEPS, compile=True, evaluate=False)
            for seed in (0, 1)]
    assert compiled_frames() == 1  # one compiled function for every step (the step goes in as a tensor) and seed
    for n, formulation in enumerate(("vmap", "loop"), start=2):
        eager = train_seeds(tiny(), tmp_path / f"eager-{formulation}", [0, 1], max_steps=STEPS,
                            formulation=formulation, evaluate=False)
        assert compiled_frames() == n - 1
        compiled = train_seeds(tiny(), tmp_path / f"compiled-{formulation}", [0, 1], max_steps=STEPS, compile=True,
                               formulation=formulation, evaluate=False)
        assert compiled_frames() == n  # the stacked step, compiled once for its 10 steps
        for e, c, s in zip(eager, compiled, solo):
            assert c.step == e.step == s.step == STEPS
            weights = c.model.state_dict()
            assert relative_difference(weights, e.model.state_dict()) < ROUNDING, formulation
            assert relative_difference(weights, s.model.state_dict()) < ROUNDING, formulation
        assert relative_difference(compiled[0].model.state_dict(), solo[1].model.state_dict()) > 1e-2


@pytest.mark.slow
def test_a_stack_with_training_parts_compiles_its_models_step_and_equals_the_eager_one(site, tmp_path, capsys,
                                                                                       dynamo):
    install_plugin(site, "thirdfactor", FACTOR)  # FactorVAE as a plugin: its critic trained beside the model
    card = tmp_path / "thirdfactor-synthetic.toml"
    card.write_text(textwrap.dedent(CARD), encoding="utf-8")
    for out, options in (("eager", []), ("compiled", ["--compile"])):
        assert main(["train", str(card), "--seeds", "0,1", "--out", str(tmp_path / out), "--no-eval", "--max-steps",
                     str(STEPS), *options]) == 0
    assert compiled_frames() == 1
    for seed in (0, 1):
        eager, compiled = (read_checkpoint(tmp_path / out / f"seed-{seed}" / "checkpoint.pt", fix="")
                           for out in ("eager", "compiled"))
        assert eager.step == compiled.step == STEPS
        assert relative_difference(compiled.model, eager.model) < ROUNDING
        assert _equal(compiled.auxiliary, eager.auxiliary, atol=ROUNDING)  # the critic and its Adam


def test_an_ensemble_torch_compile_cannot_compile_is_a_one_line_error(data_plugin, tmp_path, monkeypatch, capsys):
    path = train_refusing_compile("tiny", tmp_path, monkeypatch, capsys, "--seeds", "0,1")
    assert main(["train", str(path), "--out", str(tmp_path / "out"), "--seeds", "0,1", "--no-compile",
                 "--max-steps", "2"]) == 0
