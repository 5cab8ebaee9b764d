"""beta-TCVAE and beta-VAE: the core conv nets, a Gaussian latent and a Bernoulli likelihood.

The two differ only in the regularizer, so a pair of cards with the same ``latent_dim``,
``hidden`` and recipe compares the objectives alone.
"""

from __future__ import annotations

from vaezoo.context import BuildContext
from vaezoo.model import VAE, build_vae


def _build(context: BuildContext, image_size: int, channels: int, latent_dim: int, hidden: int,
           regularizer: dict) -> VAE:
    return build_vae(
        context, image_size, channels, latent={"type": "gaussian", "dim": latent_dim}, regularizers=[regularizer],
        encoder={"type": "conv_encoder", "hidden": hidden}, decoder={"type": "conv_decoder", "hidden": hidden},
        likelihood="bernoulli",
    )


def build_betatcvae(context: BuildContext, dataset_size: int, image_size: int, channels: int, latent_dim: int = 10,
                    alpha: float = 1.0, beta: float = 6.0, gamma: float = 1.0, sampling: str = "mss",
                    hidden: int = 256) -> VAE:
    """Build a beta-TCVAE: loss = reconstruction + alpha * MI + beta * TC + gamma * dimension-wise KL.

    ``dataset_size``, ``image_size`` and ``channels`` come from the dataset (vaezoo's build context).

    Args:
        context: builds the parts.
        dataset_size: N, the number of training images (the TC estimator weighs the minibatch by it).
        image_size: input height and width (a power of two >= 16; 64 for dSprites).
        channels: image channels.
        latent_dim: Gaussian latent dimensions (10 in Chen et al.'s dSprites runs).
        alpha, beta, gamma: weights of index-code MI, total correlation and dimension-wise KL.
        sampling: "mss" (minibatch-stratified) or "mws" (minibatch-weighted).
        hidden: width of the hidden linear layer of encoder and decoder.
    """
    regularizer = {"type": "total_correlation", "dataset_size": dataset_size, "alpha": alpha, "beta": beta,
                   "gamma": gamma, "sampling": sampling}
    return _build(context, image_size, channels, latent_dim, hidden, regularizer)


def build_betavae(context: BuildContext, image_size: int, channels: int, latent_dim: int = 10, beta: float = 6.0,
                  hidden: int = 256) -> VAE:
    """Build a beta-VAE: loss = reconstruction + beta * KL(q(z|x) || N(0, I)).

    Args:
        context: builds the parts.
        image_size: input height and width (a power of two >= 16; 64 for dSprites).
        channels: image channels.
        latent_dim: Gaussian latent dimensions.
        beta: weight of the KL term.
        hidden: width of the hidden linear layer of encoder and decoder.
    """
    return _build(context, image_size, channels, latent_dim, hidden, {"type": "beta", "beta": beta})
