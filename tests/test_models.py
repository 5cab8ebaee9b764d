"""Tests driven by the registry (after timm's tests/test_models.py).

Every registered architecture and every zoo card is built, run forward and backward on a small batch,
checked for NaNs, and round-tripped through safetensors. The parameters are discovered when the tests are
collected, so a new plugin's architecture or card is tested the day it is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vaezoo
from helpers import VAE_SPECS
from vaezoo import plugins
from vaezoo.cards import Card, discover, parse_card
from vaezoo.errors import CardError, UnknownNameError
from vaezoo.hub import build_model, load_weights
from vaezoo.model import VAE
from vaezoo.plugins import get_plugins, registry
from vaezoo.weights import read_metadata, read_safetensors, save_weights

BATCH = 4


def _discover() -> tuple[dict[str, list[Card]], dict[str, Card]]:
    """Example cards of every registered architecture, and the zoo's cards by name.

    An architecture's examples are its zoo cards, else the card files its plugin ships (e.g. training recipes).
    """
    plugins.reset()
    try:
        zoo = discover()
        architectures = registry("architecture")
        examples = {}
        for architecture in architectures:
            examples[architecture] = [zoo[n] for n in sorted(zoo) if zoo[n].architecture == architecture]
            if not examples[architecture]:
                module = get_plugins().manager.get_plugin(architectures.plugin_of(architecture))
                examples[architecture] = [c for c in _shipped_cards(Path(module.__file__).parent)
                                          if c.architecture == architecture]
        return examples, zoo
    finally:
        plugins.reset()


def _shipped_cards(directory: Path) -> list[Card]:
    cards = []
    for path in sorted(directory.rglob("*.toml")):
        try:
            cards.append(parse_card(path))
        except CardError:
            continue  # a TOML file that is not a card
    return cards


EXAMPLES, CARDS = _discover()


def example_arguments() -> list:
    """``(architecture, model arguments)``: the ``vae`` specs of tests/helpers.py, then the first example card
    of every architecture. An architecture without one gets a parameter that fails, asking for a card."""
    params = [pytest.param("vae", spec, id=f"vae-{name}") for name, spec in VAE_SPECS.items()]
    for architecture, cards in sorted(EXAMPLES.items()):
        if architecture == "vae" and not cards:
            continue
        card = cards[0] if cards else None
        params.append(pytest.param(architecture, card.model if card else None,
                                   id=f"{architecture}-{card.name if card else 'no-card'}"))
    return params


def batch_for(model: VAE) -> torch.Tensor:
    return torch.rand(BATCH, model.channels, model.image_size, model.image_size)


def check_forward_backward(model: VAE) -> None:
    """Train-mode forward and backward: finite loss terms and a finite gradient for every parameter."""
    x = batch_for(model)
    model.train()
    out = model(x, step=10)
    assert out.output.shape == x.shape
    assert out.z.shape == (BATCH, model.latent.code_size)
    assert "reconstruction" in out.terms
    for name, value in {**out.terms, **out.kl}.items():
        assert value.dim() == 0 and torch.isfinite(value), f"{name} = {value}"
    assert torch.allclose(out.loss, sum(out.terms.values()))
    out.loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None, f"{name} gets no gradient"
        assert torch.isfinite(parameter.grad).all(), f"{name} has a non-finite gradient"
    assert any(p.grad.abs().sum() > 0 for p in model.parameters())


def check_eval(model: VAE) -> None:
    """Eval mode decodes the posterior's mode; sampling and reconstruction give finite images."""
    x = batch_for(model)
    model.eval()
    with torch.no_grad():
        out = model(x)
    assert torch.equal(out.z, out.posterior.mode)
    assert all(torch.isfinite(v) for v in out.terms.values())
    assert model.reconstruct(x).shape == x.shape and torch.isfinite(model.reconstruct(x)).all()
    samples = model.sample(3, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (3, model.channels, model.image_size, model.image_size)
    assert torch.isfinite(samples).all()


def check_safetensors_round_trip(model: VAE, rebuild, tmp_path) -> None:
    """Saved weights load into a freshly built model, which then computes exactly the same outputs."""
    path = tmp_path / "model.safetensors"
    save_weights(model.state_dict(), path, metadata={"test": "round trip"})
    assert read_metadata(path) == {"test": "round trip"}
    torch.manual_seed(1234)
    fresh = rebuild()
    load_weights(fresh, read_safetensors(path), str(path))
    expected = model.state_dict()
    assert fresh.state_dict().keys() == expected.keys()
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in expected.items())
    x = batch_for(model)
    model.eval(), fresh.eval()
    with torch.no_grad():
        assert torch.equal(fresh(x).output, model(x).output)


@pytest.mark.parametrize("architecture, arguments", example_arguments())
def test_architecture(architecture, arguments, tmp_path):
    if arguments is None:
        pytest.fail(f"architecture '{architecture}' has no zoo card to take model arguments from; "
                    f"add a card (or an example in tests/helpers.py) so that it is tested")
    build = registry("architecture")[architecture]
    torch.manual_seed(0)
    model = build(**arguments)
    assert isinstance(model, VAE)
    check_forward_backward(model)
    check_eval(model)
    check_safetensors_round_trip(model, lambda: build(**arguments), tmp_path)


def test_every_architecture_is_covered():
    """The discovered architectures include the core's composable ``vae`` and the built-in plugins' ones."""
    assert "vae" in EXAMPLES
    assert {card.architecture for card in CARDS.values()} <= set(EXAMPLES)


@pytest.mark.parametrize("name", sorted(CARDS))
def test_card(name, tmp_path):
    card = vaezoo.get_card(name)
    pretrained = card.weights is not None
    model = vaezoo.load(name, pretrained=pretrained)
    assert not model.training and model.card.name == name
    if pretrained:
        from vaezoo.weights import load_state_dict

        stored = load_state_dict(card)
        assert all(torch.equal(model.state_dict()[k], v) for k, v in stored.items())
        assert all(torch.isfinite(v).all() for v in stored.values() if v.is_floating_point())
    check_eval(model)
    check_forward_backward(model)
    check_safetensors_round_trip(model, lambda: build_model(card), tmp_path)


def test_unknown_model_name_lists_close_matches():
    if not CARDS:
        pytest.fail("the zoo has no cards")
    name = sorted(CARDS)[0]
    with pytest.raises(UnknownNameError, match=f"Did you mean '{name}'"):
        vaezoo.load(name[:-1] + "x")
