"""Encoding a dataset for the metrics: posterior parameters and mean codes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution

from vaezoo.data.base import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.devices import usable_device
from vaezoo.errors import MetricError, VaezooError
from vaezoo.metrics.parallel import parallel_imap

CPU_SLICE = 64
"""Images the encoder takes at a time on a CPU when the metrics encode without decoding, the slices side by side on
torch's threads, one thread each: a batch of 1,024 dSprites images on two threads left most of the cores' time to
OpenMP's waits and to memory (notes/timings.md: a third less time and CPU). An image's code does not depend on the
images encoded beside it, nor on the threads."""


class Images(Protocol):
    """Images read in batches: an :class:`~vaezoo.data.ImageDataset`, or an evaluation's view of one that counts
    the images read (:class:`vaezoo.metrics.evaluation.CountedImages`)."""

    def batch(self, index: Tensor, device: torch.device | None = None) -> Tensor:
        """The images at ``index``, on ``device``."""

    def batches(self, batch_size: int, device: torch.device | None = None) -> Iterator[tuple[int, Tensor]]:
        """``(start, images)`` over every image in order, ``batch_size`` at a time, on ``device``."""


@contextmanager
def eval_mode(model) -> Iterator[None]:
    """``model`` in eval mode, without gradients, for the block; its mode is put back after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


@contextmanager
def inference(model) -> Iterator[None]:
    """``model`` set up for a pass over a dataset: eval mode, ``torch.inference_mode`` and, when its decoder has
    convolutions (4-d weights), the decoder's weights in ``channels_last`` memory order (faster transposed
    convolutions on a CPU; the same images up to float rounding). The model's mode and memory order are put back
    after the block.

    The encoder is left in its own order, so that the codes the metrics read are bit for bit those of a plain
    eval-mode encoding, whatever the batch size or thread count: DCI's gradient-boosted trees split on a collapsed
    dimension's tiny variations, which another memory order's rounding changes (docs/metrics.md).
    """
    was_training = model.training
    decoder = getattr(model, "decoder", None)
    convolutional = decoder is not None and any(p.dim() == 4 for p in decoder.parameters())
    model.eval()
    if convolutional:
        decoder.to(memory_format=torch.channels_last)
    try:
        with torch.inference_mode():
            yield
    finally:
        if convolutional:
            decoder.to(memory_format=torch.contiguous_format)
        model.train(was_training)


def dataset_factors(dataset: ImageDataset, metric: str) -> Tensor | None:
    """The dataset's ``(N, K)`` factor classes as a tensor, or None when it has none.

    Raises:
        MetricError: they are not one row of K >= 1 classes per image (1-d factors met an IndexError inside), or hold
            NaN (a class no image shares: Chen et al.'s MIG scored them).
    """
    if dataset.factors is None:
        return None
    factors = torch.as_tensor(dataset.factors)
    if factors.dim() != 2 or factors.shape[1] < 1 or len(factors) != len(dataset):
        raise MetricError(f"{metric}: the dataset's factors are its images' factor classes, ({len(dataset):,}, K) "
                          f"with K >= 1, got shape {tuple(factors.shape)}")
    if factors.is_floating_point() and (missing := int(factors.isnan().any(1).sum())):
        raise MetricError(f"{metric}: the dataset's factors hold NaN for {missing:,} of its {len(factors):,} images; "
                          f"a factor class is a number")
    return factors


def require_factors(dataset: ImageDataset, metric: str) -> Tensor:
    """The dataset's ``(N, K)`` factor classes (:func:`dataset_factors`); a clear error when it has none, or none
    takes two values (every metric of them scored 0, 1 or chance, or said to draw more points)."""
    factors = dataset_factors(dataset, metric)
    if factors is None:
        raise VaezooError(f"{metric} needs a dataset with ground-truth factors (e.g. dsprites)")
    if not (factors != factors[:1]).any():
        raise MetricError(f"no factor of the dataset takes two values ({len(factors):,} image(s)), so {metric} has "
                          f"nothing to measure")
    return factors


CODE_LIMIT = float(np.finfo(np.float32).max)
"""The largest magnitude of a code the metrics take: float32's largest number, the most a model's code (float32)
holds. scikit-learn's trees compute in float32, and larger hand-made codes met its errors (DCI: ``Input X contains
infinity or a value too large for dtype('float32')``) or a wrong number (FactorVAE's variances overflowed)."""


def finite_codes(codes) -> np.ndarray:
    """``codes`` ``(..., D)``, rows of a table of codes, as float64; a clear error when any is NaN or infinite,
    which the metrics' histograms and classifiers would refuse in their own words, or silently score (FactorVAE's
    variance of a NaN prunes its dimension), or beyond float32's range (:data:`CODE_LIMIT`)."""
    codes = np.asarray(codes, dtype=np.float64)
    broken = ~np.isfinite(codes).all(-1)
    if broken.any():
        raise MetricError(f"{int(broken.sum()):,} of the {broken.size:,} codes drawn hold NaN or infinite values; "
                          f"the metrics need finite codes (check the model's encoder, or the codes given)")
    beyond = (np.abs(codes) > CODE_LIMIT).any(-1)
    if beyond.any():
        raise MetricError(f"{int(beyond.sum()):,} of the {beyond.size:,} codes drawn hold values beyond float32's "
                          f"range (magnitude above {CODE_LIMIT:.4g}); the metrics need codes within it (check the "
                          f"model's encoder, or the codes given)")
    return codes


def check_table(codes, factors=None) -> np.ndarray | None:
    """Refuse a table of codes that is not one row of D >= 1 numbers per image, and factor classes that are not one
    row per code, before a metric draws from them (a shorter table of codes took the first rows of the factors
    without a word); ``factors`` as an array, each column's classes as their ranks where they are not integers.

    Raises:
        MetricError: naming the shapes.
    """
    shape = getattr(codes, "shape", None)  # a CodeTable has none, and is (N, D) by construction
    if shape is not None and (len(shape) != 2 or shape[1] < 1):
        raise MetricError(f"the codes are a table of one row per image, (N, D) with D >= 1, got shape {tuple(shape)}")
    if factors is None:
        return None
    factors = np.asarray(factors)
    if factors.ndim != 2 or factors.shape[1] < 1 or len(factors) != len(codes):
        raise MetricError(f"the factors are the images' factor classes, one row per code, ({len(codes):,}, K) with "
                          f"K >= 1, got shape {factors.shape}")
    if factors.dtype.kind not in "iub":  # classes that are not integers (0.5), as their ranks: scikit-learn's
        # classifiers took float classes for a regression target ("Unknown label type: continuous")
        factors = np.stack([np.unique(column, return_inverse=True)[1].reshape(-1) for column in factors.T], 1)
    return factors


class FactorisedPosteriors(NamedTuple):
    """The location-scale parts of q(z|x) for every image of a dataset, side by side (each part's
    :meth:`~vaezoo.latents.Posterior.location_scale`).

    Attributes:
        loc, scale: ``(N, D)`` float32 on the CPU.
        family: the parts' ``torch.distributions`` class (location-scale, e.g. ``Normal``).
    """

    loc: Tensor
    scale: Tensor
    family: type[Distribution]


class Encoding(NamedTuple):
    """What one pass of the encoder over a whole dataset gives the metrics.

    Attributes:
        modes: ``(N, code_size)`` float32 on the CPU, each image's deterministic code (the posterior's mode).
        posteriors: the location-scale parts of each q(z|x); None when no part is one.
        batches: when no part is location-scale, or a part has a density but no location-scale form, each
            batch's posterior parts (``{name: Posterior}``, in order), for the estimators that reach the densities
            through the protocol's ``log_density_matrix``.
    """

    modes: Tensor
    posteriors: FactorisedPosteriors | None
    batches: tuple[dict, ...] = ()


class EncodingBuilder:
    """An :class:`Encoding` built batch by batch from the posteriors of one pass over a dataset, in order."""

    def __init__(self) -> None:
        self._modes: list[Tensor] = []
        self._locs: list[Tensor] = []
        self._scales: list[Tensor] = []
        self._families: set[type[Distribution]] = set()
        self._batches: list[dict] = []

    def add(self, posterior) -> None:
        """Take the next batch's q(z|x) (a :class:`~vaezoo.latents.Posterior`).

        Its location-scale parts are kept as locations and scales. Its parts are also kept whole when a part
        has a density but no location-scale form, or when no part is location-scale, so that the estimators
        that reach the densities through ``log_density_matrix`` leave out no part that has one.
        """
        self._modes.append(posterior.mode.float().cpu())
        located = {name: p.location_scale() for name, p in posterior.parts.items()}
        parts = [density for density in located.values() if density is not None]
        if parts:
            self._families.update(d.family for d in parts)
            self._locs.append(torch.cat([d.loc for d in parts], -1).float().cpu())
            self._scales.append(torch.cat([d.scale for d in parts], -1).float().cpu())
        if not parts or any(density is None and has_density_matrix(posterior.parts[name])
                            for name, density in located.items()):
            self._batches.append(dict(posterior.parts))

    @property
    def keeps_batches(self) -> bool:
        """Whether it keeps each batch's posterior parts whole (``Encoding.batches``), as the batches taken say."""
        return bool(self._batches)

    def encoding(self) -> Encoding:
        """The batches taken so far, as one :class:`Encoding`.

        Raises:
            VaezooError: when the location-scale parts are of different families.
        """
        if len(self._families) > 1:
            raise VaezooError(f"this metric needs the latent's location-scale parts to be of one family, got "
                              f"{sorted(f.__name__ for f in self._families)}")
        family = next(iter(self._families), None)
        posteriors = (FactorisedPosteriors(torch.cat(self._locs), torch.cat(self._scales), family)
                      if family else None)
        return Encoding(torch.cat(self._modes), posteriors, tuple(self._batches))


def has_density_matrix(part) -> bool:
    """Whether the posterior ``part`` gives ``log_density_matrix`` (a latent family with densities does)."""
    try:
        part.log_density_matrix(part.mode[:1])
    except NotImplementedError:
        return False
    return True


def encode_all(model, dataset: Images, device=None, batch_size: int = EVAL_BATCH_SIZE) -> Encoding:
    """Encode every image of ``dataset`` once, without decoding (:func:`inference`): its mode and, for the parts
    whose posterior is a location-scale density (the latent protocol's ``location_scale()``), location and scale.
    A joint latent's categorical parts give no ``posteriors`` columns. ``device`` is where to encode (``"auto"``
    too: :func:`vaezoo.devices.usable_device`). On a CPU the images after the first batch are encoded
    :data:`CPU_SLICE` at a time, unless the encoding keeps its posteriors whole (``Encoding.batches``): those stay
    of ``batch_size`` images each.

    Raises:
        VaezooError: when the location-scale parts are of different families.
    """
    device = usable_device(device)
    builder = EncodingBuilder()
    with inference(model):
        batches = (x for _, x in dataset.batches(batch_size, device))
        for x in islice(batches, 1):
            # the first batch, whole, tells whether the posteriors are kept: the estimator over them sums batch by
            # batch, which slices would round otherwise and slow down (a pass of Python per slice)
            builder.add(model.encode(x))
        for posterior in _encoded(model, batches, device, whole=builder.keeps_batches):
            builder.add(posterior)
    return builder.encoding()


def _encoded(model, batches: Iterable[Tensor], device: torch.device | None, whole: bool = False) -> Iterator:
    """``model.encode`` of each batch of images in order, in inference mode: on a CPU, of each :data:`CPU_SLICE`
    images, the slices side by side on torch's threads; on another device, or where ``whole``, of each batch."""
    def encode(x: Tensor):
        with torch.inference_mode():  # per thread
            return model.encode(x)

    if whole or (device is not None and device.type != "cpu"):
        return map(encode, batches)
    return parallel_imap(encode, (piece for x in batches for piece in x.split(CPU_SLICE)))


def require_posteriors(encoding: Encoding) -> FactorisedPosteriors:
    """``encoding.posteriors``; a clear error when the latent has no part with a per-dimension density."""
    if encoding.posteriors is None:
        raise VaezooError("this metric needs a latent part whose posterior is a location-scale density "
                          "(Posterior.location_scale(), e.g. Gaussian)")
    return encoding.posteriors


def mean_codes(model, dataset: Images, indices: Tensor, device=None,
               batch_size: int = EVAL_BATCH_SIZE) -> Tensor:
    """The deterministic code (the posterior's mode: the mean, or a one-hot argmax) of the images at ``indices``,
    encoded on ``device`` (``"auto"`` too: :func:`vaezoo.devices.usable_device`) without decoding
    (:func:`inference`).

    Returns:
        ``(len(indices), code_size)`` float32 on the CPU.
    """
    device = usable_device(device)
    batches = (dataset.batch(indices[start:start + batch_size], device) for start in range(0, len(indices), batch_size))
    with inference(model):
        codes = [posterior.mode.float().cpu() for posterior in _encoded(model, batches, device)]
    return torch.cat(codes)
