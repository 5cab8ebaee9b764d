"""Pictures of a model whose latent family breaks its contract: one error naming the family, never a traceback from
inside the drawing nor a PNG of NaN images."""

import dataclasses
import math

import pytest
import torch

from vaezoo.assemble import build_part
from vaezoo.errors import PluginError
from vaezoo.evaluation import viz
from vaezoo.latents import Gaussian

IMAGE_SIZE = 16
DIM = 3


def tiny_gaussian_vae():
    torch.manual_seed(0)
    return build_part("architecture", {"type": "vae", "image_size": IMAGE_SIZE, "channels": 1,
                                       "latent": {"type": "gaussian", "dim": DIM},
                                       "encoder": {"type": "mlp_encoder", "hidden": [16]},
                                       "decoder": {"type": "mlp_decoder", "hidden": [16]}}).eval()


def images(n: int) -> torch.Tensor:
    return torch.rand(n, 1, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(0))


def posterior_class(model):
    return type(model.latent.posterior(torch.zeros(1, model.latent.param_size)))


@pytest.mark.parametrize("kl, message", [
    (lambda self: self.mode.sum() * 0 + 1.0, "kl() is a tensor of shape (), not one row per image"),
    (lambda self: torch.ones(len(self.mode), 1), "kl() has 1 values per image, fewer than its sweeps index"),
    (lambda self: torch.full_like(self.mode, math.nan), "kl() averages nan over the images"),
    (lambda self: -torch.ones_like(self.mode), "kl() averages -1 over the images"),
])
def test_a_traversal_ranked_by_a_kl_that_breaks_the_contract_names_the_family(monkeypatch, kl, message):
    """A scalar KL raised IndexError from inside the ranking (a traceback from 'vaezoo show'); a NaN or negative
    one ranked the rows silently."""
    model = tiny_gaussian_vae()
    monkeypatch.setattr(posterior_class(model), "kl", kl)
    with pytest.raises(PluginError) as error:
        viz.traverse(model, images(8), reference=images(1)[0])
    assert str(error.value).startswith("latent family Gaussian (vaezoo.latents.")
    assert message in str(error.value)


@pytest.mark.parametrize("prior, message", [
    (lambda self, n, generator=None, device=None: torch.full((n, DIM), math.nan),
     "sample_prior() is not finite (NaN or inf) for 5 of the 5 codes"),
    (lambda self, n, generator=None, device=None: torch.zeros(n, DIM + 1),
     "sample_prior() is a tensor of shape (5, 4), not (n, code_size) = (5, 3)"),
])
def test_samples_from_a_prior_that_breaks_the_contract_name_the_family(monkeypatch, prior, message):
    """A NaN prior drew a PNG of blank tiles with exit code 0; a code of the wrong size blamed the decoder. model.sample
    blamed its caller, who gave no codes: "the decoder takes finite codes, ...; give finite codes" and "the decoder
    takes float codes (B, 3)"."""
    model = tiny_gaussian_vae()
    monkeypatch.setattr(type(model.latent), "sample_prior", prior)
    for draw in (lambda: viz.sample(model, n=5), lambda: model.sample(5)):
        with pytest.raises(PluginError) as error:
            draw()
        assert str(error.value) == f"latent family Gaussian (vaezoo.latents.gaussian): {message}"


def test_samples_from_a_prior_that_ignores_its_device_name_the_family(monkeypatch):
    """A family whose sample_prior() draws on the CPU whatever device it is given made model.sample on a GPU say
    "the codes are on cpu and the model on cuda:0; move them there with z.to('cuda:0')", to a caller who gave no
    codes. The meta device stands for the GPU here."""
    model = tiny_gaussian_vae().to("meta")
    drawn_here = Gaussian.sample_prior
    monkeypatch.setattr(Gaussian, "sample_prior", lambda self, n, generator=None, device=None:
                        drawn_here(self, n, generator, device="cpu"))
    with pytest.raises(PluginError, match=r"^latent family Gaussian \(vaezoo.latents.gaussian\): sample_prior\(\) is "
                                          r"on cpu, not on meta, the device it was given$"):
        model.sample(5)


def test_a_nan_mode_is_refused_by_traversals_and_reconstructions(monkeypatch):
    """The mode a traversal starts from, and reconstructions' codes, were drawn as blank tiles with exit code 0."""
    model = tiny_gaussian_vae()
    monkeypatch.setattr(posterior_class(model), "mode", property(lambda self: torch.full_like(self.mean, math.nan)))
    for draw in (lambda: viz.traverse(model, reference=images(1)[0]), lambda: viz.reconstruct(model, images(4))):
        with pytest.raises(PluginError, match=r"^latent family Gaussian \(vaezoo.latents.gaussian\): the posterior's "
                                              r"mode is not finite \(NaN or inf\) for \d+ of the \d+ codes$"):
            draw()


def test_a_family_without_a_prior_or_sweeps_is_named_by_a_traversal(monkeypatch):
    """A family that implements neither prior nor sweeps() raised a bare NotImplementedError: a traceback from
    vaezoo show, and a gallery that stopped on it instead of skipping the card."""
    model = tiny_gaussian_vae()

    def no_prior(self):  # what the default sweeps() and reference_code() read, as LatentFamily.prior raises it
        raise NotImplementedError

    monkeypatch.setattr(Gaussian, "_prior_per_dimension", no_prior)
    with pytest.raises(PluginError, match=r"^latent family Gaussian \(vaezoo.latents.gaussian\): it has neither "
                                          r"sweeps\(\) of its own nor the prior the default sweeps\(\) reads; give "
                                          r"it one of them \(docs/plugins.md\)$"):
        viz.traverse(model, images(4), reference=images(1)[0], steps=3)
    with pytest.raises(PluginError, match=r"^latent family Gaussian \(vaezoo.latents.gaussian\): it has neither "
                                          r"reference_code\(\) of its own nor the prior the default one reads; "):
        viz.traverse(model, steps=3)  # without an image, the rest of the code is the family's reference code


def test_a_mode_of_another_shape_is_named_by_reconstruct_as_by_forward(monkeypatch):
    """model.reconstruct(x) of a family whose posterior mode has another shape said "the decoder takes float codes
    (B, 3) (code_size 3), got float32 of shape (4, 2)", blaming codes its caller never gave."""
    model = tiny_gaussian_vae()
    monkeypatch.setattr(posterior_class(model), "mode", property(lambda self: self.mean[:, :2]))
    for draw in (lambda: model.reconstruct(images(4)), lambda: model(images(4))):
        with pytest.raises(PluginError, match=r"^latent family Gaussian \(vaezoo.latents.gaussian\): the posterior's "
                                              r"mode is a tensor of shape \(4, 2\), not \(batch, code_size\) = "
                                              r"\(4, 3\)$"):
            draw()


def first_sweep_replaced(**changes):
    """A Gaussian's sweeps() with the first row's fields replaced."""
    original = Gaussian.sweeps

    def sweeps(self, steps, span):
        rows = original(self, steps, span)
        return [dataclasses.replace(rows[0], **changes), *rows[1:]]
    return sweeps


@pytest.mark.parametrize("sweeps, message", [
    (lambda self, steps, span: None, "sweeps() returned a NoneType, not a list of vaezoo.latents.Sweep"),
    (lambda self, steps, span: [], "sweeps() gave no row: a traversal would leave the part out"),
    (first_sweep_replaced(values=torch.zeros(10, 2)), "a sweep sets 1 of the code's 3 columns (slice(0, 1, None)) "
                                                      "to a tensor of shape (10, 2), not (n >= 1, 1) values"),
    (first_sweep_replaced(values=torch.full((10, 1), math.nan)), "a sweep's values are not finite (NaN or inf)"),
    (first_sweep_replaced(columns=slice(5, 9)), "a sweep sets 0 of the code's 3 columns (slice(5, 9, None))"),
])
def test_a_traversal_along_sweeps_that_break_the_contract_names_the_family(monkeypatch, sweeps, message):
    """sweeps() returning None or [] or values of the wrong width ended in a traceback from inside the traversal; NaN
    values drew a blank row with exit code 0."""
    model = tiny_gaussian_vae()
    monkeypatch.setattr(Gaussian, "sweeps", sweeps)
    with pytest.raises(PluginError) as error:
        viz.traverse(model)
    assert str(error.value).startswith(f"latent family Gaussian (vaezoo.latents.gaussian): {message}")


@pytest.mark.parametrize("code, message", [
    (torch.full((DIM,), math.nan), "reference_code() is not finite (NaN or inf) for 1 of the 1 codes"),
    (torch.zeros(DIM + 2), "reference_code() is a tensor of shape (1, 5), not (n, code_size) = (1, 3)"),
])
def test_a_traversal_without_data_from_a_broken_reference_code_names_the_family(monkeypatch, code, message):
    """A NaN reference code drew blank tiles with exit code 0; one of the wrong size blamed the decoder."""
    model = tiny_gaussian_vae()
    monkeypatch.setattr(Gaussian, "reference_code", lambda self: code)
    with pytest.raises(PluginError) as error:
        viz.traverse(model)
    assert str(error.value) == f"latent family Gaussian (vaezoo.latents.gaussian): {message}"
