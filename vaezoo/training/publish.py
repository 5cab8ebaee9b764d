"""Publishing a finished run: its weights and its completed card, in a folder that loads like a zoo entry.

The run's folder (``out``) ends holding ``checkpoint.pt``, ``NAME.safetensors`` and ``NAME.toml``, one
card, so ``vaezoo.load("OUT")`` and every command that takes a model accept the folder, and
``VAEZOO_CARDS_PATH=OUT`` lists the run beside the zoo. ``NAME`` is never a built-in zoo entry's name.

A finished run never loses its work: the weights and a card without metrics are written before anything is
evaluated; a metric that fails is left off the card, with one line on stderr naming it and the command that
measures it again. The card is the run's own: nothing measured on the card it was trained from (metrics,
their notes and spreads over seeds, plugins' card sections such as label matchings) is copied; the model's
own sections (:meth:`vaezoo.model.VAE.card_sections`) are measured again on the run's own model.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.entries.catalog import card_reference, new_card_name, parse_card
from vaezoo.entries.entry import weights_file, write_entry
from vaezoo.entries.schema import Card
from vaezoo.errors import PublishWarning, VaezooError
from vaezoo.locks import card_lock

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
    return new_card_name(f"{card.name}-run" if name is None else name, "the run's card")


def publish(card: Card, model: VAE, out: Path, name: str, steps: int, data_root=None, device=None,
            evaluate: bool = True) -> Path:
    """Write ``model``'s weights (the card's JSON in their header) and its own card, then evaluate it.

    Args:
        card: the card the run trained, with the recipe it ran.
        model: the trained model.
        out: the run's folder.
        name: the completed card's name (see :func:`run_name`).
        steps: the optimiser steps of the run.
        data_root: where the dataset lives, for the evaluation.
        device: where to evaluate (``"auto"`` too: :func:`vaezoo.devices.usable_device`).
        evaluate: False leaves the card without metrics, for ``vaezoo eval OUT --write`` to measure.

    Returns:
        The path of the completed card, ``out/NAME.toml``, beside ``out/NAME.safetensors``.
    """
    from vaezoo.devices import usable_device
    from vaezoo.evaluate import as_metrics, eval_command, failure
    from vaezoo.evaluate import evaluate as measure  # renamed: ``evaluate`` is this function's argument

    device = usable_device(device)  # the model's card sections get the device it stands for
    own = own_card(card, model, name, steps)
    with card_lock(Path(out) / f"{name}.toml"):  # a reader of the run's last card waits for the new pair
        written = write_entry(own, model.state_dict(), out)  # the run's work is safe before anything is evaluated
    if not evaluate:
        return written
    ref = card_reference(own, out)

    def failed(metric: str, exc: Exception) -> None:
        warnings.warn(f"{failure(metric, exc)}; the card is written without it; measure it again with: "
                      f"{eval_command(ref, data_root, [metric])}", PublishWarning, stacklevel=2)

    results = measure(model, own, data_root, device, on_error=failed)
    sections = {}
    try:
        sections = model.card_sections(own, ref, data_root, device)
    except Exception as exc:  # noqa: BLE001 - the run keeps its weights whatever a plugin's model raises
        warnings.warn(f"measuring the model's card sections failed ({type(exc).__name__}: {exc}); the card is "
                      f"written without them", PublishWarning, stacklevel=2)
    metrics = as_metrics(own, results, data_root, ref=ref)

    with card_lock(written):  # what 'vaezoo eval --write' recorded on the card meanwhile stays
        now = parse_card(written)
        measured = {**now.metrics, **metrics}
        return write_entry(now.model_copy(update={
            "metrics": measured, "sections": {**now.sections, **sections},
            "headline": own.headline if own.headline in measured else None}), model.state_dict(), out)


def published(out: Path, name: str, steps: int) -> Path | None:
    """``out/NAME.toml`` if it is the card :func:`publish` completed for the run's ``steps`` (its metrics
    measured, its weights beside it), else None.

    A finished run that is resumed keeps that card as it is, with whatever was recorded on it since
    (``vaezoo eval --write``); a run whose publishing was cut short is published again.
    """
    path = Path(out) / f"{name}.toml"
    try:
        card = parse_card(path)
        complete = card.train.steps == steps and bool(card.metrics) and weights_file(card) is not None
    except (OSError, VaezooError):
        return None
    return path if complete else None


def own_card(card: Card, model: VAE, name: str, steps: int) -> Card:
    """The run's own card, before evaluation: ``card``'s recipe and model under ``name``, what the run did
    (``steps``, the latent layout, the parameter count), and nothing measured on ``card``."""
    from vaezoo.version import __version__

    return card.model_copy(update={"name": name, "train": card.train.model_copy(update={"steps": steps}),
                                   "vaezoo_version": __version__, "latent": model.latent.layout(),
                                   "parameters": sum(p.numel() for p in model.parameters()),
                                   "metrics": {}, "sections": {}, "weights": None})
