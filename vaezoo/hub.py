"""From a model's name to a verified, pretrained model on the user's device."""

from __future__ import annotations

import torch

from vaezoo.cards import Card, get_card
from vaezoo.errors import CardError, VaezooError, WeightsError
from vaezoo.model import VAE
from vaezoo.plugins import registry


def build_model(card: Card | str, device=None, dtype=None) -> VAE:
    """Build the model ``card`` describes, with freshly initialised weights.

    Args:
        card: a :class:`~vaezoo.cards.Card` or a zoo name.
        device: where to put the model (``"cpu"``, ``"cuda"``, ...).
        dtype: floating-point type of the parameters.
    """
    card = get_card(card) if isinstance(card, str) else card
    builder = registry("architecture")[card.architecture]
    try:
        model = builder(**card.model)
    except VaezooError:
        raise
    except Exception as exc:  # the card's values are input: whatever the builder trips on is the card's problem
        reason = (str(exc).strip().splitlines() or [""])[0]
        raise CardError(f"{card.path or card.name}: section 'model' does not fit architecture "
                        f"'{card.architecture}': {type(exc).__name__}: {reason}") from exc
    if not isinstance(model, VAE):
        plugin = registry("architecture").plugin_of(card.architecture)
        raise VaezooError(f"architecture '{card.architecture}' of plugin '{plugin}' returned "
                          f"{type(model).__name__}, not a vaezoo.model.VAE")
    model.card = card
    return model.to(device=device, dtype=dtype)


def load_weights(model: VAE, state_dict: dict[str, torch.Tensor], source: str) -> None:
    """Load ``state_dict`` into ``model``; a mismatch lists the missing and unexpected keys and shapes."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    shapes = [f"{k}: {tuple(state_dict[k].shape)} != {tuple(v.shape)}"
              for k, v in expected.items() if k in state_dict and state_dict[k].shape != v.shape]
    if missing or unexpected or shapes:
        parts = [f"missing keys {missing}" if missing else "", f"unexpected keys {unexpected}" if unexpected else "",
                 f"wrong shapes {shapes}" if shapes else ""]
        raise WeightsError(f"{source} does not fit the model: {'; '.join(p for p in parts if p)}")
    model.load_state_dict(state_dict)


def load(name: str, device=None, dtype=None, pretrained: bool = True) -> VAE:
    """Load a zoo model by name, in eval mode.

    Args:
        name: a card name, e.g. ``"jointvae-mnist"``.
        device: where to put the model (``"cpu"``, ``"cuda"``, ``torch.device``); default CPU.
        dtype: floating-point type of the parameters (e.g. ``torch.float16``).
        pretrained: load the card's weights, verified by sha256; False gives a fresh model.

    Returns:
        The :class:`~vaezoo.model.VAE`, with its card as ``model.card``.
    """
    card = get_card(name)
    model = build_model(card)
    if pretrained:
        from vaezoo.weights import load_state_dict

        load_weights(model, load_state_dict(card), f"weights of '{card.name}'")
    return model.to(device=device, dtype=dtype).eval()
