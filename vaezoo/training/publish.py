"""Publishing a finished run: its weights and its completed card, in a folder that loads like a zoo entry.

The run's folder (``out``) ends holding ``checkpoint.pt``, ``NAME.safetensors`` and ``NAME.toml``, one
card, so ``vaezoo.load("OUT")`` and every command that takes a model accept the folder, and
``VAEZOO_CARDS_PATH=OUT`` lists the run beside the zoo. ``NAME`` is never a built-in zoo entry's name.

A run that ``--max-steps`` stops short writes its weights and card too, the card marked as stopped (its
``train.steps`` and summary); the run resumed to its end publishes over them.

A finished run never loses its work: the weights and a card without metrics are written before anything is
evaluated (then :mod:`vaezoo.training.train` records its metrics as ``vaezoo eval OUT --write`` does). The
card is the run's own: nothing measured on the card it was trained from (metrics, their notes and spreads over
seeds, plugins' card sections such as label matchings) is copied; the model's own sections
(:meth:`vaezoo.model.VAE.card_sections`) are measured again on the run's own model. A resumed run that writes its
card anew (new weights: an extended run) warns of what its card held that the new one does not (:func:`dropped`):
its metrics are measured again, but a hand's edits, notes and spreads over seeds are not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

# The run's end edits its card (update_card, through toml_update): imported with the run, before its first step, so
# that pip replacing vaezoo under a long run cannot take the module away.
from vaezoo.entries import toml_update  # noqa: F401
from vaezoo.entries.catalog import new_card_name, parse_card
from vaezoo.entries.entry import weights_file, write_entry
from vaezoo.entries.schema import Card
from vaezoo.errors import Phrase, VaezooError
from vaezoo.store.locks import card_lock

if TYPE_CHECKING:
    from vaezoo.model import VAE


STOPPED_NOTE = "Stopped at step {steps:,} of {total:,} (--max-steps): not the finished run; resume it with --resume. "
"""The note :func:`own_card` puts before the summary of a run stopped short of its last step."""

STOPPED = re.compile("^(" + r"[\d,]+".join(map(re.escape, re.split(r"\{\w+:,\}", STOPPED_NOTE))) + ")+")
"""The notes :data:`STOPPED_NOTE` at the start of a summary, its numbers whatever they are."""


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
    if name is None:
        return new_card_name(f"{card.name}-run", "the run's card", given=False)
    return new_card_name(name, "the run's card")


def publish(card: Card, model: VAE, out: Path, name: str, steps: int, total: int | None = None) -> Path:
    """Write ``model``'s weights (the card's JSON in their header) and its own card, without metrics: the run's
    work is safe before anything is evaluated. The one recorder then measures them
    (:func:`vaezoo.evaluation.report.evaluate_card` with ``write=True``, as ``vaezoo eval OUT --write``).

    Args:
        card: the card the run trained, with the recipe it ran.
        model: the trained model.
        out: the run's folder.
        name: the completed card's name (see :func:`run_name`).
        steps: the optimiser steps of the run.
        total: the run's last step, where ``steps`` stopped short of it (``--max-steps``); None for a finished run.

    Returns:
        The path of the run's card, ``out/NAME.toml``, beside ``out/NAME.safetensors``.
    """
    own = own_card(card, model, name, steps, total)
    with card_lock(Path(out) / f"{name}.toml"):  # a reader of the run's last card waits for the new pair
        return write_entry(own, model.state_dict(), out, fix=Phrase("make room, then continue with {resume:True}"))


def published(out: Path, name: str, steps: int, stopped: bool = False) -> Path | None:
    """``out/NAME.toml`` if it is the card :func:`publish` completed for the run's ``steps`` (its metrics
    measured, its weights beside it), else None; for a run ``stopped`` short of its last step, the card of its
    weights at ``steps``, which holds no metrics of its own.

    A run resumed with no step to make keeps that card as it is, with whatever was recorded on it since
    (``vaezoo eval --write``); a run whose publishing was cut short is published again.
    """
    path = Path(out) / f"{name}.toml"
    try:
        card = parse_card(path)
        complete = card.train.steps == steps and (stopped or bool(card.metrics)) and weights_file(card) is not None
    except (OSError, VaezooError):
        return None
    return path if complete else None


def previous_card(out: Path, name: str) -> Card | None:
    """The card a run published before in ``out`` (``out/NAME.toml``), as it is now; None when there is none that
    reads."""
    try:
        return parse_card(Path(out) / f"{name}.toml")
    except (OSError, VaezooError):
        return None


_WRITTEN_FIELDS = ("summary", "headline", "paper", "license", "eval_metrics", "eval_settings", "input")
"""The fields of a run's card that its training card gives and a hand may edit since."""


def dropped(old: Card, new: Card) -> list[str]:
    """What the run's card ``old`` held that the card ``new`` published over it does not, in words: a field of
    :data:`_WRITTEN_FIELDS` edited (a headline, a summary), a metric ``new`` does not hold, a metric's note or spread
    over seeds; a metric's value measured again (new weights make the old one stale) is not named."""
    found = [f"its {field}" for field in _WRITTEN_FIELDS
             if _unstopped(field, getattr(old, field)) != _unstopped(field, getattr(new, field))]
    for metric, held in old.metrics.items():
        now = new.metrics.get(metric)
        if now is None:
            found.append(f"metric '{metric}'")
            continue
        if held.note is not None and held.note != now.note:
            found.append(f"the note of metric '{metric}'")
        if held.seeds is not None and now.seeds is None:
            found.append(f"the spread over seeds of metric '{metric}'")
    return found


def _unstopped(field: str, value: object) -> object:
    """A summary without the notes :data:`STOPPED` finds: a stopped run's card says so, its finished card not."""
    return STOPPED.sub("", value) if field == "summary" and isinstance(value, str) else value


def own_card(card: Card, model: VAE, name: str, steps: int, total: int | None = None) -> Card:
    """The run's own card, before evaluation: ``card``'s recipe and model under ``name``, what the run did
    (``steps``, the latent layout, the parameter count of the model alone and of each training-only part, the
    distributions and versions of the plugins whose code it used), and nothing measured on ``card``. A run stopped
    short of its last step ``total`` says so first in its summary: its recipe still names the whole run, and
    ``train.steps`` the steps it made."""
    from vaezoo.assemble import third_party_plugins
    from vaezoo.version import __version__

    summary = STOPPED.sub("", card.summary)  # a card trained from a stopped run's card is not stopped itself
    if total is not None and steps < total:
        summary = STOPPED_NOTE.format(steps=steps, total=total) + summary
    return card.model_copy(update={"name": name, "summary": summary,
                                   "train": card.train.model_copy(update={"steps": steps}),
                                   "vaezoo_version": __version__, "latent": model.latent.layout(),
                                   "parameters": sum(p.numel() for p in model.parameters()),
                                   "training_parameters": {name: sum(p.numel() for p in part.parameters())
                                                           for name, part in model.training_parts().items()} or None,
                                   "plugins": {info.distribution: info.version
                                               for info in third_party_plugins(card, model)} or None,
                                   "metrics": {}, "sections": {}, "weights": None})
