"""The conventions of huggingface_hub's ``PyTorchModelHubMixin`` and timm, as thin layers over vaezoo's own path.

``save_pretrained(model, DIR)`` writes the folder ``vaezoo push`` uploads (card, weights, ``config.json``,
``README.md``); ``vaezoo.from_pretrained(NAME)`` reads it back;
``push_to_hub(model, OWNER/REPO)`` uploads that folder as ``vaezoo push`` does.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.entries.schema import Card
from vaezoo.errors import OutputError
from vaezoo.store.paths import home_path

if TYPE_CHECKING:
    from collections.abc import Callable

    from huggingface_hub import CommitInfo
    from torch import nn

    from vaezoo.model import VAE, VAEOutput


def save_pretrained(model: VAE | nn.Module | Callable[..., VAEOutput], directory: str | os.PathLike,
                    repo_id: str | None = None) -> list[Path]:
    """Write ``model`` as a folder that :func:`from_pretrained` and :func:`vaezoo.load` read back.

    When the model's parameters are still its card's weights, the card's verified file is written byte for byte
    and the card keeps its metrics. Where that file cannot be had again (offline, its cache emptied), the
    parameters :func:`vaezoo.load` read from it are written, and the card keeps its metrics as long as they are
    unchanged. Otherwise the model's current parameters are written, and the card loses what was measured on
    other weights (metrics, plugins' card sections such as label matchings, headline): ``vaezoo eval DIR --write``
    measures them.

    As huggingface_hub's ``save_pretrained`` does, the files of a model saved there before are replaced, and a
    ``README.md`` the folder already holds is kept, unless it is one vaezoo wrote and nobody has edited since
    (which describes the card it replaces: it is written again).

    Args:
        model: a model with a card (one from :func:`vaezoo.load` or :func:`vaezoo.build_model`).
        directory: the folder (created if needed; ``~`` is the home folder); it may hold no other card than the
            model's.
        repo_id: ``OWNER/REPO`` the folder is meant for, named in the README's usage lines.

    Returns:
        The files written: ``NAME.toml``, ``NAME.safetensors``, ``config.json``, and ``README.md`` unless the folder
        had one of its own.

    Raises:
        OutputError: the model has no card, the folder is given as an empty path, holds another card, is in
            huggingface_hub's cache, or cannot be written; or the Hub would refuse ``repo_id`` as a repository's name.
        VaezooError: ``vaezoo train`` is training into the folder.
        CardError: the model's card would not load back (a name that is no card name, given with ``model_copy``);
            nothing is written.
        TypeError: ``model`` is not a vaezoo model (one compiled or wrapped in ``DataParallel`` is),
            ``directory`` is not a string or a path, or ``repo_id`` is not a string.
    """
    from vaezoo.entries.catalog import check_card
    from vaezoo.entries.huggingface import hub
    from vaezoo.extras.hub_push import check_repo_id, write_folder
    from vaezoo.store.files import folder_problem, remove_temporaries
    from vaezoo.store.locks import RUN_LOCK, card_lock, card_lock_file, folder_lock, run_lock

    huggingface_hub = hub(OutputError, "save_pretrained")  # the README is a Hub model card
    model = _unwrapped(model)
    card = _card_of(model)
    if not isinstance(directory, str | os.PathLike):
        raise TypeError(f"save_pretrained writes into a folder, a string or a path, not {type(directory).__name__}")
    if repo_id is not None:  # the README's usage lines and recorded commands name it
        if not isinstance(repo_id, str):
            raise TypeError(f"save_pretrained's repo_id is OWNER/REPO, a string, not {type(repo_id).__name__}")
        check_repo_id(repo_id)
    if not os.fspath(directory).strip():
        raise OutputError("save_pretrained needs a folder, not an empty path (which would be the current folder)")
    check_card(card)  # its name becomes the files' names: refused before anything is written
    folder = home_path(directory)  # '~/mine' in the home folder, not a folder named '~' here
    try:
        _refuse_hub_cache(folder, card, Path(huggingface_hub.constants.HF_HUB_CACHE))
        # a run's folder holds the lock 'vaezoo train' keeps while it trains there: refused at once while it does
        training = run_lock(folder, "folder") if (folder / RUN_LOCK).exists() else nullcontext()
        with folder_lock(folder), training:  # another process saving into it finishes first, then is seen here
            others = sorted(p.name for p in folder.glob("*.toml") if p.name != f"{card.name}.toml") \
                if folder.is_dir() else []
            if others:
                raise OutputError(f"{folder} already holds {', '.join(others)}; a model's folder holds no TOML "
                                  f"file but its card: give a new or empty folder")
            data = _card_weights(card, model)
            card_path = folder / f"{card.name}.toml"
            # where 'vaezoo eval DIR --write' has taken the card's lock, an update under way finishes first (and
            # is kept, or then sees the new weights); none is made here: a file in the folder is uploaded with it
            with card_lock(card_path) if card_lock_file(card_path).exists() else nullcontext():
                # a killed save's: the folder is uploaded whole
                remove_temporaries(*(folder / name for name in (card_path.name, f"{card.name}.safetensors",
                                                                "config.json", "README.md")))
                if data is None and not _as_loaded(model):
                    card = card.model_copy(update={"metrics": {}, "sections": {}, "headline": None})
                else:
                    card = _with_recorded(card, card_path)
                return write_folder(card, model.state_dict() if data is None else data, folder, repo_id,
                                    readme=_readme_is_vaezoos(folder / "README.md"))
    except (OSError, ValueError) as exc:  # ValueError: a path holding a NUL character
        problem = folder_problem(folder, exc) if isinstance(exc, OSError) else str(exc)
        raise OutputError(f"cannot save to {folder}: {problem}; choose another folder") from None


def _refuse_hub_cache(folder: Path, card: Card, cache: Path) -> None:
    """Refuse ``folder`` in huggingface_hub's cache ``cache``, or the snapshot ``card`` was downloaded into: a
    snapshot's files stand for its commit, and saved over, ``hf-hub:OWNER/REPO@COMMIT`` would load other weights."""
    where = Path(os.path.realpath(folder))
    snapshot = card.source is not None and card.path is not None and where == Path(os.path.realpath(card.path.parent))
    if snapshot or where.is_relative_to(os.path.realpath(cache)):
        raise OutputError(f"{folder} is in huggingface_hub's cache, whose files are a Hub repository's at a commit; "
                          f"save into another folder")


def _unwrapped(model: object) -> VAE:
    """``model`` out of the wrappers a training script puts around it, as timm's ``unwrap_model`` takes it out:
    torch.compile's and ``DataParallel``'s or ``DistributedDataParallel``'s, whose state dicts' names carry a
    prefix.

    Raises:
        TypeError: there is no vaezoo model inside.
    """
    from torch import nn

    from vaezoo.model import VAE

    while True:
        if isinstance(model, nn.DataParallel | nn.parallel.DistributedDataParallel):
            model = model.module
        elif hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif not isinstance(model, VAE):  # None or a torch module was said to be "built from parts"
            raise TypeError(f"save_pretrained saves a vaezoo model (vaezoo.load or vaezoo.build_model gives one), not "
                            f"{type(model).__name__}")
        else:
            return model


def _card_of(model: VAE) -> Card:
    card = getattr(model, "card", None)
    if card is None:
        raise OutputError("this model has no card (it was built from parts); build it from a card with "
                          "vaezoo.build_model or vaezoo.load to save it")
    return card


def _readme_is_vaezoos(path: Path) -> bool:
    """Whether ``save_pretrained`` writes the README at ``path``: there is none, or the one there is what vaezoo
    wrote there before, unedited (it describes the card it replaces)."""
    from vaezoo.extras.hub_card import written_by_vaezoo

    try:
        return not os.path.lexists(path) or (path.is_file() and written_by_vaezoo(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        return False


def _with_recorded(card: Card, path: Path) -> Card:
    """``card`` with what the card file at ``path`` recorded since ``card`` was read (``vaezoo eval --write``),
    when that file is of the same weights; else ``card``."""
    from vaezoo.entries.catalog import parse_card
    from vaezoo.errors import CardError

    try:
        now = parse_card(path) if path.is_file() else None
    except CardError:
        return card
    if now is None or card.weights is None or now.weights is None or (now.weights.sha256, now.weights.size) != (
            card.weights.sha256, card.weights.size):
        return card
    return card.model_copy(update={
        "metrics": {**card.metrics, **now.metrics}, "sections": {**card.sections, **now.sections},
        "eval_metrics": card.eval_metrics + [n for n in now.eval_metrics if n not in card.eval_metrics],
        "eval_settings": {**card.eval_settings, **now.eval_settings},
        "headline": card.headline or now.headline})


def _card_weights(card: Card, model: VAE) -> bytes | None:
    """The card's verified weights file when ``model``'s parameters are exactly its tensors; else None."""
    import torch

    from vaezoo.entries.entry import fetch_verified
    from vaezoo.errors import WeightsError
    from vaezoo.store.weights import parse_safetensors

    if card.weights is None:
        return None
    try:
        path, data = fetch_verified(card)
    except WeightsError:  # not to be had here: the model's own parameters are written
        return None
    stored, current = parse_safetensors(data, path), model.state_dict()
    same = stored.keys() == current.keys() and all(
        stored[k].dtype == current[k].dtype and torch.equal(stored[k], current[k].detach().cpu()) for k in stored)
    return data if same else None


def _as_loaded(model: VAE) -> bool:
    """Whether ``model``'s parameters are still those :func:`vaezoo.load` read from its card's weights, as they
    were loaded (dtype included), wherever they are now: true even where that file cannot be had again."""
    from vaezoo.store.weights import tensors_digest

    return model.weights_digest is not None and model.weights_digest == tensors_digest(model.state_dict())


def push_to_hub(model: VAE | nn.Module | Callable[..., VAEOutput], repo_id: str, *, private: bool = False,
                token: str | bool | None = None,
                commit_message: str | None = None, revision: str | None = None) -> CommitInfo:
    """Upload ``model`` to ``repo_id`` as :func:`save_pretrained` writes it, in one commit, as ``vaezoo push`` does.

    Args:
        model: a model with a card.
        repo_id: ``OWNER/REPO`` (created if needed).
        private: create the repository private.
        token: a Hub token allowed to write there (default: the one logged in).
        commit_message: default ``vaezoo push NAME``.
        revision: the branch to commit to, created from ``main`` if needed (default ``main``).

    Returns:
        huggingface_hub's ``CommitInfo``: ``hf-hub:OWNER/REPO@{info.oid}`` loads exactly what was pushed.

    Raises:
        OutputError: the model has no card, huggingface_hub is missing, the network is kept off
            (``VAEZOO_OFFLINE=1``, ``HF_HUB_OFFLINE=1``), or the Hub refused.
        TypeError: ``model`` is not a vaezoo model (one compiled or wrapped in ``DataParallel`` is), or ``repo_id``
            is not a string.
    """
    from vaezoo.extras.hub_push import refuse_offline, upload

    card = _card_of(_unwrapped(model))
    if not isinstance(repo_id, str):
        raise TypeError(f"push_to_hub takes the repository 'OWNER/REPO', a string, not {type(repo_id).__name__}")
    refuse_offline(card.name, repo_id, "vaezoo.save_pretrained")  # before the folder is staged
    with tempfile.TemporaryDirectory(prefix="vaezoo-push-") as tmp:  # the folder's lock file goes inside it, with it
        files = save_pretrained(model, Path(tmp) / "model", repo_id)
        return upload(files, repo_id, commit_message or f"vaezoo push {card.name}", private, token, revision)
