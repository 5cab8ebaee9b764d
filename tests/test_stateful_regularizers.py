"""Regularizers that own networks, through the documented interface, as a third party writes one: a plugin
installed in a temporary site implements FactorVAE as the built-in ``factorvae`` does (its own discriminator and
its own Adam), and it passes the kit, trains in ensembles equal to its solo runs, resumes exactly (both
optimisers' states) and publishes the VAE alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from kit import REPO, child_env, cli, install_plugin, write_toml
from test_distributed import free_port

from vaezoo import testing
from vaezoo.cli import main
from vaezoo.entries.catalog import get_card, parse_card
from vaezoo.entries.checkpoints import read_checkpoint
from vaezoo.store.weights import read_safetensors
from vaezoo.training.train import train, train_seeds

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
    kl = "        terms = {\"kl\": batch_mean(posterior.kl())}"
    leaky = leaky.replace("class ThirdFactor", "leak = []\n\nclass ThirdFactor").replace(
        kl, "        leak[:] = [z.sum()]\n" + kl)
    install_plugin(site, "thirdfactor", leaky)
    with pytest.raises(testing.ConformanceError, match="depends on the encoder's parameters"):
        testing.check_regularizer("thirdfactor", train=False, gamma=5.0, hidden=16)


def test_the_kit_refuses_an_update_whose_draws_an_ensemble_would_refuse(site, tmp_path, capsys):
    # Kim & Mnih's own code permutes each dimension with torch.randperm: the kit passed it and 'vaezoo train
    # --seeds' then stopped, after loading the data, with "the model draws random numbers through an operation..."
    permuted = FACTOR.replace("order = torch.rand(batch.second.shape).argsort(0)",
                              "order = torch.stack([torch.randperm(len(batch.second))\n"
                              "                             for _ in range(batch.second.shape[1])], 1)")
    assert permuted != FACTOR
    install_plugin(site, "thirdfactor", permuted)
    with pytest.raises(testing.ConformanceError, match=r"update\(\) at step 1000 draws random numbers through an "
                                                       r"operation an ensemble \('vaezoo train --seeds'\) cannot.*"
                                                       r"nor torch.randperm: argsort torch.rand instead\)$"):
        testing.check_regularizer("thirdfactor", train=False, gamma=5.0, hidden=16)


def test_a_critic_assigned_to_an_attribute_is_refused_by_the_kit_and_by_vaezoo_train(site, tmp_path, capsys):
    """``self.critic = nn.Sequential(...)``, as in a plain nn.Module, passed the kit and trained: its update() never
    ran, the model's optimiser trained the critic to shrink the TC term, and the critic was published with the
    VAE."""
    assigned = FACTOR.replace('self.add_training_part("critic", nn.Sequential(', "self.critic = (nn.Sequential(")
    install_plugin(site, "thirdfactor", assigned)
    problem = ("it defines update() but has no training parts, and holds critic as part of the model (trained by the "
               "model's optimiser on the model's loss, and published with it); register each network it trains in "
               "update() with self.add_training_part(name, module) instead of assigning it")
    with pytest.raises(testing.ConformanceError, match=re.escape(problem)):
        testing.check_regularizer("thirdfactor", train=False, gamma=5.0, hidden=16)
    card = tmp_path / "thirdfactor-synthetic.toml"
    card.write_text(textwrap.dedent(CARD), encoding="utf-8")
    assert main(["train", str(card), "--out", str(tmp_path / "run"), "--max-steps", "1"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(problem)




@pytest.mark.parametrize("seeds", [[], ["--seeds", "0,1"]], ids=["single", "ensemble"])
@pytest.mark.parametrize("returned, said", [
    ("real.mean()", "update() returned a Tensor, not a dict of named scalar losses of its training parts"),
    ("{'critic': 0.5}", "update()'s loss 'critic' is a float, not a scalar tensor of its training parts"),
    ("{'critic': real}", "update()'s loss 'critic' is a tensor of shape (8, 2), not a scalar tensor"),
    ("None", "update() returned a NoneType, not a dict")], ids=["tensor", "float", "per-image", "none"])
def test_an_update_that_returns_no_dict_of_scalars_stops_training_in_one_line_naming_it(site, tmp_path, capsys,
                                                                                       seeds, returned, said):
    # the kit refuses it, but vaezoo train met it in the backward pass: torch's traceback, naming no part
    careless = FACTOR.replace('return {"critic": 0.5 * (F.cross_entropy(real, zeros) + F.cross_entropy(fake, 1 - '
                              'zeros))}', f"return {returned}")
    module = install_plugin(site, "thirdfactor", careless)
    card = write_toml(tmp_path / "thirdfactor-synthetic.toml", tomllib.loads(CARD))
    code, _, err = cli(capsys, "train", str(card), "--out", str(tmp_path / "run"), "--max-steps", "2", *seeds)
    assert code == 1 and "Traceback" not in err
    assert f"error: regularizer ThirdFactor (regularizers.0, {module}): {said}" in err.strip().splitlines()[-1]


def _equal(a, b, atol: float | None = None) -> bool:
    """Whether ``a`` and ``b`` (a checkpoint's nested dicts) are equal: their tensors bit for bit, or within
    ``atol``."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k], atol) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y, atol) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        if atol is None or not a.is_floating_point():
            return torch.equal(a, b)
        return a.dtype == b.dtype and a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=0)
    return a == b


def test_seeds_equal_solo_runs_resume_is_exact_and_the_card_holds_the_vae_alone(third_party, tmp_path, capsys):
    # the ensemble's members against their solo runs, 100 steps each
    assert main(["train", str(third_party), "--seeds", "0,1", "--out", str(tmp_path / "ens"), "--no-eval"]) == 0
    assert capsys.readouterr().err.count("2 runs in one step") == 2  # the stacked step, the critics stacked too
    for seed in (0, 1):
        solo = tmp_path / f"solo-{seed}"
        assert main(["train", str(third_party), "--seed", str(seed), "--out", str(solo), "--no-eval"]) == 0
        member = read_checkpoint(tmp_path / "ens" / f"seed-{seed}" / "checkpoint.pt", fix="")
        alone = read_checkpoint(solo / "checkpoint.pt", fix="")
        assert member.step == alone.step == 100
        for key, value in alone.model.items():
            assert torch.allclose(member.model[key], value, atol=1e-4, rtol=0), key
        assert _equal(member.auxiliary, alone.auxiliary, atol=1e-4)  # the critic and its Adam, as a single run's
        assert _equal(member.optimizer, alone.optimizer, atol=1e-4)
        assert _equal(member.rng, alone.rng)  # the same draws: second batches, their codes, the permutations
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


def _same_run(folder: Path, alone: Path, atol: float = 1e-4) -> None:
    """The checkpoint in ``folder`` is the one in ``alone``: its step, its RNG states, and its model, optimiser,
    training parts and their optimisers within ``atol``."""
    member, solo = read_checkpoint(folder / "checkpoint.pt", fix=""), read_checkpoint(alone / "checkpoint.pt", fix="")
    assert member.step == solo.step and _equal(member.rng, solo.rng)
    for name in ("model", "optimizer", "auxiliary"):
        assert _equal(getattr(member, name), getattr(solo, name), atol), name


@pytest.mark.slow
def test_the_built_in_factorvae_recipe_stacks_its_discriminators_and_members_equal_solo_runs(tmp_path, capsys):
    # factorvae-dsprites' conv nets and both Adams, shrunk to 100 CPU steps: 16x16 images, 32 hidden units, a 2 x 32
    # discriminator
    recipe = tomllib.loads((REPO / "plugins/vaezoo_methods/recipes/factorvae-dsprites.toml").read_text())
    recipe["model"]["regularizers"][0].update(layers=2, hidden=32)
    recipe["model"]["encoder"]["hidden"] = recipe["model"]["decoder"]["hidden"] = 32
    recipe["train"].update(epochs=1, batch_size=8, checkpoint_every=1000,
                           data={"name": "synthetic", "options": {"image_size": 16, "size": 800}})
    del recipe["train"]["budget"]
    card = write_toml(tmp_path / "factorvae-small.toml", recipe)
    assert main(["train", str(card), "--seeds", "0,1", "--out", str(tmp_path / "ens"), "--no-eval"]) == 0
    assert capsys.readouterr().err.count("2 runs in one step") == 2
    for seed in (0, 1):
        train(card, tmp_path / f"solo-{seed}", seed=seed, evaluate=False)
        _same_run(tmp_path / "ens" / f"seed-{seed}", tmp_path / f"solo-{seed}")


@pytest.mark.slow
def test_a_sweep_of_gamma_is_one_stack_each_member_with_its_own_gamma(third_party, tmp_path, capsys):
    assert main(["train", str(third_party), "--sweep", "model.regularizers.0.gamma=1.0,5.0", "--out",
                 str(tmp_path / "sweep"), "--no-eval"]) == 0
    assert capsys.readouterr().err.count("2 runs in one step") == 2
    card = get_card(third_party)
    for gamma in (1.0, 5.0):
        model = {**card.model, "regularizers": [{**card.model["regularizers"][0], "gamma": gamma}]}
        train(card.model_copy(update={"model": model}), tmp_path / f"solo-{gamma}", evaluate=False)
        _same_run(tmp_path / "sweep" / f"model.regularizers.0.gamma={gamma}" / "seed-0", tmp_path / f"solo-{gamma}")


@pytest.mark.slow
def test_an_interrupted_stacked_run_resumes_exactly_and_a_member_resumes_alone(third_party, tmp_path):
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(["train", str(third_party), "--seeds", "0,1", "--out", str(whole), "--no-eval"]) == 0
    assert main(["train", str(third_party), "--seeds", "0,1", "--out", str(cut), "--no-eval", "--max-steps",
                 "40"]) == 0
    member = read_checkpoint(cut / "seed-1" / "checkpoint.pt", fix="")
    assert member.step == 40 and member.auxiliary["optimizers"]["regularizers.0.critic"]["state"]
    (tmp_path / "alone").mkdir()
    shutil.copy(cut / "seed-1" / "checkpoint.pt", tmp_path / "alone" / "checkpoint.pt")
    assert main(["train", str(third_party), "--seeds", "0,1", "--out", str(cut), "--no-eval", "--resume"]) == 0
    for seed in (0, 1):  # bit for bit, both optimisers' states included
        _same_run(cut / f"seed-{seed}", whole / f"seed-{seed}", atol=None)
    # a single run resumes from a member's checkpoint, and ends as the member did
    assert main(["train", str(third_party), "--seed", "1", "--out", str(tmp_path / "alone"), "--no-eval",
                 "--resume"]) == 0
    _same_run(tmp_path / "alone", whole / "seed-1")


def test_a_member_that_diverges_is_dropped_with_its_parts_and_the_other_goes_on(third_party, tmp_path,
                                                                                second_member_diverges):
    card = get_card(third_party)
    alone = {seed: train(card, tmp_path / f"solo-{seed}", seed=seed, checkpoint_every=4, max_steps=steps,
                         evaluate=False) for seed, steps in ((1, 20), (2, 8))}
    good, bad = train_seeds(card, tmp_path / "ens", [1, 2], checkpoint_every=4, max_steps=20, evaluate=False)
    assert good.error is None and good.step == alone[1].step == 20
    assert "seed 2: loss became nan at step 9" in bad.error and bad.step == 8
    _same_run(tmp_path / "ens" / "seed-1", tmp_path / "solo-1")  # restacked without seed 2, its critic and its Adam
    _same_run(tmp_path / "ens" / "seed-2", tmp_path / "solo-2")  # seed 2 keeps its checkpoint of step 8


def _train_as_rank(rank: int, world: int, port: int, card: Path, out: Path, max_steps: int, resume: bool,
                   run: str) -> None:
    """One process of a DDP run of ``card`` (what torchrun sets up) in ``out/RUN`` (``{rank}`` in ``run`` is the
    process's rank); its model and critic written to ``out/rank{rank}.pt``."""
    import os

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    result = train(card, out / run.format(rank=rank), max_steps=max_steps, resume=resume, evaluate=False)
    (critic,) = [part for r in result.model.regularizers for part in r.training_parts().values()]
    torch.save({"model": result.model.state_dict(), "critic": critic.state_dict()}, out / f"rank{rank}.pt")


def _ddp(card: Path, out: Path, max_steps: int, resume: bool = False, run: str = "run") -> None:
    mp.spawn(_train_as_rank, args=(2, free_port(), card, out, max_steps, resume, run), nprocs=2)


@pytest.mark.slow
def test_a_ddp_run_keeps_its_critics_as_one_and_resumes_exactly(third_party, tmp_path):
    """Two processes of one run: each holds its own critic, which DDP does not see; their gradients are averaged
    as the model's are, so the two critics stay equal (each process draws its own second batch), and a run stopped
    and resumed ends as the uninterrupted one, the critic's Adam included."""
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    _ddp(third_party, whole, 30)
    _ddp(third_party, cut, 12)
    _ddp(third_party, cut, 30, resume=True)
    ranks = [torch.load(whole / f"rank{rank}.pt", weights_only=True) for rank in range(2)]
    assert _equal(ranks[0], ranks[1])  # the model and the critic alike, bit for bit
    checkpoint = read_checkpoint(whole / "run" / "checkpoint.pt", fix="")
    adam = checkpoint.auxiliary["optimizers"]["regularizers.0.critic"]["state"]
    assert checkpoint.step == 30 and all(state["exp_avg"].abs().sum() > 0 for state in adam.values())  # it trained
    resumed = read_checkpoint(cut / "run" / "checkpoint.pt", fix="")
    for name in ("model", "optimizer", "auxiliary"):
        assert _equal(getattr(resumed, name), getattr(checkpoint, name)), name
    assert _equal(torch.load(cut / "rank1.pt", weights_only=True), ranks[1])


@pytest.mark.slow
def test_ddp_processes_that_find_different_checkpoints_stop_saying_so_rather_than_wait_forever(third_party,
                                                                                                tmp_path):
    _ddp(third_party, tmp_path, 6, run="out{rank}")  # a folder of each process's own: rank 0 alone writes
    with pytest.raises(mp.ProcessRaisedException, match=r"found different checkpoints in .*out[01] \(rank 0: step 6, "
                                                        r"rank 1: none\); every process must resume from the same"):
        _ddp(third_party, tmp_path, 12, resume=True, run="out{rank}")


RANKED = """
import torch
import torch.distributed as dist
from torch import nn

from vaezoo.hookspecs import hookimpl
from vaezoo.regularizers.base import OptimizerGroup, Regularizer


class Ranked(Regularizer):
    \"\"\"Nets that only some processes' steps use: the model's term goes through net ``a`` on process 0 and net
    ``b`` on the others; the critic has a loss on process 0 alone.\"\"\"

    def __init__(self, code_size: int):
        super().__init__()
        self.a, self.b = nn.Linear(code_size, 1), nn.Linear(code_size, 1)
        self.add_training_part("critic", nn.Linear(code_size, 1))

    def forward(self, posterior, z, step):
        first = not dist.is_initialized() or dist.get_rank() == 0
        return {"ranked": 0.1 * (self.a if first else self.b)(z).square().mean()}

    def optimizers(self):
        return [OptimizerGroup("critic", "Adam", 1e-3, {})]

    def update(self, batch):
        return {"critic": self.critic(batch.z).square().mean()} if dist.get_rank() == 0 else {}


@hookimpl
def vaezoo_register_regularizers(register):
    register("ranked", Ranked)
"""


@pytest.mark.slow
def test_gradients_only_some_processes_have_are_averaged_alike_in_every_process(site, tmp_path):
    """A parameter whose gradient only some processes' step gives (a branch taken on process 0, a critic's loss on
    process 0 alone) is averaged with zeros for the others, as DDP averages an unused parameter's: each process
    reduced the gradients it had, so that net ``a``'s gradient was averaged with ``b``'s (the processes' weights
    parted silently), and the critic's reduction met the model's (gloo aborted a process)."""
    install_plugin(site, "ranked", RANKED)
    card = tmp_path / "ranked-synthetic.toml"
    card.write_text(textwrap.dedent(CARD).replace('name = "thirdfactor-synthetic"', 'name = "ranked-synthetic"')
                    .replace('[{ type = "thirdfactor", gamma = 5.0, hidden = 32 }]',
                             '[{ type = "beta", beta = 1.0 }, { type = "ranked" }]'), encoding="utf-8")
    _ddp(card, tmp_path, 6)
    ranks = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in range(2)]
    assert _equal(ranks[0], ranks[1])  # the model (nets a and b too) and the critic alike, bit for bit


@pytest.mark.slow
def test_torchrun_shares_the_members_out_each_process_stacks_its_share(third_party, site, tmp_path):
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "vaezoo", "train", str(third_party), "--out", str(out), "--seeds", "0-3", "--no-eval",
                          "--max-steps", "50"],
                         env=child_env(tmp_path / "home", site=site), capture_output=True, text=True, check=False,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("2 runs in one step") == 4  # each process: its two members and their critics, stacked
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as torchrun runs each process (OMP_NUM_THREADS=1): the same order of float sums
    try:
        for seed in range(4):
            train(third_party, tmp_path / f"solo-{seed}", seed=seed, max_steps=50, evaluate=False)
    finally:
        torch.set_num_threads(threads)
    for seed in range(4):
        _same_run(out / f"seed-{seed}", tmp_path / f"solo-{seed}")


def test_optimiser_settings_torch_refuses_are_one_line_naming_the_regularizer():
    # a third party's OptimizerGroup with a negative learning rate was a traceback from torch.optim at the first step
    from types import SimpleNamespace

    from vaezoo.errors import PluginError
    from vaezoo.regularizers.base import OptimizerGroup, Regularizer
    from vaezoo.training.auxiliary import TrainingParts

    class Critic(Regularizer):
        def __init__(self):
            super().__init__()
            self.add_training_part("critic", torch.nn.Linear(2, 2))

        def optimizers(self):
            return [OptimizerGroup("critic", "Adam", -1.0, {"betas": (0.5, 0.9)})]

    with pytest.raises(PluginError, match=r"regularizer Critic \(regularizers.0, test_stateful_regularizers\): its "
                                          r"optimiser Adam of part 'critic' "
                                          r"refuses its settings \(lr -1.0, .*Invalid learning rate"):
        TrainingParts(SimpleNamespace(regularizers=[Critic()]))


def test_a_loop_of_your_own_trains_factorvaes_discriminator_through_training_parts(tmp_path):
    # the loop docs/plugins.md gives: the model's step, then the parts' step with a second batch of images
    from vaezoo import load
    from vaezoo.training.auxiliary import TrainingParts

    recipe = tomllib.loads((REPO / "plugins/vaezoo_methods/recipes/factorvae-dsprites.toml").read_text())
    recipe["model"]["regularizers"][0].update(layers=2, hidden=16)
    recipe["model"]["encoder"]["hidden"] = recipe["model"]["decoder"]["hidden"] = 16
    recipe["train"]["data"] = {"name": "synthetic", "options": {"image_size": 16, "size": 64}}
    del recipe["train"]["budget"]
    torch.manual_seed(0)
    model = load(write_toml(tmp_path / "factorvae-small.toml", recipe), pretrained=False)
    critic = model.regularizers[0].discriminator
    before = [p.detach().clone() for p in critic.parameters()]
    parts = TrainingParts(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    images = torch.rand(32, 1, 16, 16)
    assert parts.second_batch
    out = model(images[:8], step=0)
    with pytest.raises(ValueError, match=r"FactorVAE asks for a second batch of images each step: give step\(\.\.\., "
                                         r"second=IMAGES\)"):
        parts.step(model, out, 0)
    for step in range(3):
        out = model(images[8 * step:8 * step + 8], step=step)
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses = parts.step(model, out, step, second=images[torch.randint(32, (8,))])
        assert losses and all(torch.isfinite(v) for v in losses.values())
    assert all(not torch.equal(a, b) for a, b in zip(before, critic.parameters()))
