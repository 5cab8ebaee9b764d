"""FactorVAE's and DIP-VAE's regularizers, as disentanglement_lib defines them
(google-research/disentanglement_lib, ``disentanglement_lib/methods/unsupervised/vae.py``)."""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributions import Normal

from vaezoo.context import batch_mean
from vaezoo.errors import InputError, LatentError
from vaezoo.latents import LocationScale
from vaezoo.regularizers.base import OptimizerGroup, Regularizer, UpdateBatch, check_weight, select_part
from vaezoo.regularizers.collectives import gather_rows


MOST_LAYERS = 100
"""The most hidden layers FactorVAE's discriminator takes (Kim & Mnih's has 6): more is a typo, not a recipe."""

MOST_PARAMETERS = 1 << 30
"""The most parameters FactorVAE's discriminator may hold (4 GiB in float32; Kim & Mnih's 6 layers of 1,000 hold
5 million): a width or depth beyond it is a typo, refused when the card is read rather than when memory runs out."""


def discriminator_parameters(code_size: int, layers: int, hidden: int) -> int:
    """The parameters of :class:`Discriminator` ``(code_size, layers, hidden)``, counted without building it (in
    a time that does not grow with ``layers``)."""
    if layers == 0:
        return (code_size + 1) * 2
    return (code_size + 1) * hidden + (layers - 1) * (hidden + 1) * hidden + (hidden + 1) * 2


class Discriminator(nn.Sequential):
    """FactorVAE's discriminator: ``layers`` fully connected layers of ``hidden`` units with LeakyReLU(``slope``),
    then 2 logits (class 0: a code of q(z); class 1: a code with its dimensions permuted across the batch).

    Args:
        code_size: the size of the codes it reads.
        layers, hidden: its hidden layers and their width (Kim & Mnih: 6 of 1,000).
        slope: the LeakyReLU's negative slope (0.2, as disentanglement_lib's ``tf.nn.leaky_relu``).
    """

    def __init__(self, code_size: int, layers: int = 6, hidden: int = 1000, slope: float = 0.2):
        widths = [code_size] + [hidden] * layers
        modules: list[nn.Module] = []
        for a, b in zip(widths, widths[1:]):
            modules += [nn.Linear(a, b), nn.LeakyReLU(slope)]
        super().__init__(*modules, nn.Linear(widths[-1], 2))


def at_least_two(regularizer: str, what: str, batch: int) -> None:
    """Refuse a training batch of fewer than 2 images to a regularizer that ``what`` (in words) across the batch:
    over one image the term is a constant, and the run would train a plain VAE without a word.

    Raises:
        InputError: naming the regularizer, why it needs 2 images, and the batch's size.
    """
    if batch < 2:
        raise InputError(f"regularizer '{regularizer}' {what}, which needs batches of at least 2 images, got {batch}")


def permute_dims(z: Tensor) -> Tensor:
    """``z`` with each dimension permuted across the batch on its own (disentanglement_lib's ``shuffle_codes``):
    samples of the product of q(z)'s marginals. The permutations are drawn from the global generator."""
    order = torch.rand(z.shape, device=z.device).argsort(dim=0)
    return z.gather(0, order)


class FactorVAE(Regularizer):
    """``KL(q(z|x) || p(z)) + gamma * TC``, the total correlation estimated by a discriminator (Kim & Mnih, 2018,
    "Disentangling by Factorising", eq. 2 and algorithm 2): ``TC = E[logit_0(z) - logit_1(z)]`` over the codes of
    the batch.

    The discriminator is a training part: it trains beside the model with its own ``Adam(lr, betas)`` on
    ``0.5 * (CE(D(z), 0) + CE(D(permute_dims(z')), 1))``, ``z`` the model step's codes (detached) and ``z'`` the
    codes of a second batch (Kim & Mnih's algorithm 2). It is not in the model's weights; so the TC term is a
    training term only, and a loaded model's objective is the VAE's (reconstruction + KL).

    Args:
        code_size: the code's size (given by the latent, never on a card).
        gamma: weight of the TC term (Locatello et al.'s grid: 10, 20, 30, 40, 50, 100).
        layers, hidden: the discriminator's hidden layers (0: a linear discriminator, at most :data:`MOST_LAYERS`)
            and their width (at least 1); together at most :data:`MOST_PARAMETERS` parameters.
        lr, betas: its Adam's learning rate (finite, above 0: at 0 the discriminator never learns, and the TC term
            estimates nothing) and betas (each from 0 to below 1) (Kim & Mnih: 1e-4, (0.5, 0.9)).
    """

    example = {"gamma": 10.0, "layers": 2, "hidden": 16}
    second_batch = True

    def __init__(self, code_size: int, gamma: float = 10.0, layers: int = 6, hidden: int = 1000, lr: float = 1e-4,
                 betas: tuple[float, float] = (0.5, 0.9)):
        super().__init__()
        self.gamma = check_weight("factorvae", "gamma", gamma)
        for bad, what in ((layers < 0, f"layers must be at least 0, got {layers}"),
                          (hidden < 1, f"hidden must be at least 1, got {hidden}"),
                          (layers > MOST_LAYERS, f"layers must be at most {MOST_LAYERS}, got {layers:,}"),
                          ((size := discriminator_parameters(code_size, layers, hidden)) > MOST_PARAMETERS,
                           f"layers = {layers:,} of hidden = {hidden:,} units make {size:,} parameters, more than "
                           f"the {MOST_PARAMETERS:,} it may hold (Kim & Mnih's 6 layers of 1,000 make about 5 "
                           f"million); lower them"),
                          (not (math.isfinite(lr) and lr > 0), f"lr must be a finite number above 0, got {lr}"),
                          (not all(0 <= b < 1 for b in betas), f"betas must each be from 0 to below 1, got {betas}")):
            if bad:
                raise ValueError(f"regularizer 'factorvae': {what} (a setting of its discriminator)")
        self.lr, self.betas = lr, tuple(betas)
        self.add_training_part("discriminator", Discriminator(code_size, layers, hidden))

    def forward(self, posterior, z, step) -> dict[str, Tensor]:
        terms = {"kl": batch_mean(posterior.kl())}
        if self.training:  # the discriminator is a training part: a loaded model has none
            at_least_two("factorvae", "trains its discriminator to tell codes from codes with their dimensions "
                                      "permuted across the batch", len(z))
            logits = self.discriminator(z)
            terms["tc"] = self.gamma * (logits[:, 0] - logits[:, 1]).mean()
        return terms

    def optimizers(self) -> list[OptimizerGroup]:
        return [OptimizerGroup("discriminator", "Adam", self.lr, {"betas": self.betas})]

    def update(self, batch: UpdateBatch) -> dict[str, Tensor]:
        real = self.discriminator(batch.z)
        permuted = self.discriminator(permute_dims(batch.z if batch.second is None else batch.second))
        zeros = torch.zeros(len(real), dtype=torch.long, device=real.device)
        ones = torch.ones(len(permuted), dtype=torch.long, device=real.device)
        return {"discriminator": 0.5 * (F.cross_entropy(real, zeros) + F.cross_entropy(permuted, ones))}

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, lr={self.lr}, betas={self.betas}"


def covariance(x: Tensor) -> Tensor:
    """The (biased, 1/N) covariance matrix of the rows of ``x`` ``(N, D)``: ``E[x x^T] - E[x] E[x]^T``."""
    centred = x - x.mean(0)
    return centred.T @ centred / x.shape[0]


def variance(shape: LocationScale) -> Tensor:
    """The variance of each dimension of a location-scale posterior, ``(B, D)``: ``scale ** 2`` for a Normal, the
    family's own for another (a Laplace's is ``2 * scale ** 2``)."""
    if shape.family is Normal:
        return shape.scale ** 2
    return shape.family(shape.loc, shape.scale, validate_args=False).variance


class DIPVAE(Regularizer):
    """``KL + lambda_od * sum_{i != j} Cov_ij^2 + lambda_d * sum_i (Cov_ii - 1)^2`` (Kumar, Sattigeri &
    Balakrishnan, 2018, "Variational Inference of Disentangled Latent Concepts from Unlabeled Observations").

    DIP-VAE-I (``dip_type = "i"``, eq. 6) takes the covariance of the encoder's means over the batch; DIP-VAE-II
    (``"ii"``, eq. 7) that of z: ``E[Cov_q(z|x)] + Cov[E_q(z|x)]``. ``lambda_d = lambda_d_factor * lambda_od``
    (Locatello et al.: 10 for DIP-VAE-I, 1 for DIP-VAE-II), so a sweep over ``lambda_od`` keeps the ratio.

    Args:
        lambda_od: weight of the off-diagonal terms (Locatello et al.'s grid: 1, 2, 5, 10, 20, 50).
        lambda_d_factor: ``lambda_d / lambda_od``.
        dip_type: "i" or "ii".
        part: apply to this part of a joint latent only, a Gaussian (location-scale) one (default: the whole
            latent); its terms are then ``kl_PART`` and ``dip_TYPE_PART``, as beta's ``kl_PART``.
    """

    example = {"lambda_od": 2.0, "dip_type": "ii", "part": "cont",
               "latent": {"type": "joint", "parts": [{"type": "gaussian", "name": "cont", "dim": 2},
                                                     {"type": "gumbel_categorical", "name": "cat", "categories": 3}]}}

    def __init__(self, lambda_od: float = 1.0, lambda_d_factor: float = 10.0, dip_type: Literal["i", "ii"] = "i",
                 part: str | None = None):
        super().__init__()
        self.part = part
        if dip_type not in ("i", "ii"):
            raise ValueError(f"regularizer 'dipvae': dip_type must be 'i' or 'ii', got {dip_type!r}")
        self.lambda_od = check_weight("dipvae", "lambda_od", lambda_od)
        factor = check_weight("dipvae", "lambda_d_factor", lambda_d_factor)
        self.lambda_d = check_weight("dipvae", "lambda_d = lambda_od * lambda_d_factor", self.lambda_od * factor)
        self.dip_type = dip_type

    def forward(self, posterior, z, step) -> dict[str, Tensor]:
        whole = posterior
        posterior, _ = select_part(posterior, z, self.part)
        shape = posterior.location_scale()
        if shape is None:
            raise LatentError(f"regularizer 'dipvae' needs a posterior with a location and a scale per dimension "
                              f"(a Gaussian latent){self._fix(whole)}")
        loc, var = shape.loc, variance(shape)
        if self.training:  # under DDP, the covariance of the recipe's whole batch
            loc, var = gather_rows(loc), gather_rows(var)
            at_least_two("dipvae", "penalises the covariance of the codes over the batch", len(loc))
        cov = covariance(loc)
        if self.dip_type == "ii":
            cov = cov + torch.diag(var.mean(0))
        diagonal = cov.diagonal()
        off = cov - torch.diag(diagonal)
        dip = self.lambda_od * (off ** 2).sum() + self.lambda_d * ((diagonal - 1) ** 2).sum()
        suffix = f"_{self.part}" if self.part else ""  # as beta's kl_PART: one such regularizer a part
        return {f"kl{suffix}": batch_mean(posterior.kl()), f"dip_{self.dip_type}{suffix}": dip}

    def _fix(self, whole) -> str:
        """What to do about a posterior without a location-scale form: name, with 'part', a part of the joint
        latent ``whole`` that has one (its Gaussian part)."""
        fitting = [name for name, p in whole.parts.items() if p.location_scale() is not None]
        named = ", ".join(fitting) or "none of its parts has one"
        if self.part is not None:
            return f"; the latent's part '{self.part}' has none: give 'part' a Gaussian part ({named})"
        if len(whole.parts) > 1:
            return f"; the latent is joint ({', '.join(whole.parts)}): give 'part' its Gaussian part ({named})"
        return ""

    def extra_repr(self) -> str:
        return f"lambda_od={self.lambda_od}, lambda_d={self.lambda_d}, dip_type={self.dip_type}, part={self.part}"
