"""vaezoo-laplace: a Laplace latent family, the ``laplacevae`` architecture and its zoo card.

Registered through vaezoo's hooks; nothing in vaezoo names this plugin. The
module stays light (no torch import) so that ``vaezoo list`` stays fast: the
parts are imported inside the hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import vaezoo

if TYPE_CHECKING:  # for the hints only: importing them here would load torch
    from vaezoo.latents import LatentFamily
    from vaezoo.model import VAE

CARDS = Path(__file__).parent / "cards"


@vaezoo.hookimpl
def vaezoo_register_latent_families(register: Callable[[str, type[LatentFamily]], None]) -> None:
    from vaezoo_laplace.latent import Laplace

    register("laplace", Laplace)


@vaezoo.hookimpl
def vaezoo_register_architectures(register: Callable[[str, Callable[..., VAE]], None]) -> None:
    from vaezoo_laplace.model import build_laplacevae

    register("laplacevae", build_laplacevae)


@vaezoo.hookimpl
def vaezoo_card_dirs() -> list[Path]:
    return [CARDS]
