"""Drawing images as disentanglement_lib draws ground-truth factors, and their codes, encoded once.

disentanglement_lib samples factor combinations uniformly and renders one image per combination.
On a dataset that holds every combination once (dSprites), drawing an image index uniformly is
the same draw; fixing factor k at a value and drawing the rest is drawing an image uniformly among
those with that value of k. :class:`FactorGroups` does the latter for any dataset with factors.

The metrics read codes through a table of the dataset's codes, ``codes[indices] -> (n, D)``: a
numpy array in the tests, and for a model a :class:`CodeTable`, which encodes each image the
first time a metric asks for it. The suite draws about three million images from dSprites'
737,280, so encoding each once makes the encoder's share of the work that of one pass; and when a
metric encodes the whole dataset (:func:`full_encoding`, for ``mig_chen``'s posteriors; or
``vaezoo eval``'s losses, which do) the same pass fills the table.
"""

from __future__ import annotations

import weakref
from typing import Protocol

import numpy as np
import torch

from vaezoo.data import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.metrics.codes import Encoding, encode_all, mean_codes
from vaezoo.metrics.shared import shared


class Codes(Protocol):
    """A table of codes, one row per image of a dataset: an ``(N, D)`` array or a :class:`CodeTable`."""

    def __len__(self) -> int: ...

    def __getitem__(self, indices: np.ndarray) -> np.ndarray: ...


class CodeTable:
    """The mean codes of a model's images, encoded on first use and kept.

    Holds the model and dataset by weak reference: the table does not keep them alive, so the
    caller does while it reads codes the table has yet to encode.

    Args:
        model: the model; its code is the posterior's mode (:func:`~vaezoo.metrics.codes.mean_codes`).
        dataset: the images.
        device, batch_size: where and how many images to encode at a time.
    """

    def __init__(self, model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE):
        self._model, self.dataset = weakref.ref(model), weakref.ref(dataset)
        self.device, self.batch_size = device, batch_size
        self._rows: np.ndarray | None = None
        self._encoded = np.zeros(len(dataset), dtype=bool)
        self.results: dict = {}  # what metrics computed from these codes, for others sharing the work

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
            model, dataset = self._model(), self.dataset()
            if model is None or dataset is None:
                raise ReferenceError("the model or dataset of this code table no longer exists: keep a reference "
                                     "to both while reading codes")
            codes = mean_codes(model, dataset, torch.from_numpy(missing), self.device, self.batch_size).numpy()
            if self._rows is None:
                self._rows = np.empty((len(self), codes.shape[1]), dtype=np.float32)
            self._rows[missing] = codes
            self._encoded[missing] = True
        return self._rows[indices]

    def fill(self, codes: np.ndarray) -> None:
        """Take ``(N, D)`` codes of every image, encoded elsewhere (:func:`full_encoding`), for those not yet read."""
        if self._rows is None:
            self._rows = np.empty(codes.shape, dtype=np.float32)
        self._rows[~self._encoded] = codes[~self._encoded]
        self._encoded[:] = True


def code_table(model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE) -> CodeTable:
    """The :class:`CodeTable` of ``model`` on ``dataset``; within :func:`~vaezoo.metrics.shared.sharing`,
    one table for the same model, images (the ``images`` tensor, so that a wrapper of the dataset, such as
    one counting progress, shares it) and device."""
    table = shared(("codes", id(model), id(dataset.images), str(device)),
                   lambda: CodeTable(model, dataset, device, batch_size))
    table.dataset = weakref.ref(dataset)  # images yet to encode are read through the latest wrapper
    return table


def full_encoding(model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE,
                  encoding: Encoding | None = None) -> Encoding:
    """:func:`~vaezoo.metrics.codes.encode_all` of every image; within :func:`~vaezoo.metrics.shared.sharing`
    done once, and its modes fill the :func:`code_table`, so that the metrics that draw codes encode nothing more.

    ``encoding``, when given, is a pass over every image made elsewhere (the losses' pass of
    :func:`vaezoo.evaluate.evaluate`), taken instead of encoding again."""
    made = encoding

    def encode() -> Encoding:
        encoding = made if made is not None else encode_all(model, dataset, device, batch_size)
        code_table(model, dataset, device, batch_size).fill(encoding.modes.numpy())
        return encoding

    return shared(("encoding", id(model), id(dataset.images), str(device)), encode)


class FactorGroups:
    """The images of a dataset grouped by the value of each factor, to draw images that share one.

    Args:
        factors: ``(N, K)`` factor classes (any integers).
    """

    def __init__(self, factors: np.ndarray):
        self.factors = np.asarray(factors)
        self._order, self._start, self._count, self._low = [], [], [], []
        for column in self.factors.T:
            values, inverse, counts = np.unique(column, return_inverse=True, return_counts=True)
            count = np.zeros(values[-1] - values[0] + 1, dtype=np.int64)  # by value - lowest value
            count[values - values[0]] = counts
            self._order.append(np.argsort(inverse, kind="stable"))
            self._start.append(np.cumsum(count) - count)
            self._count.append(count)
            self._low.append(values[0])

    @property
    def num_factors(self) -> int:
        """K, the number of factors."""
        return self.factors.shape[1]

    def sharing(self, factor: np.ndarray, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each anchor image, an image drawn uniformly among those with its value of a factor.

        Args:
            factor: ``(P,)`` the factor to share, per row of ``anchors``.
            anchors: ``(P, M)`` image indices.
            rng: the draw's generator.

        Returns:
            ``(P, M)`` image indices.
        """
        out = np.empty(anchors.shape, dtype=np.int64)
        for k in range(self.num_factors):
            rows = np.flatnonzero(factor == k)
            value = self.factors[anchors[rows], k] - self._low[k]
            position = self._start[k][value] + rng.integers(0, self._count[k][value])
            out[rows] = self._order[k][position]
        return out


def draw(codes: Codes, factors: np.ndarray | None, rng: np.random.Generator,
         points: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``points`` images drawn uniformly with replacement (disentanglement_lib's ``generate_batch_factor_code``).

    Returns:
        Their codes ``(points, D)`` float64 and factors ``(points, K)`` (None when ``factors`` is None).
    """
    indices = rng.integers(0, len(codes), points)
    return np.asarray(codes[indices], dtype=np.float64), None if factors is None else np.asarray(factors)[indices]


def sklearn_seed(rng: np.random.Generator) -> int:
    """A seed for a scikit-learn estimator's ``random_state``, drawn from the metric's generator."""
    return int(rng.integers(2**31 - 1))
