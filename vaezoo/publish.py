"""Publishing a finished run: its weights and its completed card, in a folder that loads like a zoo entry.

The run's ``--out`` folder ends holding ``checkpoint.pt``, ``NAME.safetensors`` and ``NAME.toml``, one
card, so ``vaezoo.load("OUT")`` and every command that takes a model accept the folder, and
``VAEZOO_CARDS_PATH=OUT`` lists the run beside the zoo. ``NAME`` is never a built-in zoo entry's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.cards import Card, Weights, new_card_name, write_card

if TYPE_CHECKING:
    from vaezoo.model import VAE


def run_name(card: Card, name: str | None = None) -> str:
    """The name of the card a run of ``card`` publishes: ``name``, or by default ``CARD-run``.

    Args:
        card: the card the run trains.
        name: the name asked for (``--name``), or None for the default.

    Returns:
        The name.

    Raises:
        CardError: the name is not a card name, or it is a built-in zoo entry's (the run's card would be
            skipped beside the zoo, and ``vaezoo.load(NAME)`` would give the zoo's model).
    """
    return new_card_name(f"{card.name}-run" if name is None else name, "the run's card", "--name ")


def publish(card: Card, model: VAE, out: Path, name: str, steps: int, data_root=None, device=None) -> Path:
    """Evaluate ``model`` and write its weights (the card's JSON in their header) and its completed card.

    Args:
        card: the card the run trained, with the recipe it ran.
        model: the trained model.
        out: the run's folder.
        name: the completed card's name (see :func:`run_name`).
        steps: the optimiser steps of the run.
        data_root: where the dataset lives, for the evaluation.
        device: where to evaluate.

    Returns:
        The path of the completed card, ``out/NAME.toml``, beside ``out/NAME.safetensors``.
    """
    from vaezoo import __version__
    from vaezoo.evaluate import as_metrics, evaluate
    from vaezoo.checksums import sha256_of
    from vaezoo.weights import save_weights

    card = card.model_copy(update={"name": name, "train": card.train.model_copy(update={"steps": steps}),
                                   "vaezoo_version": __version__, "latent": model.latent.describe(),
                                   "parameters": sum(p.numel() for p in model.parameters())})
    card = card.model_copy(update={"metrics": as_metrics(card, evaluate(model, card, data_root, device), data_root)})
    weights_path = out / f"{name}.safetensors"
    save_weights(model.state_dict(), weights_path, {"card": card.model_dump_json(exclude={"weights"})})
    card = card.model_copy(update={
        "weights": Weights(file=weights_path.name, sha256=sha256_of(weights_path), size=weights_path.stat().st_size),
    })
    card_path = out / f"{name}.toml"
    write_card(card, card_path)
    return card_path
