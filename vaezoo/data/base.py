"""Datasets as uint8 tensors in memory, and where vaezoo looks for them on disk."""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, NamedTuple

import annotated_types
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset as TorchDataset

from vaezoo.context import whole_number
from vaezoo.devices import usable_device, usable_dtype
from vaezoo.errors import DataError, Phrase, in_brief, setting_on
from vaezoo.store.paths import home_path


ImageSize = Annotated[int, annotated_types.Ge(1)]
"""The type of a dataset's ``image_size`` option, its images' height and width: 1 or more (0 or -1 was an error of
the resize deep inside the loading, "height and width must be > 0", after the files were read)."""

EVAL_BATCH_SIZE = 1024
"""Images per pass of the metrics, in ``vaezoo eval`` and called alone: the code of an image does not depend on the
batch it is encoded in, and large batches keep an accelerator's operations large (a CPU encodes them in slices side by
side: ``vaezoo.metrics.codes.CPU_SLICE``); a metric that draws samples batch by batch (``elbo``,
``importance_log_likelihood``) draws the same ones in both, and other ones at another batch size."""


@dataclass(eq=False, repr=False)  # equal and hashed by identity, as torch's datasets (a field-wise == raised)
class ImageDataset(TorchDataset[tuple[Tensor, Tensor]]):
    """Images kept compactly in memory, converted to float batches on demand; a map-style torch ``Dataset`` of
    ``(image, label)`` (:meth:`__getitem__`), which ``torch.utils.data.DataLoader`` batches.

    Attributes:
        images: ``(N, C, H, W)`` tensor, usually uint8.
        scale: divide the stored values by this to get [0, 1] (255 for 8-bit images, 1 for binary ones).
        labels: ``(N,)`` class labels, or None.
        factors: ``(N, K)`` ground-truth factor classes, or None.
        factor_names: names of the K factors.
        nominal_factors: the factors whose values have no order (see :class:`DataInfo`).
        binarize: draw the pixels of every training batch afresh as Bernoulli(grey level)
            (:meth:`draw_pixels`; dynamic binarisation, Burda et al. 2016).
    """

    images: Tensor
    scale: float = 255.0
    labels: Tensor | None = None
    factors: Tensor | None = None
    factor_names: tuple[str, ...] = ()
    nominal_factors: tuple[str, ...] = ()
    binarize: bool = False

    def __post_init__(self) -> None:
        """Refuse, in one line, what a dataset built by hand gets wrong (checked without reading a pixel): a numpy
        array, a list or a complex tensor of images, a tensor of other than 4 dimensions, a scale that is not a
        finite number > 0, labels or factors of another length than the images, factor names that do not name the
        factors' columns. Each met a deep torch error at the first batch, or trained or scored silently (the
        imaginary part dropped, labels of 10 images on 64, bool images as 1/255).

        Raises:
            DataError: naming the field, what it holds and what to give.
        """
        images = self.images
        if not isinstance(images, Tensor):
            raise DataError(f"a dataset's images are a torch tensor (N, C, H, W), got {type(images).__name__}; "
                            f"convert them (torch.from_numpy(array) or torch.as_tensor)")
        if images.ndim != 4:
            fix = "add the channel dimension (images.unsqueeze(1))" if images.ndim == 3 else "reshape them"
            raise DataError(f"a dataset's images are (N, C, H, W), got shape {tuple(images.shape)}; {fix}")
        if images.is_complex():
            raise DataError(f"a dataset's images are real numbers, got {str(images.dtype).removeprefix('torch.')}; "
                            f"give their real values (images.real or images.abs())")
        if isinstance(self.scale, Tensor) and self.scale.ndim == 0 and self.scale.dtype != torch.bool:
            self.scale = self.scale.item()  # a scale computed with torch (images.max()), as the division took it
        scale = self.scale
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not 0 < scale < math.inf:
            raise DataError(f"a dataset's scale, what its stored values are divided by to lie in [0, 1], is a number "
                            f"> 0 (255 for 8-bit images, 1 for images in [0, 1]), got {in_brief(scale, 40)}")
        if images.dtype == torch.bool and scale != 1:
            raise DataError(f"a dataset of bool images holds 0 and 1: give it scale=1.0, not {scale} (their pixels "
                            f"would be 0 and 1/{scale:g})")
        size = len(images)
        if self.labels is not None:
            self.labels = _per_image(self.labels, "labels", size, 1)
        if self.factors is not None:
            self.factors = _per_image(self.factors, "factors", size, 2)
        self.factor_names = names = _names(self.factor_names, "factor_names", "one per column of its factors")
        self.nominal_factors = _names(self.nominal_factors, "nominal_factors", "each one of its factor_names",
                                      unordered=True)
        columns = None if self.factors is None else self.factors.shape[1]
        if names and columns != len(names):
            held, fix = (("no factors", "give its factors too, or no factor_names") if columns is None else
                         (f"factors of {columns} column(s)", "give one name per column of its factors"))
            raise DataError(f"a dataset's factor_names name {len(names)} factor(s) {names} and it holds {held}; {fix}")
        if unknown := [name for name in self.nominal_factors if name not in names]:
            raise DataError(f"a dataset's nominal_factors {unknown} are not among its factor_names {names}; "
                            f"name factors of the dataset")
        if isinstance(self.binarize, np.bool_):  # a flag computed with numpy, which 'if binarize' read as one
            self.binarize = bool(self.binarize)
        if not isinstance(self.binarize, bool):
            raise DataError(f"a dataset's binarize is True or False, got {in_brief(self.binarize, 40)}")

    def __len__(self) -> int:
        return self.images.shape[0]

    @property
    def image_shape(self) -> tuple[int, ...]:
        """One image's shape ``(C, H, W)`` as :meth:`batch` gives it (a packed dataset's unpacked), which is what a
        model takes, not ``images``' shape."""
        return tuple(self.batch(slice(0, 1)).shape[1:])

    def __repr__(self) -> str:
        """The split in one line, as torchvision's datasets sum themselves up: its images as :meth:`batch` gives
        them and what it holds beside them, not every field's tensor (tens of lines of pixels)."""
        held = ["labels"] if self.labels is not None else []
        held += [f"factors {self.factor_names or tuple(self.factors.shape)}"] if self.factors is not None else []
        held += ["binarize=True"] if self.binarize else []
        return f"{type(self).__name__}({len(self):,} images {self.image_shape}{''.join(', ' + item for item in held)})"

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        """One sample as a map-style ``torch.utils.data.Dataset`` gives it, so that ``DataLoader(dataset)`` and
        torchvision's tools take the split: ``(image, label)``, the float32 image ``(C, H, W)`` in [0, 1] (as
        :meth:`batch` gives it) and its label, or ``-1`` where the split has none (its factors are
        :attr:`factors`); both are copies of their own. A split that draws its pixels in training (:attr:`binarize`,
        vae-mnist's) gives its grey levels: ``dataset.draw_pixels(images)`` of a batch draws them as ``vaezoo train``
        does."""
        number = whole_number(index)  # an int, a numpy integer, a 0-d integer tensor; not a bool (operator.index's 1)
        if number is None:
            raise TypeError(f"a dataset's item is one image, at an int index, not {type(index).__name__}; take "
                            f"several with dataset.batch(indices)")
        image = self.batch(number)  # an index out of range is refused here, before the labels are read
        # a copy, as the image is: a label indexed out of the labels is a view, which label += 1 would change
        return image, self.labels[number].clone() if self.labels is not None else torch.tensor(-1)

    def batch(self, index: int | slice | Sequence[int] | np.ndarray | Tensor, device: str | torch.device | None = None,
              dtype: torch.dtype | str = torch.float32) -> Tensor:
        """Images at ``index`` as floats in [0, 1] on ``device`` (``"auto"`` too: :func:`vaezoo.devices.usable_device`;
        default: where the images are), of ``dtype``, a model's (:func:`vaezoo.devices.usable_dtype`).

        ``index`` is an int (one image, ``(C, H, W)``; negative counts from the end), a slice, a sequence, array or
        1-D tensor of ints, or a bool mask of one value per image (a batch, ``(B, C, H, W)``).

        Raises:
            TypeError: ``index`` is none of these (a bool, a float, None, a float or 2-D tensor).
            IndexError: an index is out of range, or a mask does not have one value per image.
        """
        # a copy of its own (never a view of the stored images, which div_ would change) in the standard layout:
        # images stored channels-last, or with one channel read from (H, W, C), would give channels-last batches,
        # which a convolution sums in another order than an ensemble's stacked batches
        return self._stored(index).to(device=usable_device(device), dtype=usable_dtype(dtype), copy=True,
                                      memory_format=torch.contiguous_format).div_(self.scale)

    def _stored(self, index: object) -> Tensor:
        """The stored values of the images at ``index`` (as :meth:`batch` takes it), unconverted."""
        rows = _rows(index, len(self))
        try:
            return self.images[rows]
        except IndexError:  # an index tensor with an entry out of range (on the CPU; on a GPU, a device assert)
            raise IndexError(f"an index given ({_described(index)}) is out of range for a dataset of {len(self)} "
                             f"images; use 0 to {len(self) - 1} (or -{len(self)} to -1 from the end)") from None

    def draw_pixels(self, x: Tensor) -> Tensor:
        """A training batch ``x`` (from :meth:`batch`) as the step sees it: when :attr:`binarize` is set, each
        pixel drawn afresh as Bernoulli(grey level) on the global generator of ``x``'s device; else ``x``."""
        return torch.bernoulli(x) if self.binarize else x

    def batches(self, batch_size: int, device: str | torch.device | None = None,
                dtype: torch.dtype | str = torch.float32) -> Iterator[tuple[int, Tensor]]:
        """Yield ``(start, images)`` over the whole dataset in order, ``batch_size`` (a whole number >= 1) at a time,
        on ``device`` (``"auto"`` too, as :meth:`batch` takes it).

        Raises:
            DataError: ``batch_size`` is not a whole number >= 1 (0 or -1 yielded nothing, or raised from range).
        """
        if whole_number(batch_size) is None or batch_size < 1:
            raise DataError(f"batches takes batch_size, the images per batch, a whole number >= 1, got {batch_size!r}")
        device = usable_device(device)
        for start in range(0, len(self), batch_size):
            yield start, self.batch(slice(start, start + batch_size), device, dtype)


def _names(names: object, field: str, what: str, unordered: bool = False) -> tuple[str, ...]:
    """A dataset's ``factor_names`` or ``nominal_factors``, a tuple or list of names (or, ``unordered``, a set of
    them, as sorted), as a tuple; refused in one line otherwise (a string was taken as its letters)."""
    kinds = (tuple, list, set, frozenset) if unordered else (tuple, list)
    if not isinstance(names, kinds) or not all(isinstance(name, str) for name in names):
        raise DataError(f"a dataset's {field} are a tuple of names, {what}, got {in_brief(names, 60)}")
    return tuple(sorted(names)) if isinstance(names, (set, frozenset)) else tuple(names)


def _per_image(values: object, field: str, size: int, ndim: int) -> Tensor:
    """A dataset's ``labels`` (``ndim`` 1: ``(N,)``) or ``factors`` (``ndim`` 2: ``(N, K)``, K >= 1) as a tensor, a
    numpy array taken as one; refused in one line unless real numbers with one row per image of ``size``."""
    shape = "(N,)" if ndim == 1 else "(N, K) with K >= 1"
    try:
        tensor = torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError):
        raise DataError(f"a dataset's {field} are a tensor {shape}, one per image, got "
                        f"{in_brief(values, 40)}") from None
    if tensor.ndim != ndim or len(tensor) != size or (ndim == 2 and tensor.shape[1] < 1):
        raise DataError(f"a dataset's {field} are {shape}, one per image, and it holds {size:,} images, got "
                        f"shape {tuple(tensor.shape)}")
    if tensor.is_complex():
        raise DataError(f"a dataset's {field} are real numbers, got {str(tensor.dtype).removeprefix('torch.')}")
    return tensor


def _rows(index: object, size: int) -> int | slice | Tensor:
    """``index`` as the images' first dimension takes it, or refused in one line (see :meth:`ImageDataset.batch`):
    torch read a bool as a new dimension (``batch(True)`` was every image in a batch of one), and a float or a bool
    numpy scalar was its IndexError about "long or byte Variables"."""
    if isinstance(index, slice):
        bounds = (index.start, index.stop, index.step)
        if all(b is None or whole_number(b) is not None for b in bounds) and (index.step is None or index.step >= 1):
            return index
        raise TypeError(f"a dataset's batch takes a slice of whole numbers with a step of 1 or more, got {index}")
    number = whole_number(index)
    if number is not None:
        if not -size <= number < size:
            raise IndexError(f"index {number} is out of range for a dataset of {size} images; use 0 to {size - 1} "
                             f"(or -{size} to -1 from the end)")
        return number
    try:
        rows = torch.as_tensor(index)
    except (TypeError, ValueError, RuntimeError):
        rows = None
    if rows is not None and rows.shape == (0,):  # no image: [] reads as float32
        return rows.long()
    if rows is not None and rows.ndim == 1 and not (rows.is_floating_point() or rows.is_complex()):
        if rows.dtype == torch.bool and len(rows) != size:
            raise IndexError(f"a mask picks images with one truth value per image, {size}, got {len(rows)}")
        return rows if rows.dtype in (torch.bool, torch.int64) else rows.long()  # uint8 would read as a mask
    raise TypeError(f"a dataset's batch is taken at an int, a slice, a sequence or 1-D tensor of ints, or a bool "
                    f"mask of one value per image, got {_described(index)}")


def _described(index: object) -> str:
    """``index`` in a few words: a tensor's, an array's or a numpy scalar's dtype and shape; else its value and type."""
    if hasattr(index, "dtype") and hasattr(index, "shape"):
        kind = "tensor" if isinstance(index, Tensor) else "array" if type(index).__name__ == "ndarray" else "scalar"
        shape = f" of shape {tuple(index.shape)}" if tuple(index.shape) else ""
        return f"{str(index.dtype).removeprefix('torch.')} {kind}{shape}"
    return in_brief(index, 40)


@dataclass(frozen=True)
class DataInfo:
    """What a dataset split is, known without loading it: the facts a model is built from.

    Attributes:
        size: number of images in the split.
        image_size: height and width of its images.
        channels: channels of its images.
        factor_names: names of its ground-truth factors, in order; () when it has none.
        nominal_factors: the factors whose values have no order (e.g. dSprites' shape); metrics that need
            ordered values (Chen et al.'s MIG) leave them out.
    """

    size: int
    image_size: int
    channels: int
    factor_names: tuple[str, ...] = ()
    nominal_factors: tuple[str, ...] = ()


class Dataset:
    """A registered dataset: describes a split without loading it, and loads it.

    Register an instance with the ``vaezoo_register_datasets`` hook; a card's ``[train.data]`` names it
    and gives its ``options`` (e.g. ``image_size``), passed to both methods as keywords, which a subclass
    declares as its own keyword parameters (``image_size: int = 32``).
    """

    # ``*args: Any, **options: Any`` lets a type checker accept a subclass's own keyword parameters as an override
    def info(self, split: str = "train", *args: Any, **options: Any) -> DataInfo:
        """The :class:`DataInfo` of ``split`` with ``options``, without reading any file."""
        raise NotImplementedError

    def load(self, root: str | os.PathLike[str] | None = None, split: str = "train", *args: Any,
             **options: Any) -> ImageDataset:
        """Load ``split`` from ``root`` (see :func:`data_root`), as an :class:`ImageDataset`."""
        raise NotImplementedError

    def record(self, **options: Any) -> dict[str, Any]:
        """The options a run's card records: ``options`` and what else :meth:`info` needs to answer without the
        dataset's files (a folder's number of images), so that the card loads with its weights where they are not.
        By default ``options`` as they are."""
        return options

    def published(self, **options: Any) -> dict[str, Any]:
        """The options a card shared with others records (``vaezoo push``, ``save_pretrained``): a run's card's
        ``options`` less what names this machine's files (a folder of the user's own images), which would tell the
        world where they keep them and what they call them. By default ``options`` as they are."""
        return options


class DataRoot(NamedTuple):
    """Where datasets are read from.

    Attributes:
        path: the directory.
        download: whether a missing dataset may be downloaded into it.
        source: what chose it, for messages: the ``data_root`` argument (a :class:`~vaezoo.errors.Phrase`, which
            the CLI spells ``--data-root``), "VAEZOO_DATA" or "the default data folder".
    """

    path: Path
    download: bool
    source: str | Phrase


def default_data_dir() -> Path:
    """The user data folder datasets are downloaded into when neither ``data_root`` nor VAEZOO_DATA is given.

    Raises:
        DataError: HOME is not set and the user has no home folder in the system's user list.
    """
    from platformdirs import user_data_dir

    try:
        return Path(user_data_dir("vaezoo")) / "datasets"
    except RuntimeError as exc:
        raise DataError.about("cannot tell where the default data folder is: {why}; give {data_root}, or set "
                              "VAEZOO_DATA to the folder holding the datasets", why=exc) from None


def download_advice(where: DataRoot, leave_out: str | Phrase = "leave out both") -> Phrase:
    """How to let vaezoo download a dataset that ``where`` lacks, for the end of a "not found" message.

    Args:
        where: where vaezoo looked, and may not download into (``where.download`` is False).
        leave_out: how the message says to leave out the ``data_root`` argument and ``VAEZOO_DATA``.

    Returns:
        "LEAVE_OUT to let vaezoo download it into DEFAULT_FOLDER"; with ``VAEZOO_OFFLINE=1``, which downloads
        nothing, it says to unset that too (and only that where neither ``data_root`` nor VAEZOO_DATA chose
        ``where``).
    """
    chosen = isinstance(where.source, Phrase) or where.source == "VAEZOO_DATA"
    offline = setting_on("VAEZOO_OFFLINE")
    steps = (["{leave_out}"] if chosen or not offline else []) + (["unset VAEZOO_OFFLINE"] if offline else [])
    return Phrase(" and ".join(steps) + " to let vaezoo download it into {default}", leave_out=leave_out,
                  default=default_data_dir())


def check_data_root(root: str | os.PathLike | None, missing: bool = False) -> None:
    """Refuse a ``data_root`` (the CLI's ``--data-root``) that is not a folder, before anything is read from it:
    a file in its place, or, where ``missing``, no such path (else the dataset that reads it names what it looked
    for there). None reads ``VAEZOO_DATA``, refused likewise when it names something that is not a folder, or the
    default data folder.

    Raises:
        DataError: naming the path, what it is, and to give the folder holding the datasets.
    """
    if root is None:
        setting = os.environ.get("VAEZOO_DATA")
        if setting and (why := _not_a_folder(home_path(setting, "VAEZOO_DATA"))):
            raise DataError(f"VAEZOO_DATA {setting} {why}; set it to the folder holding the datasets, or unset it to "
                            f"use the default data folder")
        return
    path = home_path(root)  # as data_root reads it
    why = _not_a_folder(path) or ("does not exist" if missing and not os.path.lexists(path) else None)
    if why is None:
        return
    raise DataError.about("{data_root} {root} {why}; give the folder holding the datasets, or leave it out to read "
                          "them from VAEZOO_DATA or the default data folder", root=root, why=why)


def _not_a_folder(path: Path) -> str | None:
    """What ``path`` is, in words, where something that is not a folder stands there; None otherwise."""
    if path.is_dir() or not os.path.lexists(path):
        return None
    return "is a file, not a folder" if path.is_file() else "is not a folder"


def check_folders_readable(folders: tuple[Path, ...], name: str) -> None:
    """Refuse the first of ``folders`` (each inside the one before) that exists but may not be entered, before a
    dataset looks for its files there: they were taken for missing, or ``Permission denied`` named a file in it that
    need not exist. A folder that may be entered but not listed (``chmod 711``, as shared folders are) is taken:
    the datasets open their files by name.

    Raises:
        DataError: naming the dataset ``name`` and the folder, and what to do.
    """
    for folder in folders:
        if not folder.is_dir():
            return
        if not os.access(folder, os.X_OK):
            raise DataError.about("{name}: cannot read the folder {folder} (Permission denied); make it readable "
                                  "(chmod u+rx), or point {data_root} or VAEZOO_DATA at a copy you can read",
                                  name=name, folder=folder)


def data_root(root: str | os.PathLike | None) -> DataRoot:
    """The directory to read datasets from and whether downloading into it is allowed.

    An explicit ``root`` (``data_root``, the CLI's ``--data-root``) or ``VAEZOO_DATA`` names an existing copy
    (no download); otherwise :func:`default_data_dir`, where a missing dataset is downloaded unless
    ``VAEZOO_OFFLINE=1``.
    """
    if root is not None:
        return DataRoot(home_path(root), False, Phrase("{data_root}"))
    if os.environ.get("VAEZOO_DATA"):
        return DataRoot(home_path(os.environ["VAEZOO_DATA"], "VAEZOO_DATA"), False, "VAEZOO_DATA")
    if setting_on("VAEZOO_OFFLINE"):
        return DataRoot(default_data_dir(), False,
                        "the default data folder, which VAEZOO_OFFLINE=1 downloads nothing into")
    return DataRoot(default_data_dir(), True, "the default data folder")
