"""Zoo cards: the one schema module, and card discovery.

A card is a TOML file describing one pretrained model. Cards live in
directories contributed by plugins (``vaezoo_card_dirs``) and in any directory
listed in ``VAEZOO_CARDS_PATH`` (``os.pathsep``-separated). This module never
imports torch: ``vaezoo list`` reads cards only.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from vaezoo.errors import CardError, DuplicateNameError, UnknownNameError
from vaezoo.registry import close_matches

NAME_PATTERN = r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Weights(_Frozen):
    """A safetensors file beside the card (``file``) or at an https ``url``, with its sha256 and size."""

    file: str | None = None
    url: str | None = None
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(gt=0, description="size in bytes")

    @model_validator(mode="after")
    def _one_source(self) -> Weights:
        if (self.file is None) == (self.url is None):
            raise ValueError("give exactly one of 'file' and 'url'")
        if self.file is not None and not self.file.endswith(".safetensors"):
            raise ValueError(f"weights file must be a .safetensors file, got '{self.file}'")
        return self


class DataSpec(_Frozen):
    """The dataset a recipe trains on and the options its factory takes (e.g. ``image_size``)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class Optimizer(_Frozen):
    """The optimiser: a ``torch.optim`` class name and its keyword arguments."""

    name: Literal["Adam", "AdamW", "SGD", "RMSprop"] = "Adam"
    lr: float = Field(gt=0)
    options: dict[str, Any] = Field(default_factory=dict)


class TrainRecipe(_Frozen):
    """How the weights were trained. Regularizer schedules live in the card's ``model`` section."""

    data: DataSpec
    epochs: int = Field(gt=0)
    batch_size: int = Field(gt=0)
    optimizer: Optimizer
    seed: int = 0
    checkpoint_every: int = Field(default=1000, gt=0, description="steps between checkpoints")
    budget: str | None = Field(default=None, description="wall time of the run on the stated machine")
    steps: int | None = Field(default=None, ge=0, description="optimizer steps of the run; written by vaezoo train")


class Metric(_Frozen):
    """A number measured by a command anyone can rerun."""

    value: float
    command: str
    vaezoo_version: str
    note: str | None = None


class Card(_Frozen):
    """A zoo card. ``model`` holds the architecture builder's keyword arguments."""

    name: str = Field(pattern=NAME_PATTERN)
    architecture: str
    summary: str
    dataset: str
    paper: str
    license: str
    vaezoo_version: str
    model: dict[str, Any]
    train: TrainRecipe
    weights: Weights | None = None
    metrics: dict[str, Metric] = Field(default_factory=dict)
    eval_metrics: list[str] = Field(default_factory=list, description="registered metrics 'vaezoo eval' computes")
    headline: str | None = Field(default=None, description="the metric to show in listings")
    latent: str | None = Field(default=None, description="the latent layout; written by vaezoo train")
    parameters: int | None = Field(default=None, ge=0, description="parameter count; written by vaezoo train")

    _path: Path | None = PrivateAttr(default=None)

    @property
    def path(self) -> Path | None:
        """The TOML file this card was read from, if any."""
        return self._path

    def flat(self) -> dict[str, Any]:
        """Every leaf of ``model`` and ``train`` by its dotted path, for ``--where`` filters.

        List items are indexed, so a ``vae`` card's ``regularizers[0].beta`` is ``model.regularizers.0.beta``.
        """
        out: dict[str, Any] = {}

        def walk(prefix: str, value: Any) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    walk(f"{prefix}.{k}", v)
            elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
                for i, v in enumerate(value):
                    walk(f"{prefix}.{i}", v)
            else:
                out[prefix] = value

        walk("model", self.model)
        walk("train", self.train.model_dump())
        return out


def parse_card(path: Path) -> Card:
    """Read and validate one card; errors name the file and the field."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CardError(f"{path}: cannot read card ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise CardError(f"{path}: not valid TOML ({exc})") from None
    try:
        card = Card.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(card)"
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        raise CardError(f"{path}: field {field!r}: {err['msg']}{more}") from None  # repr: keys may hold newlines
    card._path = path.resolve()
    return card


def card_dirs() -> list[Path]:
    """Directories searched for cards: those from plugins, then ``VAEZOO_CARDS_PATH``."""
    from vaezoo.plugins import get_plugins

    dirs = [d for _, d in get_plugins().card_dirs()]
    dirs += [Path(p) for p in os.environ.get("VAEZOO_CARDS_PATH", "").split(os.pathsep) if p]
    return dirs


def discover() -> dict[str, Card]:
    """Every card in every card directory, by name. Two cards with one name are refused."""
    cards: dict[str, Card] = {}
    for directory in card_dirs():
        for path in sorted(directory.glob("*.toml")):
            card = parse_card(path)
            if card.name in cards:
                raise DuplicateNameError(
                    f"card '{card.name}' is defined twice: {cards[card.name].path} and {path}; rename or remove one"
                )
            cards[card.name] = card
    return cards


def _natural_key(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def list_cards(pattern: str = "*", dataset: str | None = None, architecture: str | None = None,
               where: dict[str, str] | None = None) -> list[Card]:
    """Cards whose name matches the shell-style ``pattern``, naturally sorted, optionally filtered.

    Args:
        pattern: shell wildcard on the name (``"jointvae-*"``).
        dataset: keep cards of this dataset.
        architecture: keep cards of this architecture.
        where: ``{key: value}``; a key matches any ``model``/``train`` field whose dotted path ends with it.
    """
    out = []
    for card in discover().values():
        if not fnmatch.fnmatchcase(card.name, pattern):
            continue
        if dataset and card.dataset != dataset or architecture and card.architecture != architecture:
            continue
        if where and not all(_matches(card.flat(), k, v) for k, v in where.items()):
            continue
        out.append(card)
    return sorted(out, key=lambda c: _natural_key(c.name))


def _matches(flat: dict[str, Any], key: str, wanted: str) -> bool:
    for path, value in flat.items():
        if path == key or path.endswith("." + key):
            if str(value) == wanted or _same_number(value, wanted):
                return True
    return False


def _same_number(value: Any, wanted: str) -> bool:
    try:
        return float(value) == float(wanted)
    except (TypeError, ValueError):
        return False


def get_card(name: str) -> Card:
    """The card called ``name``; an unknown name gets an error listing close matches."""
    cards = discover()
    if name not in cards:
        raise UnknownNameError(f"no zoo card named '{name}'.{close_matches(name, list(cards))} "
                               f"Run 'vaezoo list' to see the zoo")
    return cards[name]


def write_card(card: Card, path: Path) -> None:
    """Write ``card`` as TOML to ``path`` atomically."""
    import tomli_w

    from vaezoo.files import atomic_write

    atomic_write(path, tomli_w.dumps(card.model_dump(exclude_none=True)).encode())
