"""vaezoo: a model zoo of disentangled variational autoencoders.

>>> import vaezoo
>>> vaezoo.list_models("jointvae-*")
>>> model = vaezoo.load("jointvae-mnist", device="cuda")
>>> vaezoo.save_pretrained(model, "mine/")             # the Hub's conventions: from_pretrained, push_to_hub

Importing vaezoo imports none of its dependencies: each name is imported on first use, and :func:`load`
imports torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from vaezoo.version import __version__

if TYPE_CHECKING:
    from vaezoo.entries.catalog import get_card
    from vaezoo.extras.pretrained import push_to_hub, save_pretrained
    from vaezoo.hookspecs import hookimpl
    from vaezoo.hub import build_model, from_pretrained, load

# where each name of the public API lives; imported on first use, so that the command line can handle a
# Ctrl-C from its first instant (the console script imports this package before any of its code runs)
_HOMES = {"load": "vaezoo.hub", "build_model": "vaezoo.hub", "get_card": "vaezoo.entries.catalog",
          "from_pretrained": "vaezoo.hub", "save_pretrained": "vaezoo.extras.pretrained",
          "push_to_hub": "vaezoo.extras.pretrained", "hookimpl": "vaezoo.hookspecs"}

__all__ = ["build_model", "from_pretrained", "get_card", "hookimpl", "list_models", "load", "push_to_hub",
           "save_pretrained", "__version__"]  # written out, for tools that read it without running it


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'vaezoo' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def list_models(pattern: str | list[str] | None = "*", dataset: str | None = None, architecture: str | None = None,
                where: dict[str, str] | None = None, latent: str | None = None,
                exclude: str | list[str] | None = None, pretrained: bool = False) -> list[str]:
    """Names of the zoo's models matching a shell-style ``pattern``, naturally sorted.

    Args:
        pattern: e.g. ``"jointvae-*"``, or a list of patterns (a name matching any is kept); None lists every
            name.
        dataset: keep models trained on this dataset.
        architecture: keep models of this architecture.
        where: ``{field: value}`` filters on the cards' ``model``/``train`` fields, e.g. ``{"beta": "6"}``.
        latent: keep models whose latent has a part of this family, e.g. ``"categorical"``.
        exclude: leave out the names this pattern, or any of these, matches (as timm's ``exclude_filters``).
        pretrained: keep only the models that have weights, which :func:`load` loads (as timm's
            ``pretrained=True``); False lists recipe cards without weights too (one of yours on ``VAEZOO_CARDS_PATH``).
    """
    from vaezoo.context import truth_value
    from vaezoo.entries.catalog import list_cards

    if (weighted := truth_value(pretrained)) is None:  # a truthy "no" would list the models with weights
        raise TypeError(f"list_models takes pretrained as True or False, not {pretrained!r}")
    return [c.name for c in list_cards(pattern, dataset, architecture, where, latent, exclude)
            if not weighted or c.weights is not None]
