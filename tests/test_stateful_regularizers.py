"""Regularizers that own networks, through the documented interface, as a third party writes one: a plugin
installed in a temporary site implements FactorVAE as the built-in ``factorvae`` does (its own discriminator and
its own Adam), and it passes the kit, trains in ensembles equal to its solo runs, resumes exactly (both
optimisers' states) and publishes the VAE alone."""

from __future__ import annotations

import textwrap

import pytest
import torch
from kit import install_plugin

from vaezoo import testing
from vaezoo.cli import main
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.checkpoints import read_checkpoint
from vaezoo.store.weights import read_safetensors

FACTOR = """
import torch
import torch.nn.functional as F
from torch import nn

from vaezoo.context import batch_mean
from vaezoo.hookspecs import hookimpl
from vaezoo.regularizers.base import OptimizerGroup, Regularizer


class ThirdFactor(Regularizer):
    \"\"\"KL + gamma * TC, the TC from a discriminator with its own Adam (Kim & Mnih, 2018).\"\"\"

    example = {"gamma": 5.0, "hidden": 16}
    second_batch = True

    def __init__(self, code_size: int, gamma: float = 5.0, hidden: int = 32):
        super().__init__()
        self.gamma = gamma
        self.add_training_part("critic", nn.Sequential(nn.Linear(code_size, hidden), nn.LeakyReLU(0.2),
                                                       nn.Linear(hidden, hidden), nn.LeakyReLU(0.2),
                                                       nn.Linear(hidden, 2)))

    def forward(self, posterior, z, step):
        terms = {"kl": batch_mean(posterior.kl())}
        if self.training:
            logits = self.critic(z)
            terms["tc"] = self.gamma * (logits[:, 0] - logits[:, 1]).mean()
        return terms

    def optimizers(self):
        return [OptimizerGroup("critic", "Adam", 1e-4, {"betas": (0.5, 0.9)})]

    def update(self, batch):
        real = self.critic(batch.z)
        order = torch.rand(batch.second.shape).argsort(0)
        fake = self.critic(batch.second.gather(0, order))
        zeros = torch.zeros(len(real), dtype=torch.long)
        return {"critic": 0.5 * (F.cross_entropy(real, zeros) + F.cross_entropy(fake, 1 - zeros))}


@hookimpl
def vaezoo_register_regularizers(register):
    register("thirdfactor", ThirdFactor)
"""

CARD = """
name = "thirdfactor-synthetic"
architecture = "vae"
summary = "A third party's FactorVAE on the synthetic dataset."
dataset = "synthetic"
paper = "Kim & Mnih (2018), Disentangling by Factorising"
license = "MIT"
vaezoo_version = "0.1.0"

[model]
latent = { type = "gaussian", dim = 3 }
regularizers = [{ type = "thirdfactor", gamma = 5.0, hidden = 32 }]
encoder = { type = "mlp_encoder", hidden = [32] }
decoder = { type = "mlp_decoder", hidden = [32] }
likelihood = "bernoulli"

[train]
epochs = 1
batch_size = 8
seed = 0
checkpoint_every = 1000

[train.data]
name = "synthetic"
options = { image_size = 8, size = 800 }

[train.optimizer]
name = "Adam"
lr = 1e-3
"""


@pytest.fixture
def third_party(site, tmp_path):
    install_plugin(site, "thirdfactor", FACTOR)
    card = tmp_path / "thirdfactor-synthetic.toml"
    card.write_text(textwrap.dedent(CARD), encoding="utf-8")
    return card


def test_a_third_partys_factorvae_passes_the_kit(third_party):
    regularizer = testing.check_regularizer("thirdfactor", train=False, gamma=5.0, hidden=16)
    assert set(regularizer.training_parts()) == {"critic"} and not list(regularizer.parameters())


def test_the_kit_refuses_an_update_that_trains_the_encoder(site):
    leaky = FACTOR.replace("real = self.critic(batch.z)", "real = self.critic(batch.z) + batch.z.sum() * 0 + leak[0]")
    leaky = leaky.replace("class ThirdFactor", "leak = []\n\nclass ThirdFactor").replace(
        "        terms = {\"kl\": batch_mean(posterior.kl())}", "        leak[:] = [z.sum()]\n        terms = {\"kl\": batch_mean(posterior.kl())}")
    install_plugin(site, "thirdfactor", leaky)
    with pytest.raises(testing.ConformanceError, match="depends on the encoder's parameters"):
        testing.check_regularizer("thirdfactor", train=False, gamma=5.0, hidden=16)



def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return a == b


def test_seeds_equal_solo_runs_resume_is_exact_and_the_card_holds_the_vae_alone(third_party, tmp_path, capsys):
    # the ensemble's members against their solo runs, 100 steps each
    assert main(["train", str(third_party), "--seeds", "0,1", "--out", str(tmp_path / "ens"), "--no-eval"]) == 0
    assert "one after the other" in capsys.readouterr().err
    for seed in (0, 1):
        solo = tmp_path / f"solo-{seed}"
        assert main(["train", str(third_party), "--seed", str(seed), "--out", str(solo), "--no-eval"]) == 0
        member = read_checkpoint(tmp_path / "ens" / f"seed-{seed}" / "checkpoint.pt", fix="")
        alone = read_checkpoint(solo / "checkpoint.pt", fix="")
        assert member.step == alone.step == 100
        for key, value in alone.model.items():
            assert torch.allclose(member.model[key], value, atol=1e-4, rtol=0), key
        assert _equal(member.auxiliary, alone.auxiliary)
    # an interrupted run (40 steps, then resumed) ends as the uninterrupted one, both optimisers included
    cut = tmp_path / "cut"
    assert main(["train", str(third_party), "--out", str(cut), "--no-eval", "--max-steps", "40"]) == 0
    assert read_checkpoint(cut / "checkpoint.pt", fix="").step == 40
    assert main(["train", str(third_party), "--out", str(cut), "--no-eval", "--resume"]) == 0
    whole, resumed = read_checkpoint(tmp_path / "solo-0" / "checkpoint.pt", fix=""), read_checkpoint(
        cut / "checkpoint.pt", fix="")
    assert _equal(whole.model, resumed.model) and _equal(whole.optimizer, resumed.optimizer)
    assert set(whole.auxiliary["optimizers"]) == {"regularizers.0.critic"} and whole.auxiliary["optimizers"][
        "regularizers.0.critic"]["state"]
    assert _equal(whole.auxiliary, resumed.auxiliary)
    # the published card and weights: the VAE alone; the critic is named as a training-only part
    out = tmp_path / "published"
    assert main(["train", str(third_party), "--out", str(out)]) == 0
    card = parse_card(out / "thirdfactor-synthetic-run.toml")
    weights = read_safetensors(out / card.weights.file)
    assert not any("critic" in key for key in weights)
    assert card.parameters == sum(v.numel() for v in weights.values())
    assert card.training_parameters == {"regularizers.0.critic": 3 * 32 + 32 + 32 * 32 + 32 + 32 * 2 + 2}
    measured = {name: m.value for name, m in card.metrics.items()}
    assert measured["objective"] == pytest.approx(measured["reconstruction"] + measured["kl_z"], rel=1e-5)
