"""One evaluation of a model on a dataset: what a metric is handed, and the work its metrics share.

:func:`vaezoo.evaluation.measure.evaluate` makes one :class:`Evaluation` per card and hands it to each metric
(:meth:`vaezoo.metrics.spec.MetricSpec.measure`). On it the encoder's pass over every image is made once
(:meth:`Evaluation.encoding`; ``vaezoo eval``'s losses pass is taken instead of a new one), its modes fill the
:class:`CodeTable` the sampling metrics draw from, and a result several metrics need (``mig_chen``'s and
``total_correlation``'s entropy estimate, one DCI fit) is kept under a key (:meth:`Evaluation.shared`). What an
evaluation keeps lives as long as the object, so nothing can outlive the model it was computed from.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch
from torch import Tensor

from vaezoo.context import whole_number
from vaezoo.data import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.devices import usable_device
from vaezoo.errors import MetricError
from vaezoo.metrics.codes import Encoding, encode_all, mean_codes
from vaezoo.terminal import Progress

if TYPE_CHECKING:
    from vaezoo.model import VAE

T = TypeVar("T")


def require_image_dataset(dataset: object, measured: str) -> None:
    """Refuse a ``dataset`` that is no :class:`~vaezoo.data.ImageDataset` (a torch ``Dataset`` of one's own, a
    ``Subset``), saying how to give its images as one.

    Args:
        dataset: what was given as the images.
        measured: what is measured on it, the line's start (``"a metric measures a model"``).

    Raises:
        TypeError: ``dataset`` is no ImageDataset.
    """
    if not isinstance(dataset, ImageDataset):
        raise TypeError(f"{measured} on a vaezoo.data.ImageDataset, got {type(dataset).__name__} as the dataset; give "
                        f"the card's (vaezoo.assemble.card_dataset(model.card)), or your images as one: "
                        f"ImageDataset(images), images a uint8 tensor (N, C, H, W) or one of floats in [0, 1] with "
                        f"scale=1.0, and labels= or factors= where the metric reads them")


class CountedImages:
    """The images of a dataset, each read counted on a progress display when there is one.

    A pass over every image (:meth:`batches`), or reads announced by :meth:`expect`, make the total known; other
    images drawn by index (:meth:`batch`, e.g. a metric's random sample) are counted as they come.

    Args:
        dataset: the images.
        progress: where to count them; None counts nothing.
    """

    def __init__(self, dataset: ImageDataset, progress: Progress | None = None) -> None:
        self._dataset = dataset
        self._progress = progress

    def __len__(self) -> int:
        return len(self._dataset)

    def batch(self, index: int | slice | Sequence[int] | np.ndarray | Tensor, device: str | torch.device | None = None,
              dtype: torch.dtype | str = torch.float32) -> Tensor:
        """The images at ``index`` (:meth:`vaezoo.data.ImageDataset.batch`) on ``device`` (``"auto"`` too:
        :func:`vaezoo.devices.usable_device`), counted."""
        images = self._dataset.batch(index, usable_device(device), dtype)
        if self._progress is not None:
            if self._progress.total is not None and self._progress.done + len(images) > self._progress.total:
                self._progress.total = None  # more than announced: a count and a rate, not a wrong time left
            self._progress.advance(len(images))
        return images

    def expect(self, count: int) -> None:
        """Announce that the next ``count`` images read are the work's whole remainder, so the display shows a total
        and the time left."""
        if self._progress is not None:
            self._progress.total = self._progress.done + count

    def batches(self, batch_size: int, device: str | torch.device | None = None,
                dtype: torch.dtype | str = torch.float32) -> Iterator[tuple[int, Tensor]]:
        """``(start, images)`` over every image in order (:meth:`vaezoo.data.ImageDataset.batches`) on ``device``
        (``"auto"`` too: :func:`vaezoo.devices.usable_device`), counted."""
        device = usable_device(device)
        self.expect(len(self._dataset))
        for start, images in self._dataset.batches(batch_size, device, dtype):
            if self._progress is not None:
                self._progress.advance(len(images))
            yield start, images


class CodeTable:
    """The mean codes of an evaluation's images (:func:`~vaezoo.metrics.codes.mean_codes`), encoded on first use.

    Args:
        evaluation: the model and images; images yet to encode are read through its :attr:`~Evaluation.images`.
    """

    def __init__(self, evaluation: Evaluation) -> None:
        self._evaluation = evaluation
        self._rows: np.ndarray | None = None
        self._encoded = np.zeros(len(evaluation.dataset), dtype=bool)

    def __len__(self) -> int:
        return len(self._encoded)

    @property
    def encoded(self) -> int:
        """How many of the images have been encoded so far."""
        return int(self._encoded.sum())

    def __getitem__(self, indices: np.ndarray) -> np.ndarray:
        """The codes ``(*indices.shape, D)`` float32 of the images at ``indices``."""
        indices = np.asarray(indices)
        missing = np.unique(indices[~self._encoded[indices]])
        if len(missing):
            e = self._evaluation
            e.images.expect(len(missing))
            codes = mean_codes(e.model, e.images, torch.from_numpy(missing), e.device, e.batch_size).numpy()
            if self._rows is None:
                self._rows = np.empty((len(self), codes.shape[1]), dtype=np.float32)
            self._rows[missing] = codes
            self._encoded[missing] = True
        return self._rows[indices]

    def fill(self, codes: np.ndarray) -> None:
        """Take ``(N, D)`` codes of every image, encoded elsewhere, for those not yet read."""
        if self._rows is None:
            self._rows = np.empty(codes.shape, dtype=np.float32)
        self._rows[~self._encoded] = codes[~self._encoded]
        self._encoded[:] = True


def _require_geometry(model, dataset: ImageDataset) -> None:
    """Refuse a dataset of images another size or channel count than ``model`` takes (a model of MNIST on
    dSprites), before any is encoded: the model's own input check said "got shape (47, 1, 64, 64)" on a batch and
    pointed to ``model.preprocess``, which is for images, not for a dataset."""
    channels, size = getattr(model, "channels", None), getattr(model, "image_size", None)
    got = dataset.image_shape
    if isinstance(channels, int) and isinstance(size, int) and got != (channels, size, size):
        raise MetricError(f"the dataset's images are {got} and the model takes {(channels, size, size)} (channels, "
                          f"height, width); measure it on its own dataset (vaezoo.assemble.card_dataset(model.card))")


class Evaluation:
    """A model on a dataset, as every metric of one evaluation reads it.

    The caller keeps the model and the dataset unchanged while the evaluation is in use.

    Args:
        model: the model (its code is the posterior's mode).
        dataset: the images (with ``factors`` or ``labels`` for the metrics that need them).
        device, batch_size: where (``"auto"`` too: :func:`vaezoo.devices.usable_device`) and how many images to
            encode at a time; the tensor-heavy estimators (Chen et al.'s entropies) run on ``device`` too.

    Attributes:
        progress: the display the images read are counted on (see :meth:`reporting`); None when there is none.

    Raises:
        DeviceError: ``device`` is not a device this machine has.
        MetricError: ``batch_size`` is not a whole number of at least 1, or ``dataset`` holds no image, or images
            of another size or channel count than ``model`` takes.
    """

    def __init__(self, model: VAE, dataset: ImageDataset, device: str | torch.device | None = None,
                 batch_size: int = EVAL_BATCH_SIZE) -> None:
        if not (isinstance(model, torch.nn.Module) and callable(getattr(model, "encode", None))):
            raise TypeError(f"a metric measures a vaezoo model (vaezoo.load gives one) on an ImageDataset, got "
                            f"{type(model).__name__} as the model")
        require_image_dataset(dataset, "a metric measures a model")
        if not len(dataset):  # numpy's "high <= 0" or torch.cat's "expected a non-empty list" inside each metric
            raise MetricError("the dataset holds no image, so there is nothing to measure")
        _require_geometry(model, dataset)
        self.device = usable_device(device)
        number = whole_number(batch_size)  # a numpy integer too, as the settings take
        if number is None or number < 1:
            raise MetricError.about("{batch_size} must be a whole number >= 1, got {got!r}", got=batch_size)
        self.model = model
        self.dataset = dataset
        self.batch_size = number
        self.progress: Progress | None = None
        self._codes: CodeTable | None = None
        self._encoding: Encoding | None = None
        self._shared: dict[Hashable, Any] = {}

    @property
    def images(self) -> CountedImages:
        """The dataset's images, each read counted on :attr:`progress`."""
        return CountedImages(self.dataset, self.progress)

    @property
    def codes(self) -> CodeTable:
        """The mean codes of the images, one table for all the metrics of this evaluation."""
        if self._codes is None:
            self._codes = CodeTable(self)
        return self._codes

    def encoding(self) -> Encoding:
        """:func:`~vaezoo.metrics.codes.encode_all` of every image, made once; its modes fill :attr:`codes`.

        Raises:
            VaezooError: when the latent's location-scale parts are of different families.
        """
        if self._encoding is None:
            self.take_encoding(encode_all(self.model, self.images, self.device, self.batch_size))
        return self._encoding

    def take_encoding(self, encoding: Encoding) -> None:
        """Take a pass over every image made elsewhere (``vaezoo eval``'s losses) as :meth:`encoding`."""
        self._encoding = encoding
        self.codes.fill(encoding.modes.numpy())

    def shared(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, made once per ``key`` (naming what it depends on besides the model and images)."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]

    @contextmanager
    def reporting(self, progress: Progress) -> Iterator[Evaluation]:
        """Count the images read inside the block on ``progress``."""
        outer, self.progress = self.progress, progress
        try:
            yield self
        finally:
            self.progress = outer
