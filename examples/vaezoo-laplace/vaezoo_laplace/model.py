"""The ``laplacevae`` architecture: small conv nets around a Laplace latent, with a beta-weighted KL."""

from __future__ import annotations

from collections.abc import Sequence

from vaezoo.context import BuildContext
from vaezoo.model import VAE, build_vae


def build_laplacevae(context: BuildContext, image_size: int, channels: int, dim: int = 8, beta: float = 1.0,
                     hidden: int = 64, widths: Sequence[int] = (16, 32)) -> VAE:
    """Build a VAE with a ``dim``-dimensional Laplace latent and ``beta * KL`` (beta = 1: the ELBO).

    Args:
        context: builds the parts (given by vaezoo's assembly).
        image_size: input height and width (a power of two >= 16).
        channels: image channels.
        dim: latent dimensions.
        beta: weight of the KL term (Higgins et al., 2017).
        hidden: width of the hidden linear layer of encoder and decoder.
        widths: encoder conv widths, one per halving of the image; the decoder mirrors them.

    Returns:
        A :class:`vaezoo.model.VAE`.
    """
    widths = list(widths)
    return build_vae(
        context, image_size, channels, latent={"type": "laplace", "dim": dim},
        regularizers=[{"type": "beta", "beta": beta}],
        encoder={"type": "conv_encoder", "hidden": hidden, "widths": widths},
        decoder={"type": "conv_decoder", "hidden": hidden, "widths": widths[::-1]},
    )
