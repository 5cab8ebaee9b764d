"""From what a user names (a zoo name, a card file, a folder holding a card, a Hub repository) to a verified,
pretrained model; ``from_pretrained`` as huggingface_hub's ``PyTorchModelHubMixin`` names it."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from vaezoo.assemble import build_aside
from vaezoo.assemble import load_model
from vaezoo.context import truth_value
from vaezoo.entries.catalog import get_card
from vaezoo.entries.schema import HUB_PREFIX, Card
from vaezoo.errors import CardError, OutputError
from vaezoo.store.paths import home_path

if TYPE_CHECKING:
    import torch

    from vaezoo.model import VAE


def build_model(card: Card | str | Path, device: str | torch.device | None = None,
                dtype: torch.dtype | None = None, **model: Any) -> VAE[Card]:
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
        The :class:`~vaezoo.model.VAE` in training mode, with its card as ``model.card``: a card that keeps nothing
        measured on the card's weights (metrics, plugins' sections such as JointVAE's label matchings), as
        ``vaezoo.load(card, pretrained=False)`` gives it.
    """
    _refuse_other_spellings(model, "build_model")
    card = card if isinstance(card, Card) else get_card(card)
    return load_model(_with_model(card, model) if model else card, device=device, dtype=dtype, pretrained=False)


_OTHER_SPELLINGS = {"map_location": "device", "device_map": "device", "torch_dtype": "dtype"}
"""The keywords of torch.load and transformers for what vaezoo's loaders call ``device`` and ``dtype``."""


def _refuse_other_spellings(model: dict[str, Any], function: str) -> None:
    """Refuse, naming vaezoo's keyword, another library's keyword for a device or dtype among ``model``'s
    arguments (the card's architecture was said to take no such argument)."""
    for keyword, ours in _OTHER_SPELLINGS.items():
        if keyword in model:
            raise TypeError(f"{function} takes {ours}=, not {keyword}= (what torch.load or transformers call it)")


P = ParamSpec("P")
R = TypeVar("R")


def _naming_other_spellings(function: Callable[P, R]) -> Callable[P, R]:
    """``function``, refusing as :func:`_refuse_other_spellings` does another library's keyword for a device or
    dtype (for a function without ``**model``, which would otherwise say Python's "unexpected keyword argument");
    typed as ``function`` is, so that a type checker reads its signature."""
    @functools.wraps(function)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        _refuse_other_spellings(kwargs, function.__name__)
        return function(*args, **kwargs)
    return checked


def _with_model(card: Card, model: dict[str, Any]) -> Card:
    """``card`` describing its architecture built with ``model`` over its ``[model]``: another model, which has
    no weights, nothing measured yet, and no file (what does not fit it is not the file's)."""
    return Card.model_validate({**card.model_dump(), "model": {**card.model, **model}, "weights": None,
                                "metrics": {}, "sections": {}, "headline": None})


def load(name: str | os.PathLike[str], device: str | torch.device | None = None, dtype: torch.dtype | None = None,
         pretrained: bool = True, **model: Any) -> VAE[Card]:
    """Load a model, in eval mode, with its weights verified by sha256.

    Args:
        name: a zoo name (``"jointvae-mnist"``), a card's TOML file, a folder holding one card (e.g. the
            ``--out`` folder of ``vaezoo train``), or a Hugging Face Hub repository, ``hf-hub:OWNER/REPO`` or
            ``hf-hub:OWNER/REPO@REVISION`` (:func:`vaezoo.from_pretrained` takes the options of the Hub's).
        device: where to put the model (``"cpu"``, ``"cuda"``, ``torch.device``; ``"auto"``: the first
            accelerator this machine has, else the CPU); default CPU.
        dtype: floating-point type of the parameters: ``torch.float32``, ``float64``, ``float16`` or ``bfloat16``;
            default torch's default dtype (float32 unless ``torch.set_default_dtype`` changed it), as a
            ``torch.nn`` module's; :meth:`~vaezoo.model.VAE.encode` converts images of any float dtype to it.
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
        CardError: ``model`` arguments the card's architecture does not take.
        TypeError: ``model`` arguments with ``pretrained=True``; ``map_location``, ``device_map`` or ``torch_dtype``
            (another library's name for ``device`` or ``dtype``).
    """
    _refuse_other_spellings(model, "load")
    card = get_card(name)
    if model and pretrained is not False:
        build_aside(_with_model(card, model))  # an argument the architecture does not take is named as such first
        raise TypeError(f"arguments {', '.join(model)} change the model the card's weights were trained as; give them "
                        f"with pretrained=False for a freshly initialised model")
    return load_model(_with_model(card, model) if model else card, device=device, dtype=dtype, pretrained=pretrained)


@_naming_other_spellings
def from_pretrained(name: str | os.PathLike, *, revision: str | None = None,
                    cache_dir: str | os.PathLike | None = None, force_download: bool = False,
                    local_files_only: bool = False, token: str | bool | None = None,
                    device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> VAE[Card]:
    """Load a model as ``PyTorchModelHubMixin.from_pretrained`` does, through :func:`vaezoo.load`.

    ``name`` is a folder (as :func:`save_pretrained` writes it) when one exists by that name, else a Hub repository
    ``OWNER/REPO`` (or ``OWNER/REPO@REVISION``, ``hf-hub:OWNER/REPO``), else what :func:`vaezoo.load` takes (a zoo
    name, a card file). The Hub options are huggingface_hub's; the card's size and sha256 are checked whatever they say.
    They apply to a Hub repository and to a card whose weights are on the Hub (an ``hf://`` URL); for any other
    model ``cache_dir``, ``force_download=True`` and a ``token`` are refused, as they would change nothing.

    Args:
        name: ``"runs/mine"``, ``"OWNER/REPO"``, ``"OWNER/REPO@v1.0"`` or ``"jointvae-mnist"``.
        revision: a branch, tag or commit of the Hub repository.
        cache_dir: huggingface_hub's cache folder (default ``HF_HUB_CACHE``).
        force_download: download the card and weights again even when cached.
        local_files_only: use huggingface_hub's cache only; never ask the Hub.
        token: a Hub token for a private or gated repository (default: the one logged in).
        device: where to put the model (``"auto"`` too: :func:`vaezoo.devices.usable_device`).
        dtype: floating-point type of the parameters.

    Returns:
        The :class:`~vaezoo.model.VAE` in eval mode, its card as ``model.card`` (``card.source`` names the commit).

    Raises:
        VaezooError: as :func:`vaezoo.load`; ``revision`` given for a model that is not on the Hub, unlike the
            ``@REVISION`` of the name, or no branch, tag or commit name (``""``, ``".."``); ``cache_dir`` or
            ``token`` empty; ``cache_dir``, ``force_download=True`` or a ``token`` for a model that is not on the Hub.
        TypeError: ``name`` is neither a string nor a path, or a Hub option is not of the type it takes;
            ``map_location``, ``device_map`` or ``torch_dtype`` (another library's name for ``device`` or ``dtype``).
    """
    from vaezoo.entries.entry import weights_on_hub
    from vaezoo.entries.huggingface import REPO_ID, Download, downloading, revision_problem

    if not isinstance(name, str | os.PathLike):
        raise TypeError(f"a model is named by a string or a path (e.g. 'OWNER/REPO' or 'runs/mine'), not by "
                        f"{type(name).__name__}")
    # numpy's and torch's truth values are the bools they are
    token, force_download, local_files_only = (value if truth_value(value) is None else truth_value(value)
                                               for value in (token, force_download, local_files_only))
    for keyword, value, kinds, takes in (
            ("revision", revision, str, "a branch, tag or commit (a string)"),
            ("cache_dir", cache_dir, str | os.PathLike, "a folder (a string or a path)"),
            ("token", token, str | bool, "a Hub token (a string), True or False"),
            ("force_download", force_download, bool, "True or False"),
            ("local_files_only", local_files_only, bool, "True or False")):
        if not (isinstance(value, kinds) or value is None and keyword in ("revision", "cache_dir", "token")):
            raise TypeError(f"from_pretrained takes {keyword} as {takes}, not {type(value).__name__}")
    # huggingface_hub would take an empty cache_dir for the current folder, and send an empty token as 'Bearer '
    for keyword, value, instead in (("cache_dir", cache_dir, "None for huggingface_hub's cache (HF_HUB_CACHE)"),
                                    ("token", token, "None for the one logged in, or False for none")):
        if isinstance(value, str | os.PathLike) and not os.fspath(value).strip():
            raise OutputError(f"from_pretrained's {keyword} is empty; give one, or {instead}")
    text = os.fspath(name)
    repo = text.removeprefix(HUB_PREFIX)
    here = os.path.isdir(text) or ("@" in text and os.path.lexists(text))  # a folder, or a file no Hub name names
    on_hub = text.startswith(HUB_PREFIX) or (not here and REPO_ID.fullmatch(text.partition("@")[0]) is not None)
    options = Download(cache_dir=cache_dir, force_download=force_download, local_files_only=local_files_only,
                       token=token)
    if not on_hub:
        if revision is not None:
            raise OutputError(f"revision={revision!r} is for a Hub repository, and '{text}' is not one")
        target = Path(text) if os.path.isdir(text) else name  # a folder wins
        # local_files_only=True and token=False ask nothing of the Hub: they hold for any model
        given = [keyword for keyword, value in (("cache_dir", cache_dir), ("force_download", force_download or None),
                                                ("token", token or None)) if value is not None]
        if given and not weights_on_hub(get_card(target)):
            named = f"{', '.join(given[:-1])} and {given[-1]}" if len(given) > 1 else given[0]
            raise OutputError(f"{named} {'are' if len(given) > 1 else 'is'} for a model on the Hub, and "
                              f"'{text}' is neither a Hub repository nor a card whose weights are there; leave "
                              f"{'them' if len(given) > 1 else 'it'} out")
        with downloading(options):  # weights at an hf:// URL come through huggingface_hub
            return load(target, device=device, dtype=dtype)
    if revision is not None:
        if (problem := revision_problem(revision)) is not None:
            raise CardError(problem)
        bare, _, pinned = repo.partition("@")
        if pinned and pinned != revision:
            raise OutputError(f"two revisions were given, '{pinned}' in the name '{text}' and revision={revision!r}; "
                              f"give one")
        repo = f"{bare}@{revision}"
    with downloading(options):
        return load(f"{HUB_PREFIX}{repo}", device=device, dtype=dtype)


def convert(converter: str, checkpoint: str | os.PathLike, dataset: str, out: str | os.PathLike,
            name: str | None = None) -> Path:
    """Turn a checkpoint of another codebase into a zoo entry (weights and card) that :func:`load` reads.

    Args:
        converter: a registered converter (``vaezoo_register_converters``), e.g. ``"jointvae-original"``.
        checkpoint: the checkpoint file to convert.
        dataset: the dataset it was trained on (sets the input geometry).
        out: the folder the entry is written to, under its run lock.
        name: the card's name; default ``CONVERTER-DATASET-converted``. A built-in zoo entry's is refused.

    Returns:
        The path of the card written, ``out/NAME.toml``, beside ``out/NAME.safetensors``.

    Raises:
        CardError: the name is not a card name or is a zoo entry's, or ``out`` already holds a finished entry of it.
        UnknownNameError: no converter of that name is registered.
        WeightsError: ``checkpoint`` is one that ``vaezoo train`` wrote (or the converter refuses it).
    """
    from vaezoo.assemble import converter as registered
    from vaezoo.entries.catalog import new_card_name
    from vaezoo.entries.checkpoints import refuse_training_checkpoint
    from vaezoo.store.files import remove_temporaries
    from vaezoo.store.locks import refuse_finished_run, run_lock

    default = f"{converter}-{dataset}-converted".lower().replace("_", "-")
    name = new_card_name(default if name is None else name, "the converted card")
    convert_with = registered(converter)
    checkpoint = home_path(checkpoint)
    refuse_training_checkpoint(checkpoint)  # a converter would ask for its state dict
    out = home_path(out)  # '~/runs/x' in the home folder, as a card's path reads it
    refuse_finished_run(out, name)  # before the folder is made: a file in its place is named as such
    with run_lock(out):
        if not (out / f"{name}.toml").exists():  # no card there, so no card update either: nobody else writes these
            remove_temporaries(out / f"{name}.safetensors", out / f"{name}.toml")  # a killed convert's
        refuse_finished_run(out, name)  # again, now that no other run can write there
        return convert_with(checkpoint, out, dataset=dataset, name=name)
