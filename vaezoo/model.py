"""The VAE assembled from an encoder, a latent family, a decoder, a likelihood and regularizers."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, cast, overload

import torch
from torch import Tensor, nn
from typing_extensions import TypeVar  # a default (PEP 696) before Python 3.13

from vaezoo.context import BuildContext, LatentPart, batch_mean, layout_text, truth_value, whole_number
from vaezoo.data.transforms import for_model, tracing
from vaezoo.devices import physical_memory
from vaezoo.errors import InputError, PluginError, VaezooError
from vaezoo.latents.base import LatentFamily, Posterior
from vaezoo.likelihoods import Likelihood
from vaezoo.regularizers.base import Regularizer, unregistered_parts

if TYPE_CHECKING:

    from vaezoo.entries.schema import Card


@dataclass
class VAEOutput:
    """What :meth:`VAE.forward` returns.

    Attributes:
        loss: the training objective, the sum of ``terms``.
        terms: named loss terms ("reconstruction" and each regularizer's), scalars.
        kl: KL per latent part, scalars (for monitoring; not part of ``loss`` unless a regularizer adds it).
        output: the decoder's raw output (:meth:`VAE.decode_logits`: logits for a Bernoulli likelihood), shaped
            like the input; ``likelihood.mean(output)`` is the image.
        posterior: q(z|x).
        z: the code that was decoded.

    ``posterior`` is an object, not a tensor, so ``torch.export.export(model, (x,))`` cannot return this; export a
    module whose forward returns the tensors wanted (``out.loss``, ``out.output``, ``out.z``, ``out.terms``).
    """

    loss: Tensor
    terms: dict[str, Tensor]
    kl: dict[str, Tensor]
    output: Tensor
    posterior: Posterior
    z: Tensor


CardT = TypeVar("CardT", bound="Card | None", default="Card | None", covariant=True)
"""The type of a model's ``card``: ``VAE[Card]`` is a model vaezoo made from a card (:func:`vaezoo.load`,
:func:`vaezoo.build_model`, :func:`vaezoo.from_pretrained`), whose ``card`` a type checker knows is there; a bare
``VAE`` may have been built from parts directly, without one."""


class VAE(nn.Module, Generic[CardT]):
    """A variational autoencoder made of interchangeable parts.

    ``x -> encoder -> head -> latent.posterior -> z -> decoder -> likelihood``.
    In training mode ``z`` is a reparameterised sample; in eval mode it is the
    posterior's mode (the mean, or the one-hot argmax of a categorical).

    Args:
        encoder: maps images to features; has ``out_features``.
        decoder: maps codes to image-shaped likelihood parameters.
        latent: the latent family.
        likelihood: scores decoder outputs against images.
        regularizers: produce the named regularization terms of the loss.
        image_size, channels: the input geometry, kept for sampling and checks.

    Attributes:
        card: the zoo card the model was built from (set by :mod:`vaezoo.assemble`); None for a model
            built from parts directly. A model from :func:`vaezoo.load` is typed ``VAE[Card]``, with a ``Card``.
        weights_digest: :func:`vaezoo.store.weights.tensors_digest` of the card's weights as loaded (set by
            :func:`vaezoo.assemble.load_model`), so that a save can tell whether the parameters are still the
            ones the card's metrics were measured on; None for a model not loaded from its card's weights.
    """

    card: CardT

    def __init__(self, encoder: nn.Module, decoder: nn.Module, latent: LatentFamily, likelihood: Likelihood,
                 regularizers: Sequence[Regularizer], image_size: int, channels: int):
        super().__init__()
        features = getattr(encoder, "out_features", None)
        if not (isinstance(features, int) and features > 0):
            raise PluginError(f"{_part('encoder', encoder)}: its out_features is {features!r}, not the positive "
                              f"number of features it outputs per image, which the encoder must set")
        for regularizer in regularizers:
            try:
                inspect.signature(regularizer.forward).bind(None, None, 0)
            except TypeError as exc:
                raise PluginError(f"{_part('regularizer', regularizer)}: its forward cannot be called as "
                                  f"forward(posterior, z, step) ({exc})") from None
            if problem := unregistered_parts(regularizer):
                raise PluginError(f"{_part('regularizer', regularizer)}: {problem}")
        _require_layout(latent)
        self.encoder, self.decoder, self.latent, self.likelihood = encoder, decoder, latent, likelihood
        self.head = nn.Linear(features, latent.param_size)
        self.regularizers = nn.ModuleList(regularizers)
        self.image_size, self.channels = image_size, channels
        self.card = cast(CardT, None)  # until vaezoo.assemble gives a model built from a card its card
        self.weights_digest: str | None = None

    @property
    def code_size(self) -> int:
        """The size of a code: what :meth:`encode`'s ``mode`` gives per image and :meth:`decode` takes."""
        return self.latent.code_size

    @property
    def part_slices(self) -> dict[str, slice]:
        """Each latent part's slice of the code."""
        return self.latent.part_slices()

    def check_input(self, x: Tensor) -> None:
        """Refuse a batch that is not float ``(B, channels, image_size, image_size)`` in [0, 1].

        Any floating-point dtype passes: :meth:`encode` and :meth:`forward` convert the batch to the model's.

        Raises:
            InputError: one line naming what was expected and pointing to :meth:`preprocess`.
        """
        for_model(self).check(x)

    def _input(self, x: Tensor, checked: bool) -> Tensor:
        """``x`` checked (unless ``checked``) and in the dtype of the model's parameters (float64, float16 or
        bfloat16 images for a float32 model, float32 images for one loaded with ``dtype=torch.float16``)."""
        if isinstance(x, Tensor):  # before the check reads its values, which a meta tensor does not have
            _require_device(x, self.head.weight.device, "images", "x")
        if (known := truth_value(checked)) is None:  # a truthy "no" skipped the check
            raise InputError(f"checked is True or False (whether the images are known to fit), got {checked!r}")
        if not known:
            self.check_input(x)
        dtype = self.head.weight.dtype
        return x if x.dtype == dtype else x.to(dtype)

    def preprocess(self, images: Any) -> Tensor:
        """Turn images into a batch this model takes, as its dataset's pipeline did (see :mod:`vaezoo.data.transforms`).

        Args:
            images: a PIL image; a uint8 (0-255), bool or [0, 1] float tensor or array shaped ``(H, W)``,
                ``(C, H, W)`` or ``(N, C, H, W)``; a torchvision dataset sample ``(image, target)``, or a
                ``DataLoader``'s batch of them, ``[images, targets]``; or a list of these (of any sizes), joined
                into one batch in order.

        Returns:
            ``(N, channels, image_size, image_size)`` in [0, 1], on the model's device and in its dtype: the grey
            levels. A dataset that draws its pixels from them (MNIST's ``binarize = "dynamic"``, which the card's
            ``[input]`` describes) is matched by drawing them too: ``torch.bernoulli(model.preprocess(images))``.
        """
        return for_model(self)(images).to(self.head.weight.device, self.head.weight.dtype)

    def encode(self, x: Tensor, checked: bool = False) -> Posterior:
        """q(z|x).

        Args:
            x: images ``(B, channels, image_size, image_size)`` in [0, 1] (see :meth:`preprocess`), of any
                floating-point dtype: they are converted to the model's.
            checked: ``x`` is known to fit (a training loop checks its dataset once): skip the check, which
                waits for the device.

        Returns:
            The posterior; its ``mode`` is the code.

        Raises:
            InputError: ``x`` has another shape or type, or values outside [0, 1], or is on another device than the
                model. The values are read only when the model runs eagerly: under ``torch.compile`` or
                ``torch.export``, which cannot branch on them, images outside [0, 1] give a wrong loss and code
                (check a batch first with :meth:`check_input`).
            VaezooError: the model is on the meta device, where it computes nothing.
        """
        x = self._input(x, checked)
        features = self.encoder(x)
        expected = (x.shape[0], self.head.in_features)
        if not (isinstance(features, Tensor) and tuple(features.shape) == expected):
            raise PluginError(f"{_part('encoder', self.encoder)}: it gave {_described(features)} for "
                              f"{x.shape[0]} images, not (batch, out_features) = {expected}")
        params = self.head(features)
        if torch.is_autocast_enabled(x.device.type):  # bfloat16 under autocast: the latent computes in float32
            params = params.to(torch.promote_types(params.dtype, torch.float32))
        posterior = self.latent.posterior(params)  # else in the model's own dtype (a model loaded as float16)
        if not isinstance(posterior, Posterior):
            raise PluginError(f"{_part('latent family', self.latent)}: posterior() returned "
                              f"{type(posterior).__name__}, not a vaezoo.latents.Posterior")
        return posterior

    def decode_logits(self, z: Tensor) -> Tensor:
        """The decoder's raw output for codes ``(B, code_size)``: the likelihood's parameters, not images.

        For the Bernoulli likelihood of every zoo model these are per-pixel logits; :meth:`decode` gives images.
        Codes of any floating-point dtype are converted to the model's. Their values are not read (:meth:`forward`
        decodes through it every step, where a check would wait for the device): :meth:`decode` refuses codes that
        are not finite.

        Raises:
            InputError: ``z`` is not a dense float tensor of shape ``(B, code_size)`` on the model's device.
            VaezooError: the model is on the meta device, where it computes nothing.
        """
        size = self.latent.code_size
        if not isinstance(z, Tensor) or z.dim() != 2 or z.shape[1] != size or not z.is_floating_point():
            got = (f"{str(z.dtype).removeprefix('torch.')} of shape {tuple(z.shape)}" if isinstance(z, Tensor)
                   else type(z).__name__)
            raise InputError(f"the decoder takes float codes (B, {size}) (code_size {size}), got {got}")
        if z.layout != torch.strided:  # torch's error came from the check of their values, naming an aten operator
            raise InputError(f"the decoder takes codes as a dense tensor, got a "
                             f"{str(z.layout).removeprefix('torch.')} one; give z.to_dense()")
        _require_device(z, self.head.weight.device, "codes", "z")
        dtype = self.head.weight.dtype
        output = self.decoder(z if z.dtype == dtype else z.to(dtype))
        expected = (z.shape[0], self.channels, self.image_size, self.image_size)
        if not (isinstance(output, Tensor) and tuple(output.shape) == expected):
            raise PluginError(f"{_part('decoder', self.decoder)}: it gave {_described(output)} for {z.shape[0]} "
                              f"codes, not (batch, channels, image_size, image_size) = {expected}")
        return output

    def decode(self, z: Tensor) -> Tensor:
        """Images for codes ``(B, code_size)``: the mean of p(x|z), on the data's scale ([0, 1]).

        Returns:
            ``(B, channels, image_size, image_size)``.

        Raises:
            InputError: as :meth:`decode_logits`, or ``z`` holds NaN or infinite values (as :meth:`encode` refuses
                such images; checked only when run eagerly, not under torch.export or torch.compile).
        """
        output = self.decode_logits(z)
        if (where := _not_finite(z, "codes")) is not None:
            raise InputError(f"the decoder takes finite codes, got NaN or infinite values in {where}; give finite "
                             f"codes")
        return self.likelihood.mean(output)

    if TYPE_CHECKING:  # what model(x) returns, which nn.Module's __call__ (typed to return Any) does not say
        def __call__(self, x: Tensor, step: int | Tensor | None = None, checked: bool = False) -> VAEOutput:
            """:meth:`forward` through ``nn.Module``'s hooks."""

    def forward(self, x: Tensor, step: int | Tensor | None = None, checked: bool = False) -> VAEOutput:
        """Encode, sample, decode and score a batch.

        In training mode (``model.train()``) ``z`` is the posterior's ``rsample()``, so it and the loss differ from call
        to call (a relaxed family's sample is no value of its mode: the built-in categorical's is a Gumbel-softmax
        relaxed one-hot, with no zeros); in eval mode it is the posterior's ``mode``, as :meth:`reconstruct` and
        :meth:`encode` (``.mode``) give it in either mode.

        Every term is a per-example quantity summed over its pixels or latent
        dimensions and averaged over the batch, by :func:`vaezoo.context.batch_mean`.

        Args:
            x: images in [0, 1], shape ``(B, C, H, W)`` (see :meth:`preprocess`), of any floating-point dtype.
            step: the training step, a whole number >= 0, for scheduled regularizers (a capacity's target rises with
                it). None: the card's last step (``card.train.steps``) for a model loaded with its card's weights, so
                that ``model(x).loss`` is the objective they were trained to; else 0, where training starts.
            checked: as for :meth:`encode`.

        Raises:
            InputError: ``x`` has another shape or type, or values outside [0, 1], or holds no image; ``step`` is
                not a whole number >= 0 (nor a 0-d tensor, of numbers, not bools).
            PluginError: a part broke its contract on this batch (a code or a KL of the wrong shape, a term that
                is not a scalar tensor), naming the part.
        """
        x = self._input(x, checked)
        if step is None:
            trained = self.card.train.steps if self.card is not None and self.weights_digest is not None else None
            step = trained or 0
        elif not isinstance(step, Tensor):  # a tensor: the step of a captured training loop, counted by vaezoo
            step = _whole_number(step, "forward() takes step, the training step")
        elif step.dim() != 0 or step.dtype == torch.bool:  # by its shape and type: its values would wait for the device
            got = "a bool tensor" if step.dim() == 0 else f"a tensor of shape {tuple(step.shape)}"
            raise InputError(f"forward() takes step, the training step, as a whole number >= 0 or a 0-d tensor, got "
                             f"{got}")
        if x.shape[0] == 0:
            raise InputError("forward() takes at least one image: its loss is a mean over the batch "
                             "(encode() and reconstruct() take an empty batch)")
        posterior = self.encode(x, checked=True)
        z = posterior.rsample() if self.training else posterior.mode
        _require_code(z, x, self.latent, "rsample()" if self.training else "the posterior's mode")
        output = self.decode_logits(z)
        nll = self.likelihood.nll(output, x)
        if not (isinstance(nll, Tensor) and nll.shape == x.shape):
            raise PluginError(f"{_part('likelihood', self.likelihood)}: nll() gave {_described(nll)}, not one value "
                              f"per pixel, shaped like the images {tuple(x.shape)}")
        kl_parts = posterior.kl_parts()
        for name, value in kl_parts.items():  # before the regularizers, which would trip on a KL of another shape
            _require_per_image(value, x.shape[0], self.latent, f"kl_parts()['{name}']")
        terms = {"reconstruction": batch_mean(nll)}
        owners: dict[str, Regularizer] = {}  # the regularizer of each term but the likelihood's
        with torch.autocast(x.device.type, enabled=False):  # regularizers compute in their inputs' float32
            for regularizer in self.regularizers:
                made = _scalar_terms(regularizer, regularizer(posterior, z, step), terms, owners)
                terms.update(made)
                owners.update(dict.fromkeys(made, regularizer))
        kl = {name: batch_mean(value) for name, value in kl_parts.items()}
        return VAEOutput(sum(terms.values()), terms, kl, output, posterior, z)

    def check_output(self, out: VAEOutput, where: str = "on the first batch") -> None:
        """Refuse, naming the latent family, a forward pass whose code or KL is not finite or whose KL is negative:
        what a broken family gives that the shapes do not show (a run checks its first batch so, in both modes,
        and an evaluation every batch).

        Args:
            out: the forward pass.
            where: which images it was of, as messages say it.

        Raises:
            PluginError: naming the family, what it gave and in which mode.
        """
        what = "rsample()" if self.training else "the posterior's mode"
        finite = torch.isfinite(out.z).all(dim=-1)
        if not finite.all():
            raise PluginError(f"{_part('latent family', self.latent)}: {what} is not finite (NaN or inf) for "
                              f"{int((~finite).sum())} of the {len(finite)} images {where}")
        for name, value in out.kl.items():
            if not (torch.isfinite(value) and value >= -1e-4):  # a KL is >= 0, up to float rounding
                raise PluginError(f"{_part('latent family', self.latent)}: kl_parts()['{name}'] averages "
                                  f"{value.item():.6g} {where}; a KL is a finite number >= 0")

    def training_parts(self) -> dict[str, nn.Module]:
        """The regularizers' training parts (e.g. FactorVAE's discriminator), by their place in the model
        (``regularizers.0.discriminator``): trained beside the model, kept in checkpoints, and not in the model's
        ``parameters()``, ``state_dict()``, published weights or card's parameter count."""
        return {f"regularizers.{i}.{name}": part for i, r in enumerate(self.regularizers)
                for name, part in r.training_parts().items()}

    def targets(self, posterior: Posterior, step: int) -> dict[str, float]:
        """Every regularizer's schedule values at ``step``, a whole number >= 0 (e.g. capacities)."""
        step = _whole_number(step, "targets() takes step, the training step")
        return {k: v for r in self.regularizers for k, v in r.targets(posterior, step).items()}

    @torch.no_grad()
    def card_sections(self, card: Card, ref: str, data_root: str | os.PathLike[str] | None = None,
                      device: torch.device | None = None) -> dict[str, Any]:
        """The plugin card sections (``vaezoo_register_card_sections``) this model measures of itself for its card,
        e.g. JointVAE's ``[labels]``; :func:`vaezoo.training.publish.publish` calls it on a finished run and writes
        them; none by default.

        Args:
            card: the model's card (its dataset and name).
            ref: how a command names the card (:func:`vaezoo.entries.catalog.card_reference`), for the commands
                the sections record.
            data_root: where the dataset lives.
            device: where to run: a :class:`torch.device` or None (the CPU); vaezoo passes the device ``"auto"``
                stands for (:func:`vaezoo.devices.usable_device`).

        Returns:
            ``{section name: its table}``.
        """
        return {}

    def reconstruct(self, x: Tensor) -> Tensor:
        """Mean reconstructions of images ``x`` (see :meth:`encode`) from the posterior mode, in [0, 1].

        Raises:
            InputError: as :meth:`encode` refuses ``x``.
            VaezooError: the model's own codes for some of the images are not finite (NaN or infinite weights, or
                an encoder or latent family that gives such; checked only when run eagerly).
            PluginError: the latent family's posterior mode is not ``(batch, code_size)`` on the images' device.
        """
        z = self.encode(x).mode
        _require_code(z, x, self.latent, "the posterior's mode")  # else the decoder blamed the caller's codes
        if (where := _not_finite(z, "images")) is not None:
            raise VaezooError(f"the model's own codes for these images are not finite: NaN or infinite values for "
                              f"{where}, which are valid images; check the model's weights (a run whose loss became "
                              f"NaN leaves such) and the plugins of its encoder and latent family")
        return self.decode(z)

    @torch.no_grad()
    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """``n`` mean images decoded from codes drawn from the prior, without gradients (under
        ``torch.no_grad``); ``model.decode(model.latent.sample_prior(n))`` keeps them, to train through samples.

        Args:
            n: the number of images, a whole number >= 0 (a numpy or 0-d torch integer too); 0 gives an empty batch
                without asking the latent family for codes.
            generator: a :class:`torch.Generator` on the model's device, for reproducible samples.

        Raises:
            InputError: ``n`` is not a whole number >= 0, or its images alone would take more memory than the model's
                device has (checked before the family is asked: torch's allocation error, or its overflow beyond
                2^63), or ``generator`` is not a torch.Generator of the model's device type.
            PluginError: the latent family's ``sample_prior`` gave codes of another shape, on another device than
                the one it was given, or NaN or infinite ones (checked only when run eagerly), naming the family.
        """
        n = _whole_number(n, "sample takes the number of images")
        device = self.head.weight.device
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InputError(f"sample's generator is a torch.Generator (or None), got {type(generator).__name__}; "
                             f"e.g. torch.Generator().manual_seed(0)")
        if generator is not None and generator.device.type != device.type:  # torch's error came from the family
            raise InputError(f"sample's generator is on {generator.device} and the model on {device}; make it there: "
                             f"torch.Generator({device.type!r}).manual_seed(0)")
        dtype = self.head.weight.dtype
        size = n * self.channels * self.image_size ** 2 * dtype.itemsize
        if (memory := _memory(device)) is not None and size > memory:
            raise InputError(f"sample of {n:,} images would take {size / 2**30:,.1f} GiB for the images alone, more "
                             f"than the {memory / 2**30:,.1f} GiB of memory of {device}; draw fewer at a time")
        if n == 0:
            return self.decode(torch.empty(0, self.code_size, device=device, dtype=dtype))
        z = checked_codes(self.latent, self.latent.sample_prior(n, generator=generator, device=device), n,
                          "sample_prior()", device)
        return self.decode(z.to(dtype))


def checked_codes(family: LatentFamily, codes: object, n: int, what: str, device: torch.device | None = None) -> Tensor:
    """``codes`` if they are ``n`` finite codes of the family's ``code_size`` (on ``device``, when given), else a
    :class:`PluginError` naming the family and ``what`` gave them: decoded, they were blamed on the caller, who gave
    no codes ("the decoder takes finite codes", "move them there with z.to('cuda')"), and a picture of NaN codes is
    blank tiles. Their values are checked only when run eagerly, on a device that holds them."""
    _require_codes(family, codes, n, what, device, "n", "the device it was given")
    if codes.numel() and not tracing() and not codes.is_meta:
        finite = torch.isfinite(codes.detach()).all(dim=-1)
        if not finite.all():
            raise PluginError(f"{_part('latent family', family)}: {what} is not finite (NaN or inf) for "
                              f"{int((~finite).sum())} of the {n} codes")
    return codes


def _require_device(x: Tensor, device: torch.device, what: str, name: str) -> None:
    """Refuse ``x`` (``what``: "images") on another device than the model's, naming both and the move (torch's
    own error named the conv's input and weight types); and a model on the meta device, which computes nothing
    (torch's error was "Tensor.item() cannot be called on meta tensors", from the checks of the values)."""
    if x.device != device:
        raise InputError(f"the {what} are on {x.device} and the model on {device}; move them there with "
                         f"{name}.to({str(device)!r})" + (" (model.preprocess(images) gives images there)"
                                                          if what == "images" else ""))
    if device.type == "meta":
        raise VaezooError("the model is on the meta device, which holds no weights, so it computes no images or "
                          "codes; load it onto a device that holds them: vaezoo.load(NAME, device='cpu')")


def _memory(device: torch.device) -> int | None:
    """Bytes of memory ``device`` has: the machine's for the CPU, the GPU's own for CUDA; None where unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return physical_memory() if device.type == "cpu" else None


def _whole_number(value: object, what: str) -> int:
    """``value`` as an int when it is a whole number >= 0: an int, a numpy integer or a 0-d integer tensor, not a
    bool; else an :class:`InputError` saying ``what`` takes, a whole number >= 0."""
    number = whole_number(value)
    if number is None or number < 0:
        raise InputError(f"{what}, a whole number >= 0, got {value!r}")
    return number


def _not_finite(z: Tensor, what: str) -> str | None:
    """Which rows of the codes ``z`` hold NaN or infinite values, as ``"1 of the 3 {what} (row 1)"``; None when
    none do, or when traced (a traced program cannot branch on the values)."""
    if not z.numel() or tracing():
        return None
    finite = torch.isfinite(z.detach()).all(dim=-1)
    if finite.all():
        return None
    rows = (~finite).nonzero().flatten().tolist()
    shown = ", ".join(map(str, rows[:5])) + (", ..." if len(rows) > 5 else "")
    return f"{len(rows)} of the {len(z)} {what} (row{'s' * (len(rows) > 1)} {shown})"


def _part(kind: str, part: object) -> str:
    """How a message names one of a model's parts: its kind, its class and the module (a plugin's) defining it."""
    return f"{kind} {type(part).__qualname__} ({type(part).__module__})"


def _described(value: object) -> str:
    return f"a tensor of shape {tuple(value.shape)}" if isinstance(value, Tensor) else f"a {type(value).__name__}"


def _require_code(z: object, x: Tensor, family: LatentFamily, what: str) -> None:
    """Refuse a code that is not ``(batch, code_size)`` on the images' device: the latent family's contract, as the
    decoder needs it."""
    _require_codes(family, z, x.shape[0], what, x.device, "batch", "where the images and the encoder's parameters are")


def _require_codes(family: LatentFamily, codes: object, n: int, what: str, device: torch.device | None, rows: str,
                   where: str) -> None:
    """Refuse ``codes`` (``what`` gave them) unless they are ``(n, code_size)`` on ``device`` (any, where None),
    naming the family; ``rows`` names ``n`` and ``where`` the device in the message."""
    expected = (n, family.code_size)
    if not (isinstance(codes, Tensor) and tuple(codes.shape) == expected):
        raise PluginError(f"{_part('latent family', family)}: {what} is {_described(codes)}, not ({rows}, code_size) "
                          f"= {expected}")
    if device is not None and codes.device != device:
        raise PluginError(f"{_part('latent family', family)}: {what} is on {codes.device}, not on {device}, {where}")


def _require_layout(family: LatentFamily) -> None:
    """Refuse a family whose ``layout()`` is not a list of ``LatentPart`` whose sizes add up to its ``code_size``:
    ``vaezoo train`` writes it as the card's ``latent`` after the last step, where a layout of another type stopped
    the run without its card, and one of other sizes was written as it came, a card stating another latent."""
    try:
        layout = family.layout()
    except Exception as exc:
        raise PluginError(f"{_part('latent family', family)}: layout() raised {type(exc).__name__}: {exc}") from exc
    if not (isinstance(layout, list) and layout and all(isinstance(part, LatentPart) for part in layout)):
        raise PluginError(f"{_part('latent family', family)}: layout() returned {layout!r:.80}, not a non-empty list "
                          f"of vaezoo.entries.schema.LatentPart (family, size, name) in code order")
    if sum(part.size for part in layout) != family.code_size:
        raise PluginError(f"{_part('latent family', family)}: layout() gives {layout_text(layout)}, "
                          f"{sum(part.size for part in layout)} dimensions, for a code of code_size "
                          f"{family.code_size}; its parts' sizes must add up to the code's")


def _require_per_image(value: object, batch: int, family: LatentFamily, what: str) -> None:
    """Refuse a KL that does not have one row per image of the batch."""
    if not (isinstance(value, Tensor) and value.dim() >= 1 and value.shape[0] == batch):
        raise PluginError(f"{_part('latent family', family)}: {what} is {_described(value)}, not one row per "
                          f"image ({batch}, ...)")


def _scalar_terms(regularizer: Regularizer, terms: object, before: Mapping[str, Tensor],
                  owners: Mapping[str, Regularizer]) -> Mapping[str, Tensor]:
    """A regularizer's terms, refused unless they are named scalar tensors (the loss is their sum) named unlike
    the terms ``before`` them (``owners`` names the regularizer of each, the likelihood's aside): a term of the same
    name would replace one, and the model would train on another objective."""
    if not isinstance(terms, Mapping):
        raise PluginError(f"{_part('regularizer', regularizer)}: forward() returned a {type(terms).__name__}, "
                          f"not a dict of named scalar tensors")
    for name, value in terms.items():
        if not (isinstance(value, Tensor) and value.dim() == 0):
            raise PluginError(f"{_part('regularizer', regularizer)}: term '{name}' is {_described(value)}, not a "
                              f"scalar tensor")
        if name in before:
            earlier = owners.get(name)
            fix = "" if earlier is None else f" ({_clash_fix(regularizer, earlier)})"
            raise PluginError(f"{_part('regularizer', regularizer)}: its term '{name}' has the name of "
                              f"{'the likelihood' if earlier is None else 'an earlier regularizer'}'s term, which it "
                              f"would replace in the loss; give each term a name of its own{fix}")
    return terms


def _clash_fix(regularizer: Regularizer, earlier: Regularizer) -> str:
    """What a card can do about ``regularizer`` adding a term of the name of ``earlier``'s: give each a latent part
    of its own where both take a ``part``, else keep one of the two."""
    without = [type(r).__name__ for r in (regularizer, earlier) if "part" not in inspect.signature(type(r)).parameters]
    if without:
        return (f"{without[0]} takes no 'part' to act on a part of the latent of its own: keep one of the two on "
                f"the card")
    return f"{'two regularizers of one type: ' if type(regularizer) is type(earlier) else ''}give each its own 'part'"


V = TypeVar("V", bound=VAE)


@overload
def build_vae(context: BuildContext, image_size: int, channels: int, latent: Mapping[str, Any],
              regularizers: Sequence[Mapping[str, Any]] = ..., encoder: Mapping[str, Any] | str = ...,
              decoder: Mapping[str, Any] | str = ..., likelihood: Mapping[str, Any] | str = ...) -> VAE: ...


@overload  # a VAE subclass's builder (JointVAE's) gets its class back
def build_vae(context: BuildContext, image_size: int, channels: int, latent: Mapping[str, Any],
              regularizers: Sequence[Mapping[str, Any]] = ..., encoder: Mapping[str, Any] | str = ...,
              decoder: Mapping[str, Any] | str = ..., likelihood: Mapping[str, Any] | str = ..., *,
              cls: type[V]) -> V: ...


def build_vae(context: BuildContext, image_size: int, channels: int, latent: Mapping[str, Any],
              regularizers: Sequence[Mapping[str, Any]] = (), encoder: Mapping[str, Any] | str = "conv_encoder",
              decoder: Mapping[str, Any] | str = "conv_decoder", likelihood: Mapping[str, Any] | str = "bernoulli",
              cls: type[VAE] = VAE) -> VAE:
    """Compose a VAE from part specs, each ``{"type": registered name, **arguments}``.

    This is the ``vae`` architecture: a card can describe any combination of
    registered parts, e.g. a joint latent with total correlation on its
    continuous part and capacity on its categorical part.

    Args:
        context: builds the parts (see :class:`~vaezoo.context.BuildContext`).
        image_size, channels: the input geometry (from the dataset).
        latent, regularizers, encoder, decoder, likelihood: the parts' specs.
        cls: the :class:`VAE` subclass to make.
    """
    build = context.build
    geometry = {"channels": channels, "image_size": image_size}
    family = build("latent family", latent)
    sizes = latent_sizes(family)
    return cls(
        encoder=build("net", {**_spec(encoder), **geometry}),
        decoder=build("net", {**_spec(decoder), **geometry, "code_size": family.code_size}),
        latent=family,
        likelihood=build("likelihood", likelihood),
        regularizers=[replace(context, **sizes).build("regularizer", spec) for spec in regularizers],
        image_size=image_size,
        channels=channels,
    )


def latent_sizes(family: LatentFamily) -> dict[str, Any]:
    """The latent's sizes a :class:`~vaezoo.context.BuildContext` tells the parts built after it: ``code_size``
    and ``part_sizes``."""
    return {"code_size": family.code_size,
            "part_sizes": {name: s.stop - s.start for name, s in family.part_slices().items()}}


def _spec(spec: Mapping[str, Any] | str) -> dict[str, Any]:
    return {"type": spec} if isinstance(spec, str) else dict(spec)
