"""FactorVAE, DIP-VAE-I/II and AnnealedVAE (plugins/vaezoo_methods and the core's capacity) term by term against
an outside implementation on the same batch.

The references are disentanglement_lib's formulas (google-research/disentanglement_lib at 86a644d,
``disentanglement_lib/methods/unsupervised/vae.py``: ``compute_covariance_z_mean``, ``regularize_diag_off_diag_dip``,
``DIPVAE.regularizer``, ``FactorVAE.model_fn``, ``AnnealedVAE.regularizer`` and ``anneal``;
``disentanglement_lib/methods/shared/architectures.py``: ``make_discriminator``, ``fc_discriminator``), written
here in numpy from their TensorFlow. disent 0.9.3 is not on this machine's package index (0.8.0 is its newest
there, without FactorVAE); its ``torch_cov_matrix`` (``disent/nn/functional/_correlation.py``) is the covariance
below too. disent 0.8.0's DIP-VAE-II takes ``torch.mean(torch.diag(z_var), dim=0)``, the mean of the diagonal of
the (batch, latent) variance matrix, a scalar added to every entry: not the paper's E[Cov]; disentanglement_lib's
``reduce_mean(matrix_diag(exp(z_logvar)), axis=0)`` is, and is the reference here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from kit import cli, make_card, write_toml

from vaezoo import testing
from vaezoo.assemble import build_part
from vaezoo.context import BuildContext
from vaezoo.entries.catalog import get_card
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, LatentError, TrainingError, VaezooError
from vaezoo.latents import Gaussian, LocationScale
from vaezoo.plugins import registry
from vaezoo.training.train import CHECKPOINT, train
from vaezoo_methods.regularizers import Discriminator, permute_dims

RECIPES = "plugins/vaezoo_methods/recipes"


@pytest.fixture
def batch(float64_seeded):
    family = Gaussian(10)
    params = torch.randn(64, 20) * torch.tensor([1.5] * 10 + [0.7] * 10)
    posterior = family.posterior(params)
    return posterior, posterior.rsample(), params[:, :10].numpy(), params[:, 10:].numpy()


def dlib_kl(mean, logvar):
    return np.mean(0.5 * np.sum(mean ** 2 + np.exp(logvar) - logvar - 1, axis=1))


def dlib_covariance_z_mean(z_mean):
    expectation_z_mean_z_mean_t = np.mean(z_mean[:, :, None] * z_mean[:, None, :], axis=0)
    expectation_z_mean = np.mean(z_mean, axis=0)
    return expectation_z_mean_z_mean_t - expectation_z_mean[:, None] * expectation_z_mean[None, :]


def dlib_dip(covariance, lambda_od, lambda_d):
    diagonal = np.diag(covariance)
    off_diagonal = covariance - np.diag(diagonal)
    return lambda_od * np.sum(off_diagonal ** 2) + lambda_d * np.sum((diagonal - 1) ** 2)


@pytest.mark.parametrize("lambda_od", [1.0, 5.0, 50.0])
def test_dip_vae_i_is_disentanglement_libs(batch, lambda_od):
    posterior, z, mean, logvar = batch
    terms = build_part("regularizer", {"type": "dipvae", "lambda_od": lambda_od, "lambda_d_factor": 10.0,
                                       "dip_type": "i"})(posterior, z, 0)
    assert terms["kl"].item() == pytest.approx(dlib_kl(mean, logvar), rel=1e-12)
    expected = dlib_dip(dlib_covariance_z_mean(mean), lambda_od, 10 * lambda_od)
    assert terms["dip_i"].item() == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("lambda_od", [1.0, 20.0])
def test_dip_vae_ii_is_disentanglement_libs(batch, lambda_od):
    posterior, z, mean, logvar = batch
    terms = build_part("regularizer", {"type": "dipvae", "lambda_od": lambda_od, "lambda_d_factor": 1.0,
                                       "dip_type": "ii"})(posterior, z, 0)
    cov_enc = np.stack([np.diag(np.exp(row)) for row in logvar])  # tf.matrix_diag(tf.exp(z_logvar))
    cov_z = np.mean(cov_enc, axis=0) + dlib_covariance_z_mean(mean)
    assert terms["dip_ii"].item() == pytest.approx(dlib_dip(cov_z, lambda_od, lambda_od), rel=1e-10)


def joint_batch():
    """A joint latent's posterior: the Gaussian part ``continuous`` of ``batch``'s shape beside a categorical
    ``discrete``; and the Gaussian's means and log-variances."""
    joint = build_part("latent family", {"type": "joint", "parts": [
        {"type": "gaussian", "name": "continuous", "dim": 10},
        {"type": "gumbel_categorical", "name": "discrete", "categories": 3}]})
    gaussian = torch.randn(64, 20) * torch.tensor([1.5] * 10 + [0.7] * 10)
    posterior = joint.posterior(torch.cat([gaussian, torch.randn(64, 3)], 1))
    return posterior, posterior.rsample(), gaussian[:, :10].numpy(), gaussian[:, 10:].numpy()


@pytest.mark.parametrize("dip_type, factor", [("i", 10.0), ("ii", 1.0)])
def test_dip_vae_on_the_gaussian_part_of_a_joint_latent_is_disentanglement_libs_on_that_part(float64_seeded,
                                                                                            dip_type, factor):
    posterior, z, mean, logvar = joint_batch()
    terms = build_part("regularizer", {"type": "dipvae", "lambda_od": 5.0, "lambda_d_factor": factor,
                                       "dip_type": dip_type, "part": "continuous"})(posterior, z, 0)
    assert terms.keys() == {"kl_continuous", f"dip_{dip_type}_continuous"}  # as beta's kl_PART, beside a capacity
    assert terms["kl_continuous"].item() == pytest.approx(dlib_kl(mean, logvar), rel=1e-12)
    cov = dlib_covariance_z_mean(mean)
    if dip_type == "ii":
        cov = cov + np.mean(np.stack([np.diag(np.exp(row)) for row in logvar]), axis=0)
    assert terms[f"dip_{dip_type}_continuous"].item() == pytest.approx(dlib_dip(cov, 5.0, 5.0 * factor), rel=1e-10)


@pytest.mark.parametrize("part, message", [
    ("discrete", "; the latent's part 'discrete' has none: give 'part' a Gaussian part (continuous)"),
    (None, "; the latent is joint (continuous, discrete): give 'part' its Gaussian part (continuous)")],
                         ids=["categorical-part", "whole-joint-latent"])
def test_dip_vae_refuses_a_categorical_part_and_a_whole_joint_latent_naming_the_gaussian_part(float64_seeded, part,
                                                                                             message):
    posterior, z, _, _ = joint_batch()
    dip = build_part("regularizer", {"type": "dipvae", "part": part} if part else {"type": "dipvae"})
    with pytest.raises(LatentError) as caught:
        dip(posterior, z, 0)
    assert str(caught.value) == ("regularizer 'dipvae' needs a posterior with a location and a scale per dimension "
                                 "(a Gaussian latent)" + message)


def test_a_dip_vae_card_on_a_joint_latents_gaussian_part_trains_resumes_sweeps_and_evaluates(data_plugin, tmp_path,
                                                                                              capsys):
    data = make_card("tiny")
    data["model"]["latent"] = {"type": "joint", "parts": [
        {"type": "gaussian", "name": "continuous", "dim": 2},
        {"type": "gumbel_categorical", "name": "discrete", "categories": 3}]}
    data["model"]["regularizers"] = [{"type": "dipvae", "lambda_od": 2.0, "dip_type": "ii", "part": "continuous"},
                                     {"type": "capacity", "groups": [{"name": "discrete", "parts": ["discrete"],
                                                                      "max": 1.0, "iterations": 10, "gamma": 5.0}]}]
    write_toml(tmp_path / "card.toml", data)
    run = tmp_path / "run"
    common = [str(tmp_path / "card.toml"), "--out", str(run), "--seeds", "0,1", "--sweep",
              "model.regularizers.0.lambda_od=1,5", "--no-eval"]
    assert cli(capsys, "train", *common, "--max-steps", "1")[0] == 0
    code, out, err = cli(capsys, "train", *common, "--resume")
    assert code == 0, err
    for value in (1.0, 5.0):
        folder = run / f"model.regularizers.0.lambda_od={value:g}" / "seed-1"
        card = get_card(folder)
        assert card.model["regularizers"][0] == {"type": "dipvae", "lambda_od": value, "dip_type": "ii",
                                                 "part": "continuous"}
    code, out, err = cli(capsys, "eval", str(folder))
    assert code == 0, err
    assert "kl_continuous" in out


def dlib_fc_discriminator(z, linears, slope=0.2):
    """``fc_discriminator``: six dense layers of tf.nn.leaky_relu (alpha 0.2), then 2 logits and their softmax,
    clipped to [1e-6, 1 - 1e-6] by ``make_discriminator``."""
    h = z
    for weight, bias in linears[:-1]:
        h = h @ weight.T + bias
        h = np.where(h > 0, h, slope * h)
    weight, bias = linears[-1]
    logits = h @ weight.T + bias
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    return logits, np.clip(probs, 1e-6, 1 - 1e-6)


def test_factorvae_tc_and_discriminator_loss_are_disentanglement_libs(batch):
    posterior, z, mean, logvar = batch
    regularizer = build_part("regularizer", {"type": "factorvae", "gamma": 30.0, "hidden": 64},
                             BuildContext(builder=build_part, code_size=10))
    linears = [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in regularizer.discriminator
               if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 7  # six hidden layers and the logits
    terms = regularizer(posterior, z, 0)
    logits_z, probs_z = dlib_fc_discriminator(z.detach().numpy(), linears)
    assert terms["kl"].item() == pytest.approx(dlib_kl(mean, logvar), rel=1e-12)
    assert terms["tc"].item() == pytest.approx(30.0 * np.mean(logits_z[:, 0] - logits_z[:, 1]), rel=1e-10)

    second = posterior.rsample().detach()
    from vaezoo.regularizers.base import UpdateBatch

    torch.manual_seed(7)
    loss = regularizer.update(UpdateBatch(z.detach(), second, 0))["discriminator"]
    torch.manual_seed(7)
    shuffled = permute_dims(second).numpy()
    for j in range(10):  # each dimension a permutation of the batch's values, as tf.random_shuffle gives
        assert sorted(shuffled[:, j]) == sorted(second[:, j].numpy())
    _, probs_shuffle = dlib_fc_discriminator(shuffled, linears)
    discr_loss = 0.5 * np.mean(np.log(probs_z[:, 0])) + 0.5 * np.mean(np.log(probs_shuffle[:, 1]))
    assert loss.item() == pytest.approx(-discr_loss, rel=1e-9)  # disentanglement_lib minimises -discr_loss


def test_factorvae_discriminator_is_kim_and_mnihs():
    discriminator = Discriminator(10)
    linears = [m for m in discriminator if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(10, 1000)] + [(1000, 1000)] * 5 + [(1000, 2)]
    assert all(m.negative_slope == 0.2 for m in discriminator if isinstance(m, torch.nn.LeakyReLU))
    regularizer = build_part("regularizer", {"type": "factorvae"}, BuildContext(builder=build_part, code_size=10))
    [group] = regularizer.optimizers()
    assert (group.part, group.name, group.lr, tuple(group.options["betas"])) == ("discriminator", "Adam", 1e-4,
                                                                                 (0.5, 0.9))


@pytest.mark.parametrize("step", [0, 1, 25_000, 99_999, 100_000, 250_000])
def test_annealedvae_is_disentanglement_libs(batch, step):
    posterior, z, mean, logvar = batch
    card = get_card(f"{RECIPES}/annealedvae-dsprites.toml")
    [spec] = card.model["regularizers"]
    terms = build_part("regularizer", spec)(posterior, z, step)
    c_max, threshold, gamma = 25.0, 100_000, 1000.0  # the recipe's
    c = min(c_max * 1.0, c_max * 1.0 * step / threshold)  # anneal()
    assert terms["capacity_z"].item() == pytest.approx(gamma * abs(dlib_kl(mean, logvar) - c), rel=1e-10)


@pytest.mark.parametrize("name, arguments", [("factorvae", None), ("dipvae", None),
                                             ("dipvae", {"lambda_od": 2.0, "dip_type": "i"})])
def test_the_methods_pass_the_kit(name, arguments):
    testing.check_regularizer(name, train=False, **(arguments or registry("regularizer")[name].example))


def test_each_recipe_is_locatello_et_al_with_its_grid():
    grids = {"factorvae-dsprites": "model.regularizers.0.gamma=10,20,30,40,50,100",
             "dipvae1-dsprites": "model.regularizers.0.lambda_od=1,2,5,10,20,50",
             "dipvae2-dsprites": "model.regularizers.0.lambda_od=1,2,5,10,20,50",
             "annealedvae-dsprites": "model.regularizers.0.groups.0.max=5,10,25,50,75,100"}
    for name, grid in grids.items():
        path = f"{RECIPES}/{name}.toml"
        card = get_card(path)
        assert (card.train.batch_size, card.train.optimizer.name, card.train.optimizer.lr) == (64, "Adam", 1e-4)
        assert card.train.data.name == "dsprites" and card.model["latent"] == {"type": "gaussian", "dim": 10}
        assert card.model["likelihood"] == "bernoulli" and card.train.epochs == 26  # 299,520 steps of 64
        text = open(path, encoding="utf-8").read()
        named = f"methods:recipes/{name}.toml"  # as an installed vaezoo names it, from any folder
        assert get_card(named).path.samefile(path)
        assert f"vaezoo train {named} --seeds 0,1,2,3,4 --sweep {grid}" in text


def test_a_card_never_states_the_latent_size():
    spec = {"type": "factorvae", "code_size": 4}
    with pytest.raises(CardError, match="remove code_size from the card .vaezoo takes it from the latent"):
        build_part("regularizer", spec, BuildContext(builder=build_part, code_size=10))


@pytest.mark.parametrize("setting, problem", [
    ({"layers": -1}, "layers must be at least 0, got -1"), ({"hidden": 0}, "hidden must be at least 1, got 0"),
    ({"lr": 0.0}, "lr must be a finite number above 0, got 0.0"), ({"lr": -1.0}, "lr must be a finite number"),
    ({"lr": float("nan")}, "lr must be a finite number"), ({"lr": float("inf")}, "lr must be a finite number"),
    ({"betas": [2.0, 0.9]}, "betas must each be from 0 to below 1"),
    ({"betas": [float("nan"), 0.9]}, "betas must each be from 0 to below 1"),
    ({"betas": [0.5, -0.1]}, "betas must each be from 0 to below 1"),
    ({"layers": 100_000}, "layers must be at most 100, got 100,000"),
    ({"layers": 6, "hidden": 10_000_000}, "layers = 6 of hidden = 10,000,000 units make 500,000,110,000,002 "
                                         "parameters, more than the 1,073,741,824 it may hold"),
    ({"layers": 100, "hidden": 4_000}, "layers = 100 of hidden = 4,000 units make 1,5")])
def test_factorvae_refuses_a_discriminator_that_cannot_train_naming_the_setting(setting, problem):
    # layers -1 built the discriminator of layers 0 and hidden 0 one that reads nothing, silently; lr 0 never
    # trained it; a negative or NaN lr and betas outside [0, 1) were a traceback from torch.optim.Adam at the
    # first step; a typo's width or depth (hidden 10,000,000, layers 100,000) was refused, or not, only when
    # memory ran out
    with pytest.raises(ValueError, match=f"regularizer 'factorvae': {problem}"):
        build_part("regularizer", {"type": "factorvae", "hidden": 8, **setting},
                   BuildContext(builder=build_part, code_size=3))


def test_factorvae_builds_the_published_discriminator_and_the_deepest_it_takes():
    built = [build_part("regularizer", {"type": "factorvae", **setting}, BuildContext(builder=build_part, code_size=10))
             for setting in ({"layers": 6, "hidden": 1000}, {"layers": 100, "hidden": 8})]
    assert [sum(p.numel() for p in r.discriminator.parameters()) for r in built] == [5_018_002, 7_234]


def test_dipvae_refuses_a_lambda_d_that_overflows():
    # lambda_od 1e308 and lambda_d_factor 10 passed each check; their product, inf, made the loss inf at step 0,
    # and the run told the user to lower the learning rate
    with pytest.raises(ValueError, match=r"lambda_d = lambda_od \* lambda_d_factor must be a finite number"):
        build_part("regularizer", {"type": "dipvae", "lambda_od": 1e308, "lambda_d_factor": 10.0})


@pytest.mark.parametrize("regularizer", [{"type": "factorvae", "gamma": 10.0, "layers": 1, "hidden": 8},
                                         {"type": "dipvae", "lambda_od": 2.0, "dip_type": "i"},
                                         {"type": "dipvae", "lambda_od": 2.0, "dip_type": "ii"}],
                         ids=["factorvae", "dipvae-i", "dipvae-ii"])
@pytest.mark.parametrize("batch_size, refused", [
    (1, r"card 'tiny-blobs': the model refuses a batch of 1 image\(s\), the recipe's batch_size"),
    (7, r"card 'tiny-blobs': each epoch ends in a batch of 1 image\(s\) where the others hold 7")],
                         ids=["batch-1", "last-batch-1"])
def test_a_batch_of_one_image_that_the_batch_s_methods_cannot_use_is_refused_before_the_first_step(
        data_plugin, tmp_path, regularizer, batch_size, refused):
    # over one image DIP-VAE's covariance is 0 (I: the term a constant) and FactorVAE's permutation gives the code
    # back (its discriminator cannot tell the two): the run trained a plain VAE without a word
    data = make_card("tiny", train={"batch_size": batch_size})  # 64 images: in batches of 7, a last batch of 1
    data["model"]["regularizers"] = [regularizer]
    with pytest.raises(TrainingError, match=f"{refused}.*regularizer '{regularizer['type']}' .*needs batches of at "
                                            f"least 2 images, got 1"):
        train(Card.model_validate(data), tmp_path / "run")
    assert not (tmp_path / "run" / CHECKPOINT).exists()


class LaplacePosterior:
    """A Laplace(loc, scale) posterior per dimension, as a third-party latent family gives it (the example plugin
    vaezoo-laplace's): only what DIP-VAE reads."""

    def __init__(self, loc, scale):
        self.loc, self.scale = loc, scale

    def location_scale(self):
        return LocationScale(self.loc, self.scale, torch.distributions.Laplace)

    def kl(self):
        return torch.zeros_like(self.loc)


def test_dip_vae_ii_takes_the_variance_of_a_laplace_posterior(float64_seeded):
    # its variance is 2 * scale^2; scale^2, a Normal's, was taken: DIP-VAE-II pulled another covariance towards 1
    loc, scale = torch.randn(64, 4), torch.rand(64, 4) + 0.5
    terms = build_part("regularizer", {"type": "dipvae", "lambda_od": 2.0, "lambda_d_factor": 1.0,
                                       "dip_type": "ii"})(LaplacePosterior(loc, scale), loc, 0)
    cov_z = np.mean([np.diag(2 * row ** 2) for row in scale.numpy()], axis=0) + dlib_covariance_z_mean(loc.numpy())
    assert terms["dip_ii"].item() == pytest.approx(dlib_dip(cov_z, 2.0, 2.0), rel=1e-10)


@pytest.mark.parametrize("tamper, said", [
    (lambda part: part["0.weight"].fill_(float("nan")),
     r"training part 'discriminator' cannot be the model's values: NaN or inf values in \['0.weight'\]"),
    (lambda part: part.__setitem__("0.weight", torch.zeros(9, 2)),
     r"training part 'discriminator' does not fit the model: wrong shapes \['0.weight: \(9, 2\) != \(8, 2\)'\]")],
                         ids=["nan", "shape"])
def test_a_checkpoint_whose_discriminator_is_not_one_is_refused_naming_its_tensors(data_plugin, tmp_path, tamper,
                                                                                    said):
    # a NaN was loaded, and the resumed run blamed the card's settings "before any step" for the NaN TC; a shape
    # was torch's "Error(s) in loading state_dict for Discriminator:", cut at its first line
    data = make_card("tiny")
    data["model"]["regularizers"] = [{"type": "factorvae", "gamma": 10.0, "layers": 1, "hidden": 8}]
    card, out = Card.model_validate(data), tmp_path / "run"
    train(card, out, max_steps=2, evaluate=False)
    checkpoint = torch.load(out / CHECKPOINT, weights_only=True)
    tamper(checkpoint["auxiliary"]["parts"]["regularizers.0.discriminator"])
    torch.save(checkpoint, out / CHECKPOINT)
    with pytest.raises(TrainingError, match=f"holds no usable state of the regularizers' training parts and their "
                                            f"optimisers \\({said}"):
        train(card, out, resume=True, evaluate=False)


def test_a_checkpoint_holding_a_training_part_the_card_has_not_is_refused_naming_it(data_plugin, tmp_path):
    # a part of another regularizer beside the card's own was left out without a word
    data = make_card("tiny")
    data["model"]["regularizers"] = [{"type": "factorvae", "gamma": 10.0, "layers": 1, "hidden": 8}]
    card, out = Card.model_validate(data), tmp_path / "run"
    train(card, out, max_steps=2, evaluate=False)
    checkpoint = torch.load(out / CHECKPOINT, weights_only=True)
    parts = checkpoint["auxiliary"]["parts"]
    parts["regularizers.1.critic"] = dict(parts["regularizers.0.discriminator"])
    torch.save(checkpoint, out / CHECKPOINT)
    with pytest.raises(TrainingError, match=r"training parts and their optimisers \(it holds regularizers.1.critic, "
                                            r"which this card's regularizers have not\)"):
        train(card, out, resume=True, evaluate=False)



@pytest.mark.parametrize("seeds", [[], ["--seeds", "0"], ["--seeds", "0,1"]], ids=["single", "one-seed", "ensemble"])
@pytest.mark.parametrize("where, said", [
    ("discriminator", r"regularizer FactorVAE \(regularizers.0, vaezoo_methods.regularizers\): its optimiser Adam "
                      r"of part 'discriminator'"),
    ("model", r"the recipe's optimiser \(train.optimizer\)")], ids=["discriminator", "model"])
def test_a_learning_rate_whose_step_overflows_the_floats_is_one_line(data_plugin, tmp_path, capsys, seeds, where,
                                                                      said):
    # 1e39 is a finite float but no float32: torch's Adam raised "value cannot be converted to type float without
    # overflow" with a traceback at the first step
    data = make_card("tiny")
    data["model"]["regularizers"] = [{"type": "factorvae", "gamma": 10.0, "layers": 1, "hidden": 8,
                                      **({"lr": 1e39} if where == "discriminator" else {})}]
    if where == "model":
        data["train"]["optimizer"]["lr"] = 1e39
    path = write_toml(tmp_path / "card.toml", data)
    code, _, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--no-eval", *seeds)
    assert code == 1 and "Traceback" not in err
    why = f"{said}: learning rate 1e\\+39 is too large, its step overflows the parameters' floating-point range; " \
          f"lower it"
    if not seeds:
        assert re.fullmatch(f"error: {why}", err.splitlines()[-1])
        return
    assert [line for line in err.splitlines() if re.fullmatch(f"seed [01]: {why}; no checkpoint has been written "
                                                              f"yet", line)]
    # every run stopped: none finished, which "2 of 2 runs stopped early ...; the others finished" said they had
    assert err.splitlines()[-1] == ("the run stopped early (its line above says why)" if seeds[1] == "0" else
                                    "all 2 runs stopped early (their lines above say why); none finished")


@pytest.mark.parametrize("max_steps, other", [([], "the other finished"),
                                               (["--max-steps", "1"], "the other stopped at --max-steps")],
                         ids=["finished", "max-steps"])
def test_a_sweep_member_whose_step_overflows_stops_alone(data_plugin, tmp_path, capsys, max_steps, other):
    # the members of another discriminator's learning rate are stacks of their own: the overflow of one stopped
    # every stack with it
    data = make_card("tiny")
    data["model"]["regularizers"] = [{"type": "factorvae", "gamma": 10.0, "layers": 1, "hidden": 8, "lr": 1e-4}]
    path = write_toml(tmp_path / "card.toml", data)
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--no-eval",
                         "--sweep", "model.regularizers.0.lr=1e-4,1e39", *max_steps)
    assert code == 1 and "Traceback" not in err
    assert "model.regularizers.0.lr=1e+39 seed 0: regularizer FactorVAE (regularizers.0, " \
           "vaezoo_methods.regularizers): its optimiser Adam of part " \
           "'discriminator': learning rate 1e+39 is too large" in err
    assert err.splitlines()[-1] == f"1 of 2 runs stopped early (its line above names it); {other}"
    assert (tmp_path / "run" / "model.regularizers.0.lr=0.0001" / "seed-0" / "tiny-blobs-run.toml").is_file()
    assert not (tmp_path / "run" / "model.regularizers.0.lr=1e+39" / "seed-0" / "tiny-blobs-run.toml").exists()


@pytest.mark.parametrize("regularizers, fix", [
    ([{"type": "factorvae", "layers": 1, "hidden": 8}, {"type": "dipvae"}],
     "FactorVAE takes no 'part' to act on a part of the latent of its own: keep one of the two on the card"),
    ([{"type": "beta", "beta": 4.0}, {"type": "dipvae"}], "give each its own 'part'")],
                         ids=["factorvae-dipvae", "beta-dipvae"])
def test_two_regularizers_that_each_add_the_kl_are_refused_with_a_fix_the_card_can_make(data_plugin, tmp_path,
                                                                                        regularizers, fix):
    # FactorVAE beside DIP-VAE was told to give each its own 'part', which FactorVAE does not take; beta and DIP-VAE
    # both take one (beta on a categorical part, DIP-VAE on the Gaussian one)
    data = make_card("tiny")
    data["model"]["regularizers"] = regularizers
    with pytest.raises(VaezooError, match=rf"its term 'kl' has the name of an earlier regularizer's term, which it "
                                          rf"would replace in the loss; give each term a name of its own \({fix}\)"):
        train(Card.model_validate(data), tmp_path / "run", evaluate=False)
