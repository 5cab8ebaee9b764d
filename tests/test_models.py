"""Tests driven by the registry (after timm's tests/test_models.py).

Every registered architecture and every zoo card is built, run forward and backward on a small batch,
checked for NaNs, and round-tripped through safetensors, and every registered latent family and
regularizer is checked with the example spec its class declares, by the conformance kit (vaezoo.testing)
that plugin authors run on their own parts. The kit's trial run of each part (a few steps as
``vaezoo train`` takes them, every metric the model serves, a traversal, loading back) is marked slow. The parameters
are discovered when the tests are collected, so a new plugin's architecture, card, family or regularizer is
tested the day it is installed.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

import vaezoo
from kit import GAUSSIAN_MLP_RGB, VAE_SPECS, install_plugin
from vaezoo import plugins, testing
from vaezoo.entries.catalog import discover, parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, UnknownNameError
from vaezoo.plugins import get_plugins, registry

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


UNREADABLE: dict[str, str] = {}  # a plugin's TOML file that does not validate as a card, and why


def _shipped_cards(directory: Path) -> list[Card]:
    cards = []
    for path in sorted(directory.rglob("*.toml")):
        try:
            cards.append(parse_card(path))
        except CardError as exc:
            UNREADABLE[str(path)] = str(exc)  # failed by test_every_card_a_plugin_ships_validates
    return cards


EXAMPLES, CARDS = _discover()


def test_every_card_a_plugin_ships_validates():
    assert UNREADABLE == {}


def _example_specs(kind: str) -> list:
    """``(name, example)`` for every registered ``kind`` ("latent family" or "regularizer"): the ``example``
    its class declares, None where it declares none; ``{}`` where the kind's parts size themselves (a net, a
    likelihood) and the class declares none."""
    plugins.reset()
    try:
        parts = registry(kind)
        default = {} if kind in ("net", "likelihood") else None
        return [pytest.param(name, getattr(parts[name], "example", default), id=name) for name in sorted(parts)]
    finally:
        plugins.reset()


def example_arguments() -> list:
    """``(architecture, model arguments)``: the ``vae`` specs of tests/kit.py, then every architecture built
    from its first example card. An architecture without one gets a parameter that fails, asking for a card."""
    params = [pytest.param("vae", spec, id=f"vae-{name}") for name, spec in VAE_SPECS.items()]
    for architecture, cards in sorted(EXAMPLES.items()):
        if architecture == "vae" and not cards:
            continue
        card = cards[0] if cards else None
        params.append(pytest.param(architecture, {} if card else None,  # {}: the kit builds the first card
                                   id=f"{architecture}-{card.name if card else 'no-card'}"))
    return params


def _require_arguments(architecture: str, arguments: dict | None) -> dict:
    if arguments is None:
        pytest.fail(f"architecture '{architecture}' has no zoo card to take model arguments from; "
                    f"add a card (or an example in tests/kit.py) so that it is tested")
    return arguments


@pytest.mark.parametrize("architecture, arguments", example_arguments())
def test_architecture(architecture, arguments):
    testing.check_architecture(architecture, train=False, **_require_arguments(architecture, arguments))


@pytest.mark.slow
@pytest.mark.parametrize("architecture, arguments", example_arguments())
def test_architecture_trains(architecture, arguments):
    testing.check_architecture(architecture, **_require_arguments(architecture, arguments))


def test_mlp_nets_without_hidden_layers_are_linear():
    """``hidden = []``: the encoder's features are the flattened image, the decoder is one linear layer."""
    nets = {"encoder": {"type": "mlp_encoder", "hidden": []}, "decoder": {"type": "mlp_decoder", "hidden": []}}
    model = testing.check_architecture("vae", train=False, **{**GAUSSIAN_MLP_RGB, **nets})
    images = torch.rand(2, 3, 16, 16)
    assert model.encoder.out_features == 3 * 16 * 16
    assert torch.equal(model.encoder(images), images.flatten(1))
    layers = [m for m in model.decoder.net.modules() if not isinstance(m, torch.nn.Sequential)]
    assert [type(m) for m in layers] == [torch.nn.Linear]


def test_every_architecture_is_covered():
    """The discovered architectures include the core's composable ``vae`` and the built-in plugins' ones."""
    assert "vae" in EXAMPLES
    assert {card.architecture for card in CARDS.values()} <= set(EXAMPLES)


def _require_example(kind: str, name: str, example: dict | None) -> dict:
    if example is None:
        plugin = registry(kind).plugin_of(name)
        pytest.fail(f"{kind} '{name}' of plugin '{plugin}' has no example spec; set the class attribute "
                    f"'example' (the keyword arguments of vaezoo.testing.check_{kind.replace(' ', '_')} for a "
                    f"small instance) so that it is tested")
    return copy.deepcopy(example)


@pytest.mark.parametrize("name, example", _example_specs("latent family"))
def test_latent_family(name, example):
    testing.check_latent_family(name, train=False, arguments=_require_example("latent family", name, example))


@pytest.mark.slow
@pytest.mark.parametrize("name, example", _example_specs("latent family"))
def test_latent_family_trains(name, example):
    testing.check_latent_family(name, arguments=_require_example("latent family", name, example))


@pytest.mark.parametrize("name, example", _example_specs("regularizer"))
def test_regularizer(name, example):
    example = _require_example("regularizer", name, example)
    testing.check_regularizer(name, latent=example.pop("latent", None), train=False, arguments=example)


@pytest.mark.slow
@pytest.mark.parametrize("name, example", _example_specs("regularizer"))
def test_regularizer_trains(name, example):
    example = _require_example("regularizer", name, example)
    testing.check_regularizer(name, latent=example.pop("latent", None), arguments=example)


@pytest.mark.parametrize("name, example", _example_specs("net"))
def test_net(name, example):
    testing.check_net(name, **example)


@pytest.mark.parametrize("name, example", _example_specs("likelihood"))
def test_likelihood(name, example):
    testing.check_likelihood(name, **example)


def test_a_part_without_an_example_fails_asking_for_one(site):
    install_plugin(site, "bare", "import vaezoo\n\n\n@vaezoo.hookimpl\n"
                                 "def vaezoo_register_latent_families(register):\n"
                                 "    from vaezoo.latents import LatentFamily\n\n"
                                 "    register('bare', type('Bare', (LatentFamily,), {}))\n")
    with pytest.raises(pytest.fail.Exception, match="latent family 'bare' of plugin 'bare' has no example spec; "
                                                     "set the class attribute 'example'"):
        _require_example("latent family", "bare", registry("latent family")["bare"].example)


def test_every_core_part_is_covered():
    """The core's own families and regularizers are among the discovered parameters."""
    families = {param.values[0] for param in _example_specs("latent family")}
    regularizers = {param.values[0] for param in _example_specs("regularizer")}
    assert {"gaussian", "gumbel_categorical", "joint"} <= families
    assert {"beta", "capacity", "total_correlation"} <= regularizers
    nets = {p.values[0] for p in _example_specs("net")}
    assert {"conv_encoder", "conv_decoder", "mlp_encoder", "mlp_decoder"} <= nets
    assert {"bernoulli", "gaussian"} <= {p.values[0] for p in _example_specs("likelihood")}


@pytest.mark.parametrize("name", sorted(CARDS))
def test_card(name):
    """Every zoo card passes the kit (weights verified and loaded) and ``vaezoo.load`` gives that model."""
    checked = testing.check_card(name)
    model = vaezoo.load(name, pretrained=CARDS[name].weights is not None)
    assert not model.training and model.card.name == name
    assert model.state_dict().keys() == checked.state_dict().keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in checked.state_dict().items())


def test_unknown_model_name_lists_close_matches():
    if not CARDS:
        pytest.fail("the zoo has no cards")
    name = sorted(CARDS)[0]
    with pytest.raises(UnknownNameError, match=f"Did you mean '{name}'"):
        vaezoo.load(name[:-1] + "x")
