"""From what a user names (a zoo name, a card file, a folder holding a card, a Hub repository) to a verified,
pretrained model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vaezoo.assemble import build_model as _build_model
from vaezoo.assemble import load_model
from vaezoo.entries.catalog import get_card
from vaezoo.entries.schema import Card

if TYPE_CHECKING:
    import torch

    from vaezoo.model import VAE


def build_model(card: Card | str | Path, device: str | torch.device | None = None,
                dtype: torch.dtype | None = None, **model: Any) -> VAE:
    """Build the model a card describes, with freshly initialised weights.

    Args:
        card: a :class:`~vaezoo.entries.schema.Card`, a zoo name, a card's TOML file or a folder holding one card.
        device: where to put the model (``"cpu"``, ``"cuda"``, ..., ``"auto"``: the first accelerator this
            machine has, else the CPU).
        dtype: floating-point type of the parameters.
        model: arguments of the architecture over the card's ``[model]`` (``continuous=5``,
            ``temperature=0.5``), as timm's ``create_model(name, **kwargs)``; the card of the model built then
            holds them, and nothing measured on the card's own model.

    Returns:
        The :class:`~vaezoo.model.VAE` in training mode, with its card as ``model.card``.
    """
    card = card if isinstance(card, Card) else get_card(card)
    return _build_model(_with_model(card, model) if model else card, device=device, dtype=dtype)


def _with_model(card: Card, model: dict[str, Any]) -> Card:
    """``card`` describing its architecture built with ``model`` over its ``[model]``: another model, which has
    no weights and nothing measured yet."""
    return card.model_copy(update={"model": {**card.model, **model}, "weights": None, "metrics": {},
                                   "sections": {}, "headline": None})


def load(name: str | Path, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
         pretrained: bool = True, **model: Any) -> VAE:
    """Load a model, in eval mode, with its weights verified by sha256.

    Args:
        name: a zoo name (``"jointvae-mnist"``), a card's TOML file, a folder holding one card (e.g. the
            ``--out`` folder of ``vaezoo train``), or a Hugging Face Hub repository, ``hf-hub:OWNER/REPO`` or
            ``hf-hub:OWNER/REPO@REVISION`` (:func:`vaezoo.from_pretrained` takes the options of the Hub's).
        device: where to put the model (``"cpu"``, ``"cuda"``, ``torch.device``; ``"auto"``: the first
            accelerator this machine has, else the CPU); default CPU.
        dtype: floating-point type of the parameters: ``torch.float32`` (default), ``float64``, ``float16`` or
            ``bfloat16``; :meth:`~vaezoo.model.VAE.encode` converts images of any float dtype to it.
        pretrained: load the card's weights; False gives a freshly initialised model, in training mode.
        model: with ``pretrained=False``, arguments of the architecture over the card's ``[model]``, as
            :func:`build_model` takes them.

    Returns:
        The :class:`~vaezoo.model.VAE`, with its card as ``model.card``.

    Raises:
        UnknownNameError, CardError: as :func:`vaezoo.entries.catalog.get_card`.
        DeviceError: ``device`` is not one this machine has (``"cuda"`` on a machine without a GPU).
        DtypeError: ``dtype`` is not one of those four (``torch.complex64``, an integer type).
        WeightsError: the card has no weights, or its file is missing or fails its sha256.
        TypeError: ``model`` arguments with ``pretrained=True``.
    """
    if model and pretrained is not False:
        raise TypeError(f"arguments {', '.join(model)} change the model the card's weights were trained as; give them "
                        f"with pretrained=False for a freshly initialised model")
    card = get_card(name)
    return load_model(_with_model(card, model) if model else card, device=device, dtype=dtype, pretrained=pretrained)
