"""Publishing a finished run: its weights and its completed card, in a folder that loads like a zoo entry.

The run's folder (``out``) ends holding ``checkpoint.pt``, ``NAME.safetensors`` and ``NAME.toml``, one
card, so ``vaezoo.load("OUT")`` and every command that takes a model accept the folder, and
``VAEZOO_CARDS_PATH=OUT`` lists the run beside the zoo. ``NAME`` is never a built-in zoo entry's name.

A finished run never loses its work: the weights and a card without metrics are written before anything is
evaluated; a metric that fails is left off the card, with one line on stderr naming it and the command that
measures it again. The card is the run's own: nothing measured on the card it was trained from (metrics,
their notes and spreads over seeds, label matchings) is copied; the model's label matching, if it has one,
is measured again on the run's own model.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.cards import Card, Weights, card_reference, new_card_name, write_card
from vaezoo.errors import PublishWarning

if TYPE_CHECKING:
    from vaezoo.model import VAE


def run_name(card: Card, name: str | None = None) -> str:
    """The name of the card a run of ``card`` publishes: ``name``, or by default ``CARD-run``.

    Args:
        card: the card the run trains.
        name: the name asked for, or None for the default.

    Returns:
        The name.

    Raises:
        CardError: the name is not a card name, or it is a built-in zoo entry's (the run's card would be
            skipped beside the zoo, and ``vaezoo.load(NAME)`` would give the zoo's model).
    """
    return new_card_name(f"{card.name}-run" if name is None else name, "the run's card", "--name ")


def publish(card: Card, model: VAE, out: Path, name: str, steps: int, data_root=None, device=None) -> Path:
    """Write ``model``'s weights (the card's JSON in their header) and its own card, then evaluate it.

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
    from vaezoo.evaluate import as_metrics, eval_command, evaluate

    own = own_card(card, model, name, steps)
    write_run(own, model, out)  # the run's work is safe before anything is evaluated
    ref = card_reference(own, out)

    def failed(metric: str, exc: Exception) -> None:
        warnings.warn(f"{metric} failed ({type(exc).__name__}: {exc}); the card is written without it; measure it "
                      f"again with: {eval_command(ref, data_root, [metric])}", PublishWarning, stacklevel=2)

    results = evaluate(model, own, data_root, device, on_error=failed)
    labels = None
    try:
        labels = model.label_matching(own, ref, data_root, device)
    except Exception as exc:  # noqa: BLE001 - the run keeps its weights whatever a plugin's model raises
        warnings.warn(f"the label matching failed ({type(exc).__name__}: {exc}); the card is written without "
                      f"[labels]", PublishWarning, stacklevel=2)
    metrics = as_metrics(own, results, data_root, ref=ref)
    headline = own.headline if own.headline in metrics else None
    return write_run(own.model_copy(update={"metrics": metrics, "labels": labels, "headline": headline}), model, out)


def own_card(card: Card, model: VAE, name: str, steps: int) -> Card:
    """The run's own card, before evaluation: ``card``'s recipe and model under ``name``, what the run did
    (``steps``, the latent layout, the parameter count), and nothing measured on ``card``."""
    from vaezoo.version import __version__

    return card.model_copy(update={"name": name, "train": card.train.model_copy(update={"steps": steps}),
                                   "vaezoo_version": __version__, "latent": model.latent.describe(),
                                   "parameters": sum(p.numel() for p in model.parameters()),
                                   "metrics": {}, "labels": None, "weights": None})


def write_run(card: Card, model: VAE, out: Path) -> Path:
    """Write ``out/NAME.safetensors`` (``card`` in its header) and ``out/NAME.toml``; return the card's path.

    The folder then loads like a zoo entry; ``vaezoo eval OUT --write`` adds the card's metrics.
    """
    from vaezoo.checksums import sha256_of
    from vaezoo.weights import save_weights

    weights_path = out / f"{card.name}.safetensors"
    save_weights(model.state_dict(), weights_path, {"card": card.model_dump_json(exclude={"weights"})})
    card = card.model_copy(update={
        "weights": Weights(file=weights_path.name, sha256=sha256_of(weights_path), size=weights_path.stat().st_size),
    })
    card_path = out / f"{card.name}.toml"
    write_card(card, card_path)
    return card_path
