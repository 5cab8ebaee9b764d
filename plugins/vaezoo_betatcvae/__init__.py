"""beta-TCVAE (Chen, Li, Grosse & Duvenaud, 2018, "Isolating Sources of Disentanglement in Variational
Autoencoders") and its baseline beta-VAE (Higgins et al., 2017, "beta-VAE: Learning Basic Visual Concepts
with a Constrained Variational Framework").

Registers the ``betatcvae`` and ``betavae`` architectures. Training recipes for dSprites are in
``recipes/`` (``vaezoo train betatcvae:recipes/betatcvae-dsprites.toml --out DIR``).
Heavy imports happen inside the hooks.
"""

from vaezoo.hookspecs import hookimpl


@hookimpl
def vaezoo_register_architectures(register):
    from vaezoo_betatcvae.model import build_betatcvae, build_betavae

    register("betatcvae", build_betatcvae)
    register("betavae", build_betavae)
