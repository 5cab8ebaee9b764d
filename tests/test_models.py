"""Tests driven by the registry (after timm's tests/test_models.py).

Every registered architecture and every zoo card is built, run forward and backward on a small batch,
checked for NaNs, and round-tripped through safetensors, by the conformance kit (vaezoo.testing) that
plugin authors run on their own parts. The parameters are discovered when the tests are
collected, so a new plugin's architecture or card is tested the day it is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vaezoo
from kit import VAE_SPECS
from vaezoo import plugins, testing
from vaezoo.cards import Card, discover, parse_card
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


@pytest.mark.parametrize("architecture, arguments", example_arguments())
def test_architecture(architecture, arguments):
    if arguments is None:
        pytest.fail(f"architecture '{architecture}' has no zoo card to take model arguments from; "
                    f"add a card (or an example in tests/kit.py) so that it is tested")
    testing.check_architecture(architecture, **arguments)


def test_every_architecture_is_covered():
    """The discovered architectures include the core's composable ``vae`` and the built-in plugins' ones."""
    assert "vae" in EXAMPLES
    assert {card.architecture for card in CARDS.values()} <= set(EXAMPLES)


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
