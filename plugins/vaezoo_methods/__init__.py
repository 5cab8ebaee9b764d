"""The standard methods of Locatello et al.'s (2019) comparison that vaezoo's core does not hold: FactorVAE (Kim &
Mnih, 2018), DIP-VAE-I and DIP-VAE-II (Kumar, Sattigeri & Balakrishnan, 2018); AnnealedVAE (Burgess et al., 2018)
is a recipe of the core's ``capacity`` regularizer.

Registers the regularizers ``factorvae`` (a discriminator of its own, trained by its own Adam: the stateful
regularizer interface of :class:`vaezoo.regularizers.base.Regularizer`) and ``dipvae`` (on the whole latent, or
with ``part`` on the Gaussian part of a joint one). Recipes at Locatello et
al.'s dSprites settings, with their grid, are in ``recipes/``. Heavy imports happen inside the hooks.
"""

from vaezoo.hookspecs import hookimpl


@hookimpl
def vaezoo_register_regularizers(register):
    from vaezoo_methods.regularizers import DIPVAE, FactorVAE

    register("factorvae", FactorVAE)
    register("dipvae", DIPVAE)
