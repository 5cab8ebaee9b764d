"""vaezoo-laplace: a Laplace latent family, the ``laplacevae`` architecture and its zoo card.

Registered through vaezoo's hooks; nothing in vaezoo names this plugin. The
module stays light (no torch import) so that ``vaezoo list`` stays fast: the
parts are imported inside the hooks.
"""

from pathlib import Path

import vaezoo

CARDS = Path(__file__).parent / "cards"


@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    from vaezoo_laplace.latent import Laplace

    register("laplace", Laplace)


@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    from vaezoo_laplace.model import build_laplacevae

    register("laplacevae", build_laplacevae)


@vaezoo.hookimpl
def vaezoo_card_dirs():
    return [CARDS]
