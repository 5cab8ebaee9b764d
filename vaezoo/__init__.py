"""vaezoo: a model zoo of disentangled variational autoencoders.

>>> import vaezoo
>>> vaezoo.list_models("jointvae-*")
>>> model = vaezoo.load("jointvae-mnist", device="cuda")
>>> vaezoo.save_pretrained(model, "mine/")             # the Hub's conventions: from_pretrained, push_to_hub

Importing vaezoo does not import torch; :func:`load` does.
"""

from vaezoo.hookspecs import hookimpl
from vaezoo.entries.catalog import get_card
from vaezoo.hub import build_model, load
from vaezoo.pretrained import from_pretrained, push_to_hub, save_pretrained
from vaezoo.version import __version__

__all__ = ["load", "build_model", "list_models", "get_card", "from_pretrained", "save_pretrained", "push_to_hub",
           "hookimpl", "__version__"]


def list_models(pattern: str | list[str] | None = "*", dataset: str | None = None, architecture: str | None = None,
                where: dict[str, str] | None = None, latent: str | None = None) -> list[str]:
    """Names of the zoo's models matching a shell-style ``pattern``, naturally sorted.

    Args:
        pattern: e.g. ``"jointvae-*"``, or a list of patterns (a name matching any is kept); None lists every
            name.
        dataset: keep models trained on this dataset.
        architecture: keep models of this architecture.
        where: ``{field: value}`` filters on the cards' ``model``/``train`` fields, e.g. ``{"beta": "6"}``.
        latent: keep models whose latent has a part of this family, e.g. ``"categorical"``.
    """
    from vaezoo.entries.catalog import list_cards

    return [c.name for c in list_cards(pattern, dataset, architecture, where, latent)]
