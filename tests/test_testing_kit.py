"""The conformance kit (vaezoo.testing) catches each broken rule by name (tests/test_models.py runs it on every
registered part).

Broken parts come from a fake plugin installed through an entry point, so every
message must name the plugin as well as the part.
"""

from __future__ import annotations

import pytest
import torch
from kit import (JOINT_TC_CAPACITY, TINY_DATASET, install_plugin, make_card, save_model_weights, weights_entry,
                 write_card, write_entry, write_toml)

from vaezoo import testing
from vaezoo.testing import ConformanceError

BROKEN_PARTS = '''
import torch
from torch import nn

import vaezoo
import vaezoo.likelihoods
from vaezoo.data import DataInfo, Dataset, ImageDataset
from vaezoo.latents import Gaussian, GaussianPosterior
from vaezoo.model import VAE, build_vae
from vaezoo.context import batch_mean
from vaezoo.regularizers import Regularizer


class NegativeKL(GaussianPosterior):
    def kl(self):
        return -super().kl()


class FlatKL(GaussianPosterior):
    def kl(self):
        return super().kl().sum(-1)


class BatchKL(GaussianPosterior):
    def kl(self):
        kl = super().kl()
        return kl * kl.shape[0]  # summed over the batch by mistake


class DetachedSample(GaussianPosterior):
    def rsample(self):
        return self.distribution.sample()


class SquareDensities(GaussianPosterior):
    def log_density_matrix(self, z):  # written for the batch's own codes only
        return super().log_density_matrix(z)[:, :len(z)]


def family(posterior_cls):
    class Family(Gaussian):
        def posterior(self, params):
            mean, logvar = params.split(self.dim, dim=-1)
            return posterior_cls(mean, logvar, self.prior)
    return Family


class NormalNoise(GaussianPosterior):
    def rsample(self):  # torch.normal: an ensemble cannot hand each member its own draws of it
        return self.mean + (0.5 * self.logvar).exp() * torch.normal(0.0, 1.0, self.mean.shape)


class UnseededPrior(Gaussian):
    def sample_prior(self, n, generator=None, device=None):
        return torch.randn(n, self.dim)


class Counting(Regularizer):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, posterior, z, step):
        self.calls += 1
        return {"kl": self.calls * batch_mean(posterior.kl())}


class PerExample(Regularizer):
    def forward(self, posterior, z, step):
        return {"kl": posterior.kl().sum(-1)}


class Warmup(Regularizer):
    """A correct KL warm-up: weight 0 at step 0, so no gradient there."""

    def forward(self, posterior, z, step):
        return {"kl": min(1.0, step / 100) * batch_mean(posterior.kl())}


class Detached(Regularizer):
    def forward(self, posterior, z, step):
        return {"kl": batch_mean(posterior.kl()).detach()}


class Dropping(Regularizer):
    def forward(self, posterior, z, step):  # torch.bernoulli: as NormalNoise
        return {"kl": batch_mean(posterior.kl() * torch.bernoulli(torch.full_like(z, 0.5)))}


class Smoothing(Regularizer):
    """A penalty on the KL's gradient with respect to the codes: its forward differentiates, as training allows."""

    def forward(self, posterior, z, step):
        (slope,) = torch.autograd.grad(batch_mean(posterior.log_prob(z)), z, create_graph=True)
        return {"kl": batch_mean(posterior.kl()) + slope.square().mean()}


class Reconstructing(Regularizer):
    def forward(self, posterior, z, step):
        return {"reconstruction": batch_mean(posterior.kl())}


SMALL = dict(image_size=16, channels=1, latent={"type": "gaussian", "dim": 2},
             encoder={"type": "mlp_encoder", "hidden": [8]}, decoder={"type": "mlp_decoder", "hidden": [8]})


class WithUnusedLayer(VAE):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.unused = nn.Linear(2, 2)


class NaNDecoder(VAE):
    def decode_logits(self, z):
        return super().decode_logits(z) * float("nan")


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("negative_kl", family(NegativeKL))
    register("flat_kl", family(FlatKL))
    register("batch_kl", family(BatchKL))
    register("detached_sample", family(DetachedSample))
    register("square_densities", family(SquareDensities))
    register("unseeded_prior", UnseededPrior)
    register("normal_noise", family(NormalNoise))


@vaezoo.hookimpl
def vaezoo_register_regularizers(register):
    register("counting", Counting)
    register("per_example", PerExample)
    register("detached", Detached)
    register("warmup", Warmup)
    register("reconstructing", Reconstructing)
    register("dropping", Dropping)
    register("smoothing", Smoothing)


@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    register("not_a_vae", lambda **kwargs: nn.Linear(2, 2))
    register("unused_layer", lambda context: build_vae(context, **SMALL, cls=WithUnusedLayer))
    register("nan_decoder", lambda context: build_vae(context, **SMALL, cls=NaNDecoder))


class NarrowEncoder(nn.Module):
    """Says it gives 8 features and gives 7."""

    def __init__(self, channels, image_size):
        super().__init__()
        self.out_features = 8
        self.linear = nn.Linear(channels * image_size * image_size, 7)

    def forward(self, x):
        return self.linear(x.flatten(1))


class HalfDecoder(nn.Module):
    def __init__(self, code_size, channels, image_size):
        super().__init__()
        self.shape = (channels, image_size // 2, image_size // 2)
        self.linear = nn.Linear(code_size, channels * (image_size // 2) ** 2)

    def forward(self, z):
        return self.linear(z).view(-1, *self.shape)


class SummedNll(vaezoo.likelihoods.Bernoulli):
    def nll(self, output, x):
        return super().nll(output, x).flatten(1).sum(1)


class NoInit(vaezoo.likelihoods.Bernoulli):
    def __init__(self, scale=1.0):  # no super().__init__(): not a module a model can hold
        self.scale = scale


@vaezoo.hookimpl
def vaezoo_register_nets(register):
    register("narrow_encoder", NarrowEncoder)
    register("half_decoder", HalfDecoder)


@vaezoo.hookimpl
def vaezoo_register_likelihoods(register):
    register("summed_nll", SummedNll)
    register("no_init", NoInit)


class NominalInInfoOnly(Dataset):
    """Squares at two positions; info() says the factor 'corner' is nominal, the loaded dataset does not."""

    def info(self, split="train"):
        return DataInfo(size=16, image_size=4, channels=1, factor_names=("corner",), nominal_factors=("corner",))

    def load(self, root=None, split="train"):
        corner = torch.arange(16) % 2
        images = torch.zeros(16, 1, 4, 4, dtype=torch.uint8)
        images[corner == 0, :, :2, :2] = 1
        images[corner == 1, :, 2:, 2:] = 1
        return ImageDataset(images, 1.0, factors=corner[:, None], factor_names=("corner",))


class FromRoot(Dataset):
    """Binary squares stored as ROOT/squares.npy, as a dataset of files reads them."""

    def info(self, split="train"):
        return DataInfo(size=16, image_size=4, channels=1)

    def load(self, root=None, split="train"):
        import numpy as np
        from vaezoo.data import data_root
        from vaezoo.errors import DataError

        path = data_root(root).path / "squares.npy"
        if not path.is_file():
            raise DataError(f"{path} does not exist")
        return ImageDataset(torch.from_numpy(np.load(path)), 1.0)


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    register("nominal_in_info_only", NominalInInfoOnly())
    register("from_root", FromRoot())
'''

DUPLICATES_THE_CORE = '''
import vaezoo
from vaezoo.latents import Gaussian


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("gaussian", Gaussian)
'''

REGISTERS_NOTHING = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    pass
'''


@pytest.fixture
def broken_parts(site):
    install_plugin(site, "broken_parts", BROKEN_PARTS)


def test_an_architecture_passes_and_its_model_is_left_as_it_was():
    model = testing.check_architecture("vae", train=False, **JOINT_TC_CAPACITY)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.eval()
    testing.check_model(model)
    assert not model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("name, problem", [
    ("negative_kl", "kl() is negative"),
    ("flat_kl", "kl() has shape (4,), expected (batch=4, kl_dims)"),
    ("detached_sample", "rsample() does not depend on the encoder's parameters"),
    ("unseeded_prior", "sample_prior() ignores its generator"),
    ("batch_kl", "the mode or kl() of an image changes with the other images of its batch"),
    ("square_densities", "log_density_matrix() of one code of 'z' has shape (1, 1, 2), expected (1, 4, 2)"),
    ("normal_noise", "rsample() draws random numbers through an operation an ensemble ('vaezoo train --seeds') "
                     "cannot hand each member its own draws of"),
])
def test_a_broken_latent_family_is_caught_naming_it_and_its_plugin(broken_parts, name, problem):
    with pytest.raises(ConformanceError) as caught:
        testing.check_latent_family(name, dim=2)
    assert str(caught.value).startswith(f"latent family '{name}' of plugin 'broken_parts': ")
    assert problem in str(caught.value)


@pytest.mark.parametrize("name, problem", [
    ("counting", "term 'kl' at step 0 changed when computed again"),
    ("per_example", "term 'kl' at step 0 has shape (8,), expected ()"),
    ("detached", "the terms depend on the encoder's parameters at none of the steps (0, 1000)"),
    ("reconstructing", "a term is named 'reconstruction', the likelihood's term, which it would replace in the loss"),
    ("dropping", "forward at step 0 draws random numbers through an operation an ensemble ('vaezoo train --seeds') "
                 "cannot hand each member its own draws of"),
])
def test_a_broken_regularizer_is_caught_naming_it_and_its_plugin(broken_parts, name, problem):
    with pytest.raises(ConformanceError) as caught:
        testing.check_regularizer(name)
    assert str(caught.value).startswith(f"regularizer '{name}' of plugin 'broken_parts': ")
    assert problem in str(caught.value)


def test_a_warm_up_whose_terms_weigh_nothing_at_step_0_passes(broken_parts):
    """It failed with "the terms at step 0 does not depend on the encoder's parameters"."""
    assert testing.check_regularizer("warmup", train=False).__class__.__name__ == "Warmup"


def test_a_regularizer_whose_forward_differentiates_passes(broken_parts):
    """Its forward takes a gradient of the codes, as it may in training: the kit's check of its random draws ran it
    without autograd, where torch.autograd.grad fails."""
    assert testing.check_regularizer("smoothing", train=False).__class__.__name__ == "Smoothing"


NAMED_LIKE_THE_KIT = '''
import torch

import vaezoo
from vaezoo.data import DataInfo, Dataset, ImageDataset
from vaezoo.model import build_vae
from vaezoo.context import batch_mean
from vaezoo.latents import Gaussian
from vaezoo.likelihoods import Bernoulli
from vaezoo.nets.mlp import MLPEncoder
from vaezoo.regularizers import Regularizer


class WarmKL(Regularizer):
    """A KL warm-up over ``steps`` steps: its argument is named like check_regularizer's own ``steps``."""

    example = {"steps": 10}

    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def forward(self, posterior, z, step):
        return {"kl": min(1.0, (step + 1) / self.steps) * batch_mean(posterior.kl())}


class SeededGaussian(Gaussian):
    """A Gaussian whose argument is named like check_latent_family's own ``seed``."""

    example = {"dim": 3, "seed": 7}

    def __init__(self, dim, seed):
        super().__init__(dim)


class Drawn(Dataset):
    """Random binary images drawn from its option ``seed``, named like check_dataset's own."""

    def info(self, split="train", seed=0, size=16):
        return DataInfo(size=size, image_size=16, channels=1)

    def load(self, root=None, split="train", seed=0, size=16):
        generator = torch.Generator().manual_seed(seed + (split == "test"))
        return ImageDataset((torch.rand(size, 1, 16, 16, generator=generator) > 0.5).to(torch.uint8) * 255)


def seeded_vae(context, image_size, channels, seed):
    """A builder whose argument is named like check_architecture's own ``seed``."""
    return build_vae(context, image_size, channels, latent={"type": "gaussian", "dim": 2},
                     regularizers=[{"type": "beta", "beta": 1.0}], encoder={"type": "mlp_encoder", "hidden": [8]},
                     decoder={"type": "mlp_decoder", "hidden": [8]})


class SeededEncoder(MLPEncoder):
    """An encoder whose argument is named like check_net's own ``seed``."""

    def __init__(self, channels, image_size, seed):
        super().__init__(channels, image_size, hidden=[8])


class SeededBernoulli(Bernoulli):
    """A likelihood whose argument is named like check_likelihood's own ``seed``."""

    def __init__(self, seed):
        super().__init__()


@vaezoo.hookimpl
def vaezoo_register_nets(register):
    register("seeded_encoder", SeededEncoder)


@vaezoo.hookimpl
def vaezoo_register_likelihoods(register):
    register("seeded_bernoulli", SeededBernoulli)


@vaezoo.hookimpl
def vaezoo_register_regularizers(register):
    register("warm_kl", WarmKL)


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    register("drawn", Drawn())


@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    register("seeded_vae", seeded_vae)


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("seeded_gaussian", SeededGaussian)
'''


TYPED_PRIOR = '''
import torch

import vaezoo
from vaezoo.latents import Gaussian


class TypedPrior(Gaussian):
    def sample_prior(self, n: int, generator: torch.Generator | None = None,
                     device: torch.device | None = None) -> torch.Tensor:
        where = device.type if device is not None else "cpu"  # as LatentFamily.sample_prior's hint allows
        return torch.randn(n, self.dim, generator=generator, device=where)


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("typed_prior", TypedPrior)
'''


def test_the_kit_draws_from_the_prior_with_the_device_a_family_is_hinted_to_take(site):
    """LatentFamily.sample_prior is hinted to take a torch device, as the model passes its own: the kit passed the
    text "cpu", and a family written to its hint failed the check ('str' object has no attribute 'type')."""
    install_plugin(site, "typed_prior", TYPED_PRIOR)
    assert testing.check_latent_family("typed_prior", dim=3, train=False).dim == 3


def test_a_part_argument_named_like_the_kits_own_keyword_is_given_through_arguments(site):
    """A warm-up's ``steps`` went to check_regularizer's own ``steps`` (a raw "TypeError: 'int' object is not
    iterable"), and a family's, a builder's or a dataset's ``seed`` to the check's own, so such a part could not be
    checked; now ``arguments=`` carries the part's arguments, and ``steps=`` that is no tuple of steps says so."""
    install_plugin(site, "named_like_the_kit", NAMED_LIKE_THE_KIT)
    assert testing.check_regularizer("warm_kl", arguments={"steps": 10}, train=False).steps == 10
    assert testing.check_latent_family("seeded_gaussian", arguments={"dim": 3, "seed": 7}, train=False).dim == 3
    with pytest.raises(ConformanceError, match=r"steps=.* got 10; give a regularizer argument named 'steps' as "
                                               r"arguments=\{'steps': 10\}"):
        testing.check_regularizer("warm_kl", steps=10, train=False)
    with pytest.raises(ConformanceError, match="given dim both in arguments= and as a keyword; give each once"):
        testing.check_latent_family("seeded_gaussian", arguments={"dim": 3, "seed": 7}, dim=3, train=False)
    model = testing.check_architecture("seeded_vae", arguments={"seed": 3}, image_size=16, channels=1, train=False)
    assert model.image_size == 16
    testing.check_dataset("drawn", arguments={"seed": 3}, size=8)
    assert testing.check_net("seeded_encoder", image_size=8, arguments={"seed": 3}).out_features == 8
    assert type(testing.check_likelihood("seeded_bernoulli", arguments={"seed": 3})).__name__ == "SeededBernoulli"


@pytest.mark.parametrize("name, problem", [
    ("not_a_vae", "the builder returned a Linear, not a vaezoo.model.VAE"),
    ("unused_layer", "parameters get no gradient from the loss: ['unused.weight', 'unused.bias']"),
    ("nan_decoder", "NaN or infinite values"),
])
def test_a_broken_architecture_is_caught_naming_it_and_its_plugin(broken_parts, name, problem):
    with pytest.raises(ConformanceError) as caught:
        testing.check_architecture(name)
    assert str(caught.value).startswith(f"architecture '{name}' of plugin 'broken_parts': ")
    assert problem in str(caught.value)


def test_an_architecture_without_arguments_or_card_asks_for_them(monkeypatch):
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")  # the core alone: no card of 'vae' to take arguments from
    with pytest.raises(ConformanceError, match="architecture 'vae' of plugin 'core': building with no arguments "
                                               "raised CardError: architecture 'vae': missing a required argument"):
        testing.check_architecture("vae")


def test_a_dataset_whose_info_and_loaded_data_differ_on_nominal_factors_is_caught(broken_parts):
    with pytest.raises(ConformanceError, match=r"dataset 'nominal_in_info_only' of plugin 'broken_parts': split "
                                               r"'train': info\(\) says .*, but load\(\) gives nominal factors \(\)"):
        testing.check_dataset("nominal_in_info_only")


def install_card_plugin(site, entry_name: str, cards) -> str:
    """Install a plugin ``entry_name`` whose one hook gives the card folder ``cards``; returns its module's name."""
    return install_plugin(site, entry_name, f"""
import vaezoo


@vaezoo.hookimpl
def vaezoo_card_dirs():
    return [{str(cards)!r}]
""")


def assert_check_plugin(entry_name: str, cards: list[str], problem: str | None) -> None:
    """``check_plugin(entry_name)`` passes, listing ``cards``, where ``problem`` is None; else it fails saying it."""
    if problem is None:
        assert testing.check_plugin(entry_name) == {"card": cards}
        return
    with pytest.raises(ConformanceError) as caught:
        testing.check_plugin(entry_name)
    assert str(caught.value) == f"plugin '{entry_name}': {problem}"


@pytest.mark.parametrize("requirement, admitted", [
    ("vaezoo>=0.1", False), ("vaezoo>=0.1.0,<1", False), ("vaezoo~=0.1", False), ("vaezoo>=0.2", True),
    ("vaezoo>=0.2.0,<1", True), ("vaezoo==0.2.*", True),
])
def test_check_plugin_fails_cards_an_older_vaezoo_its_distribution_admits_may_refuse(site, tmp_path, requirement,
                                                                                     admitted):
    # a card vaezoo 0.2.0 wrote holds train.machine, which vaezoo 0.1.0 refuses; a plugin shipping it that requires
    # 'vaezoo>=0.1' (as the example plugin, written under 0.1.0, does) installs beside a vaezoo that cannot read it
    cards = tmp_path / "cards"
    write_card(cards, {**make_card(name="dated-mnist"), "vaezoo_version": "0.2.0"})
    write_card(cards, make_card(name="older-mnist"))
    module = install_card_plugin(site, "dated", cards)
    metadata = site / f"{module}-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text(encoding="utf-8") + f"Requires-Dist: {requirement}\n", encoding="utf-8")
    assert_check_plugin("dated", ["dated-mnist", "older-mnist"], None if admitted else (
        f"card 'dated-mnist' was written by vaezoo 0.2.0, but distribution {module} requires '{requirement}', which "
        f"admits an older vaezoo that may refuse what the card holds; declare 'vaezoo>=0.2.0' in the dependencies of "
        f"its pyproject.toml"))


@pytest.mark.parametrize("command, shipped", [
    ("vaezoo eval runs/measured-mnist --data-root /home/me/data", False),  # what 'vaezoo train' wrote
    ("vaezoo eval measured-mnist-run", False), ("vaezoo eval measured-mnist", True),
    ("vaezoo eval measured-mnist --data-root DATA --metrics elbo", True), ("python -m my_plugin.measure", True),
])
def test_check_plugin_fails_a_shipped_card_whose_commands_name_a_run(site, tmp_path, command, shipped):
    cards = tmp_path / "cards"
    metric = {"value": 1.0, "command": command, "vaezoo_version": "0.1.0"}
    write_card(cards, {**make_card(name="measured-mnist"), "metrics": {"elbo": metric}})
    install_card_plugin(site, "measured", cards)
    assert_check_plugin("measured", ["measured-mnist"], None if shipped else (
        f"card 'measured-mnist' records metric 'elbo' as measured by '{command}', which names another card than "
        f"'measured-mnist' (a run's folder its users do not have); measure the shipped card again with 'vaezoo eval "
        f"measured-mnist --write' (CONTRIBUTING.md, Train and ship weights)"))


def test_check_plugin_fails_a_card_that_every_command_skips(site, tmp_path):
    cards = tmp_path / "cards"
    write_card(cards, make_card(name="vae-mnist"))  # a built-in zoo entry's name: the built-in is kept
    install_card_plugin(site, "shadow", cards)
    with pytest.raises(ConformanceError, match=r"plugin 'shadow': card .*vae-mnist.toml is skipped: name 'vae-mnist' "
                                               r"is already taken"):
        testing.check_plugin("shadow")


def test_a_dataset_of_files_is_checked_where_its_files_are(broken_parts, tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    np.save(tmp_path / "squares.npy", (torch.rand(16, 1, 4, 4) > 0.5).to(torch.uint8).numpy())
    testing.check_dataset("from_root", data_root=tmp_path)
    with pytest.raises(ConformanceError, match="squares.npy does not exist"):
        testing.check_dataset("from_root", data_root=tmp_path / "elsewhere")


@pytest.mark.parametrize("check, name, problem", [
    ("check_net", "narrow_encoder", "gave (4, 7) for input (4, 1, 32, 32), not (4, 8)"),
    ("check_net", "half_decoder", "gave (4, 1, 16, 16) for input (4, 4), not (4, 1, 32, 32)"),
    ("check_likelihood", "summed_nll", "nll gave (4,), not one value per pixel shaped like the images"),
    ("check_likelihood", "no_init", "state_dict() (a module: its __init__ calls super().__init__()) raised"),
])
def test_a_broken_net_or_likelihood_is_caught_naming_it_and_its_plugin(broken_parts, check, name, problem):
    kind = "net" if check == "check_net" else "likelihood"
    with pytest.raises(ConformanceError) as caught:
        getattr(testing, check)(name)
    assert str(caught.value).startswith(f"{kind} '{name}' of plugin 'broken_parts': ") and problem in str(caught.value)


def test_check_plugin_lists_what_a_plugin_contributes(broken_parts):
    contributed = testing.check_plugin("broken_parts")
    assert contributed == {
        "architecture": ["nan_decoder", "not_a_vae", "unused_layer"],
        "dataset": ["from_root", "nominal_in_info_only"],
        "likelihood": ["no_init", "summed_nll"],
        "net": ["half_decoder", "narrow_encoder"],
        "latent family": ["batch_kl", "detached_sample", "flat_kl", "negative_kl", "normal_noise",
                          "square_densities", "unseeded_prior"],
        "regularizer": ["counting", "detached", "dropping", "per_example", "reconstructing", "smoothing",
                        "warmup"],
    }


def test_check_plugin_reports_a_plugin_that_breaks_a_rule_by_name(site):
    install_plugin(site, "copycat", DUPLICATES_THE_CORE)
    with pytest.raises(ConformanceError) as caught:
        testing.check_plugin("copycat")
    assert str(caught.value) == ("plugin 'copycat': failed: latent family 'gaussian' is registered by both plugin "
                                 "'core' and plugin 'copycat'; uninstall one or disable it with VAEZOO_LOAD_PLUGINS")


def test_check_plugin_reports_a_plugin_that_is_missing_or_registers_nothing(site):
    with pytest.raises(ConformanceError, match="plugin 'absent': not installed: no entry point 'absent'"):
        testing.check_plugin("absent")
    install_plugin(site, "idle", REGISTERS_NOTHING)
    with pytest.raises(ConformanceError, match=r"plugin 'idle': registers nothing and has no cards "
                                               r"\(hooks: \['vaezoo_register_metrics'\]\)"):
        testing.check_plugin("idle")


INPUT = {"transform": "MNIST's 28x28 uint8 digits resized to 16x16 with PIL's bilinear filter, divided by 255"}

BREAKS_AFTER_TRAINING = '''
import vaezoo
from vaezoo.latents import Gaussian


class Indescribable(Gaussian):
    """Passes every check of the protocol; a card cannot be written for it, as vaezoo train does at the end."""
    def layout(self):
        raise RuntimeError("no words for it")


def explodes(model, dataset, device=None, batch_size=64):
    raise ValueError("boom")


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("indescribable", Indescribable)


@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    register("explodes", explodes)
'''


@pytest.fixture
def breaks_after_training(site):
    install_plugin(site, "late", BREAKS_AFTER_TRAINING)


def test_a_family_that_would_crash_vaezoo_train_at_its_end_fails_the_kit(breaks_after_training):
    testing.check_latent_family("indescribable", dim=2, train=False)  # the protocol alone does not see it
    with pytest.raises(ConformanceError) as caught:
        testing.check_latent_family("indescribable", dim=2)
    message = str(caught.value)
    assert message.startswith("latent family 'indescribable' of plugin 'late'")
    assert message.endswith("layout() raised RuntimeError: no words for it")


def test_a_metric_that_raises_after_training_fails_the_kit_quoting_vaezoo_train(breaks_after_training, tmp_path):
    path = write_card(tmp_path, make_card(name="kit-card", eval_metrics=["mutual_info_score", "explodes"],
                                          input=INPUT))
    with pytest.raises(ConformanceError) as caught:
        testing.check_training(path)
    message = str(caught.value)
    assert message.startswith("card 'kit-card', trained as 'vaezoo train' does: its card lacks 'explodes': "
                              "warning: metric 'explodes' of plugin 'late' failed: ValueError: boom; the card is "
                              "written without it")
    assert "\n" not in message


ANOTHER_PLUGINS_BROKEN_METRIC = """
import vaezoo

def explodes(model, dataset, device=None, batch_size=64):
    raise ValueError("boom")

@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    register("explodes", explodes)
"""


def test_a_parts_run_measures_no_other_third_partys_metric(site):
    install_plugin(site, "other", ANOTHER_PLUGINS_BROKEN_METRIC)
    testing.check_latent_family("gaussian", dim=3)  # 'explodes' is plugin 'other''s to check, not core's family's


def test_check_training_runs_the_recipe_on_synthetic_data_and_returns_the_run_loaded_back(tmp_path):
    path = write_card(tmp_path, make_card(name="kit-card", eval_metrics=["total_correlation", "mutual_info_score"],
                                          input=INPUT))
    model = testing.check_training(path, steps=3)
    assert not model.training and model.card.name == "kit-card-run"
    assert model.card.train.data.name == "synthetic" and model.card.train.steps == 3
    assert model.card.train.data.options == {"image_size": 16, "channels": 1, "size": 24}  # the card's geometry
    assert {"reconstruction", "objective", "total_correlation", "mutual_info_score"} <= set(model.card.metrics)
    assert not tmp_path.joinpath("run").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["kit-card.toml"]


def test_a_metric_the_model_cannot_serve_fails_the_kit_before_training(tmp_path, monkeypatch):
    card = make_card(name="kit-card", eval_metrics=["total_correlation"], input=INPUT,
                     model={"image_size": 16, "latent": {"type": "gumbel_categorical", "categories": 3}})
    monkeypatch.setattr("vaezoo.training.train.train", lambda *a, **k: pytest.fail("it trained"))
    with pytest.raises(ConformanceError, match=r"card 'kit-card', trained as 'vaezoo train' does: matching its "
                                               r"metrics against the model \(the check at step 0\) raised "
                                               r"MetricError: card 'kit-card': metric 'total_correlation' needs"):
        testing.check_training(write_card(tmp_path, card))


def test_a_metric_the_cards_own_dataset_cannot_serve_fails_the_kit_as_vaezoo_train_refuses_it(tmp_path, monkeypatch):
    # the kit trains on the synthetic dataset, which has factors; the card's MNIST has none
    path = write_card(tmp_path, make_card(name="kit-card", eval_metrics=["mutual_info_score", "mig_chen"],
                                          input=INPUT))
    monkeypatch.setattr("vaezoo.training.train.train", lambda *a, **k: pytest.fail("it trained"))
    refused = (r"card 'kit-card', trained as 'vaezoo train' does: matching its metrics against the model \(the check "
               r"at step 0\) raised MetricError: card 'kit-card': metric 'mig_chen' needs a dataset with ground-truth "
               r"factors .*; its dataset has none ")
    with pytest.raises(ConformanceError, match=refused + r"\(remove it from eval_metrics\)$"):
        testing.check_training(path)
    with pytest.raises(ConformanceError, match=refused + r"\(leave it out of metrics\)$"):
        testing.check_training(path, metrics=["mig_chen"])


def test_the_synthetic_dataset_has_factors_labels_and_any_geometry():
    from vaezoo.assemble import load_dataset

    data = load_dataset("synthetic", split="test", image_size=32, channels=3, size=20)
    assert data.batch(slice(None)).shape == (20, 3, 32, 32) and set(data.batch(slice(None)).unique().tolist()) == {0, 1}
    assert data.factor_names == ("shape", "x", "y") and torch.equal(data.labels, data.factors[:, 0])
    again = load_dataset("synthetic", split="test", image_size=32, channels=3, size=20)
    assert torch.equal(again.images, data.images)
    assert not torch.equal(load_dataset("synthetic", image_size=32, channels=3, size=20).images, data.images)


@pytest.mark.parametrize("given, problem", [
    (None, "states no [input]: add a section [input] with transform = how the dataset's images became the model's "
           "input, in words (see CONTRIBUTING.md)"),
    ({"transform": "MNIST digits divided by 255"},
     "its [input] transform 'MNIST digits divided by 255' does not name the input's size 16x16"),
])
def test_a_card_that_does_not_state_its_input_fails_the_kit(tmp_path, given, problem):
    path = write_card(tmp_path, make_card(name="no-input", **({"input": given} if given else {})))
    with pytest.raises(ConformanceError) as caught:
        testing.check_card(path)
    assert str(caught.value) == f"card 'no-input' ({path.resolve()}): {problem}"


def test_a_card_with_weights_passes_and_returns_the_pretrained_model(tmp_path):
    card, state, _ = write_entry(tmp_path, make_card(name="tiny-kit", input=INPUT))
    model = testing.check_card(card)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


def test_a_card_whose_weights_do_not_verify_is_caught(tmp_path):
    card, _, weights = write_entry(tmp_path, make_card(name="tiny-kit", input=INPUT))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ConformanceError, match=r"card 'tiny-kit' \(.*\): verifying its weights raised WeightsError: "
                                               r".*sha256 .* does not match the card's"):
        testing.check_card(card)


def test_a_card_whose_weights_hold_nan_is_caught(tmp_path):
    card = make_card(name="tiny-kit", input=INPUT)
    weights = tmp_path / "tiny-kit.safetensors"
    save_model_weights(weights, card, edit=lambda state: next(v for v in state.values()
                                                              if v.is_floating_point()).view(-1)[0].fill_(float("nan")))
    path = write_toml(tmp_path / "tiny-kit.toml", {**card, "weights": weights_entry(weights)})
    with pytest.raises(ConformanceError, match=r"card 'tiny-kit' \(.*\): verifying its weights raised WeightsError: "
                                               r".*NaN or inf values in \["):
        testing.check_card(path)


@pytest.mark.parametrize("fields, problem", [
    ({"architecture": "nowhere"}, "architecture 'nowhere' is not registered by any loaded plugin"),
    ({"eval_metrics": ["nothing"]}, "eval metric 'nothing' is not registered"),
    ({"headline": "fid", "metrics": {"reconstruction": {"value": 1.0, "command": "vaezoo eval x",
                                                        "vaezoo_version": "0.1.0"}}},
     "headline 'fid' is not one of its metrics ['reconstruction']"),
])
def test_a_card_that_breaks_a_rule_is_caught(tmp_path, fields, problem):
    architecture = fields.pop("architecture", "vae")
    path = write_card(tmp_path, make_card(name="bad-card", architecture=architecture, **fields))
    with pytest.raises(ConformanceError) as caught:
        testing.check_card(path)
    assert str(caught.value) == f"card 'bad-card' ({path.resolve()}): {problem}"


def test_a_card_that_does_not_validate_is_caught(tmp_path):
    card = make_card(name="bad-card")
    del card["license"]
    path = write_toml(tmp_path / "bad-card.toml", card)
    with pytest.raises(ConformanceError, match=r"card .*bad-card.toml: validating raised CardError: .*'license'"):
        testing.check_card(path)


@pytest.mark.parametrize("grey", [False, True], ids=["binary", "grey levels"])
def test_a_dataset_of_binary_or_of_grey_level_images_passes_the_kit(data_plugin, grey):
    testing.check_dataset(TINY_DATASET, grey=grey)  # grey levels: no Bernoulli log-likelihood is asked for
