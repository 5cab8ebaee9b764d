"""A model's input contract, and the transform that turns images into that input.

Every vaezoo model takes float batches ``(N, C, H, W)`` with values in [0, 1], ``C`` and ``H = W`` the
channels and size of the dataset it was trained on (what :class:`vaezoo.data.ImageDataset` batches are).
:func:`for_model` gives a model's :class:`ModelInput`: it checks a batch against the contract and turns
PIL images, uint8 tensors or torchvision samples into such a batch, resizing them with the filter the
dataset pipeline used (the card's ``[input]`` section names it), so raw dataset images give exactly the
input the model was trained and evaluated on: the grey levels. A dataset option that then draws the pixels at
random (MNIST's ``binarize = "dynamic"``) is the dataset's, not part of the transform; ``torch.bernoulli`` of
the transform's output draws them as it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from vaezoo.errors import InputError

LOW, HIGH = 0.0, 1.0
"""The value range of every model's input."""

HINT = "turn images into model input with model.preprocess(images) (vaezoo.data.transforms.for_model(model))"


@dataclass(frozen=True)
class ModelInput:
    """What a model takes as input, and how to make it.

    Attributes:
        channels: channels of the input.
        image_size: its height and width.
        interpolation: the PIL filter (``Image.Resampling``'s name in lower case) that resizes images of
            another size.
        description: how the dataset's images became the input, in words ("" when the card does not say).
    """

    channels: int
    image_size: int
    interpolation: str = "bilinear"
    description: str = ""

    def __str__(self) -> str:
        return f"float images (N, {self.channels}, {self.image_size}, {self.image_size}) in [{LOW:g}, {HIGH:g}]"

    def check(self, x: Any) -> None:
        """Refuse ``x`` unless it is a batch this model takes: the shape always, the range by one min/max pass.

        Args:
            x: what was handed to the model.

        Raises:
            InputError: one line naming what was expected, what came, and the transform to use.
        """
        if not isinstance(x, Tensor):
            raise InputError(f"the model takes {self}, got {type(x).__name__}; {HINT}")
        _require_strided(x)
        expected = (self.channels, self.image_size, self.image_size)
        if x.dim() == 5 and tuple(x.shape[1:]) == (1, *expected):
            raise InputError(f"the model takes {self}, got shape {tuple(x.shape)}: batches of batches of one image, "
                             f"what a DataLoader makes of a dataset whose transform gives batches; give the dataset "
                             f"transform=vaezoo.data.transforms.for_model(model).per_image, which gives one image")
        if tuple(x.shape) == expected:
            raise InputError(f"the model takes {self}, got shape {tuple(x.shape)}: one image without the batch "
                             f"dimension; give x.unsqueeze(0), a batch of one image, or {HINT}")
        if x.dim() != 4 or tuple(x.shape[1:]) != expected:
            raise InputError(f"the model takes {self}, got shape {tuple(x.shape)}; {HINT}")
        if not x.is_floating_point():
            raise InputError(f"the model takes {self}, got {str(x.dtype).removeprefix('torch.')} values; {HINT}")
        if x.numel() and not tracing():  # the values are data a traced program cannot branch on
            low, high = torch.aminmax(x.detach())
            if not (low >= LOW and high <= HIGH):  # also refuses NaN, for which both comparisons are false
                finite = torch.isfinite(x.detach()).flatten(1).all(1)
                if not finite.all():  # one NaN pixel made the range [nan, nan], and no transform mends it
                    raise InputError(f"the model takes {self}, got NaN or infinite values in {int((~finite).sum()):,} "
                                     f"of the {len(x):,} images; give finite values in [{LOW:g}, {HIGH:g}]")
                raise InputError(f"the model takes {self}, got values in {_range(low.item(), high.item())}; {HINT}")

    def __call__(self, image: Any) -> Tensor:
        """Turn ``image`` into a batch this model takes.

        Integer images are 8-bit (0-255) and are resized in 8 bits, then divided by 255, as the dataset
        pipeline does; float images must already be in [0, 1]. An image of another size is resized to
        ``image_size`` x ``image_size`` with :attr:`interpolation` (the aspect ratio is not kept).

        Args:
            image: a PIL image (converted to grey or RGB as the model needs; mode 'F' is taken as floats in
                [0, 1], and the integer modes 'I' and 'I;16' are refused); a uint8, bool or
                float tensor or numpy array shaped ``(H, W)``, ``(C, H, W)`` or ``(N, C, H, W)``; a
                torchvision dataset sample ``(image, target)``, or a ``DataLoader``'s batch of them as its
                default collate gives it, ``[images, targets]``, of which the images are taken; or a list of
                these, whose batches are joined in order.

        Returns:
            float32 ``(N, C, H, W)`` in [0, 1] on the device ``image`` was on (N = 1 for one image).

        Raises:
            InputError: an input that cannot be turned into the model's, saying why.
        """
        if isinstance(image, tuple) and len(image) == 2 or isinstance(image, list) and _images_and_targets(image):
            image = image[0]
        if isinstance(image, list):  # as an image processor takes them (a file's images, of any sizes)
            if not image:
                raise InputError("an empty list holds no image to turn into model input")
            return torch.cat([self(one) for one in image])
        if _is_pil(image):
            return self._from_pil(image)
        if isinstance(image, np.ndarray):
            image = torch.from_numpy(np.ascontiguousarray(image))
        if not isinstance(image, Tensor):
            raise InputError(f"cannot turn {type(image).__name__} into model input; give a PIL image, a tensor or "
                             f"array (H, W), (C, H, W) or (N, C, H, W), a dataset sample (image, target), or a list "
                             f"of these")
        return self._from_tensor(image)

    def per_image(self, image: Any) -> Tensor:
        """Turn one image into the model's input for one image, ``(C, H, W)``: the transform of a dataset whose
        samples a ``DataLoader`` stacks into batches, as torchvision's ``weights.transforms()`` is::

            torchvision.datasets.MNIST(root, train=False, transform=for_model(model).per_image)

        Args:
            image: one image, as :meth:`__call__` takes it (a batch of one image too).

        Returns:
            float32 ``(C, H, W)`` in [0, 1].

        Raises:
            InputError: as :meth:`__call__`, or ``image`` holds several images.
        """
        batch = self(image)
        if len(batch) != 1:
            raise InputError(f"per_image takes one image, got {len(batch)}; turn a batch into model input with "
                             f"model.preprocess(images)")
        return batch[0]

    def _from_pil(self, image) -> Tensor:
        if 0 in image.size:
            raise InputError(f"the PIL image is {image.size[0]}x{image.size[1]} pixels: it has no pixels to give")
        if image.mode == "F":  # 32-bit floats, which converting to 8 bits would truncate
            return self._from_tensor(torch.from_numpy(np.array(image, dtype=np.float32)))
        if image.mode.startswith("I"):
            raise InputError(f"a PIL image of mode {image.mode!r} holds integers of no fixed range; scale it to "
                             f"8 bits (mode 'L') or to floats in [0, 1] first")
        if self.channels not in (1, 3):
            raise InputError(f"a PIL image has 1 or 3 channels, the model takes {self.channels}; give a tensor")
        image = image.convert("L" if self.channels == 1 else "RGB")
        if image.size != (self.image_size, self.image_size):
            image = image.resize((self.image_size, self.image_size), _filter(self.interpolation))
        pixels = torch.from_numpy(np.array(image, dtype=np.uint8))
        pixels = pixels.unsqueeze(0) if pixels.dim() == 2 else pixels.permute(2, 0, 1)
        return pixels.unsqueeze(0).to(torch.float32).div_(255)

    def _from_tensor(self, x: Tensor) -> Tensor:
        _require_strided(x)
        if x.dim() == 2:
            x = x[None, None]
        elif x.dim() == 3:
            if x.shape[0] == 3 and self.channels == 1:
                raise InputError("a (3, H, W) input could be one RGB image or three grey images; pass "
                                 "images.unsqueeze(1) for three grey images, or image[None] (or the PIL image) "
                                 "for one RGB image")
            if x.shape[0] not in (1, self.channels):
                hint = ("an image held as (H, W, C), as numpy and PIL hold them, is passed as image.permute(2, 0, 1) "
                        "(numpy: image.transpose(2, 0, 1)), or as the PIL image itself" if x.shape[-1] in (1, 3, 4)
                        else "for a batch of grey images (N, H, W) pass images.unsqueeze(1)")
                raise InputError(f"a 3-d input is one image (C, H, W), and {x.shape[0]} is not a channel count "
                                 f"(the model takes {self.channels}); {hint}")
            x = x[None]
        elif x.dim() != 4:
            raise InputError(f"images are (H, W), (C, H, W) or (N, C, H, W), got shape {tuple(x.shape)}")
        if x.shape[0] and 0 in x.shape[2:]:
            raise InputError(f"images of shape {tuple(x.shape)} have no pixels to give")
        if x.dtype == torch.bool:
            x = x.to(torch.uint8) * 255
        if x.dtype == torch.uint8:
            return self._from_bytes(x)
        if not x.is_floating_point():
            raise InputError(f"integer images must be uint8 (0-255), got {str(x.dtype).removeprefix('torch.')}")
        return self._from_floats(x)

    def _from_bytes(self, x: Tensor) -> Tensor:
        if x.shape[1] != self.channels:
            x = self._convert(x)
        if tuple(x.shape[2:]) != (self.image_size, self.image_size):
            x = self._resize(x, "L")
        return x.to(torch.float32).div_(255)

    def _from_floats(self, x: Tensor) -> Tensor:
        if x.shape[1] != self.channels:
            raise InputError(f"the model takes {self.channels}-channel images, got {x.shape[1]} channels of floats; "
                             f"give uint8 or PIL images to have grey and RGB converted")
        if x.numel():
            low, high = torch.aminmax(x.detach())
            if not (low >= LOW and high <= HIGH):
                if not torch.isfinite(x.detach()).all():
                    raise InputError("float images hold NaN or infinite values; give finite values in "
                                     f"[{LOW:g}, {HIGH:g}]")
                fix = "map images in [-1, 1] with (x + 1) / 2" if low < LOW else "divide 0-255 floats by 255"
                if low >= LOW - ROUNDING and high <= HIGH + ROUNDING:
                    fix = f"clamp values just outside it (a rounding's, a resize's) with x.clamp({LOW:g}, {HIGH:g})"
                raise InputError(f"float images must be in [{LOW:g}, {HIGH:g}], got values in "
                                 f"{_range(low.item(), high.item())}; {fix}, or pass uint8")
        x = x.to(torch.float32)
        if tuple(x.shape[2:]) == (self.image_size, self.image_size):
            return x
        if x.requires_grad:
            raise InputError(f"float images of {x.shape[2]}x{x.shape[3]} that require grad: resizing them to the "
                             f"model's {self.image_size}x{self.image_size} goes through PIL, which carries no "
                             f"gradients; resize them yourself (torch.nn.functional.interpolate) to keep the graph, "
                             f"or detach them")
        # A filter with negative lobes (bicubic, lanczos) overshoots at edges; the contract is [0, 1].
        return self._resize(x, "F").clamp_(LOW, HIGH)

    def _convert(self, x: Tensor) -> Tensor:
        """uint8 grey images to RGB or back, as PIL's ``Image.convert`` does."""
        modes = {1: "L", 3: "RGB"}
        if x.shape[1] not in modes or self.channels not in modes:
            raise InputError(f"cannot turn {x.shape[1]}-channel images into the model's {self.channels} channels; "
                             f"vaezoo converts between grey (1) and RGB (3)")
        from PIL import Image

        pixels = x.cpu().permute(0, 2, 3, 1).numpy()
        converted = [np.asarray(Image.fromarray(p.squeeze(-1) if x.shape[1] == 1 else p, modes[x.shape[1]])
                                .convert(modes[self.channels])) for p in pixels]
        out = torch.from_numpy(np.stack(converted).reshape(*pixels.shape[:3], self.channels))
        return out.permute(0, 3, 1, 2).to(x.device)

    def _resize(self, x: Tensor, mode: str) -> Tensor:
        """Each channel of each image resized to ``image_size`` with PIL in ``mode`` ("L": 8-bit, "F": float)."""
        from PIL import Image

        size, resample = (self.image_size, self.image_size), _filter(self.interpolation)
        planes = x.cpu().numpy()
        out = np.empty((*planes.shape[:2], *size), dtype=planes.dtype)
        for index in np.ndindex(*planes.shape[:2]):
            out[index] = np.asarray(Image.fromarray(planes[index], mode).resize(size, resample))
        return torch.from_numpy(out).to(x.device)


def for_model(model) -> ModelInput:
    """The input contract of ``model``, which is also the transform into its input.

    Channels and size are the model's (its dataset's); the resize filter and the description come from the
    card's ``[input]`` section, when the model has a card that has one.

    Args:
        model: a :class:`vaezoo.model.VAE`.

    Returns:
        Its :class:`ModelInput`: ``for_model(model)(pil_image)`` is a batch ``model`` takes, and
        ``for_model(model).per_image`` a dataset's transform (one image in, one image out).

    Raises:
        TypeError: ``model`` is not a model (a card, a name): for a card's transform without its weights,
            ``for_model(vaezoo.build_model(card))``.
    """
    if not (hasattr(model, "channels") and hasattr(model, "image_size")):  # a card's geometry is its dataset's
        raise TypeError(f"for_model takes a model (vaezoo.load(NAME)), not {type(model).__name__}; for a card's "
                        f"transform without loading its weights: for_model(vaezoo.build_model(card))")
    section = getattr(getattr(model, "card", None), "input", None)
    if section is None:
        return ModelInput(model.channels, model.image_size)
    return ModelInput(model.channels, model.image_size, section.interpolation, section.transform)


ROUNDING = 0.01
"""How far outside [0, 1] float images may be for the fix their refusal gives to be a clamp (an overshoot of a
resize or a rounding), not a rescaling."""


def _range(low: float, high: float) -> str:
    """``[low, high]`` as a message shows the range of refused images: to 6 digits, but an end outside [0, 1] that
    those would round into it in full (1.0000001 read "[1, 1]", a range the message says is taken)."""
    def shown(value: float) -> str:
        text = f"{value:g}"
        return text if LOW <= value <= HIGH or not LOW <= float(text) <= HIGH else repr(value)

    return f"[{shown(low)}, {shown(high)}]"


def _require_strided(x: Tensor) -> None:
    """Refuse a sparse (or other non-dense) tensor of images, whose values the checks cannot read (torch's error was
    "Could not run 'aten::aminmax' with arguments from the 'SparseCPU' backend")."""
    if x.layout != torch.strided:
        raise InputError(f"the model takes images as a dense tensor, got a {str(x.layout).removeprefix('torch.')} "
                         f"one; give x.to_dense()")


def tracing() -> bool:
    """Whether torch.compile or torch.export is tracing the model: its input values are no numbers then, so a check
    of them (finite, in range) runs only eagerly."""
    return torch.compiler.is_compiling() or torch.compiler.is_exporting()


def _is_pil(image: Any) -> bool:
    return type(image).__module__.startswith("PIL.")


def _images_and_targets(items: list[Any]) -> bool:
    """Whether ``items`` is a ``DataLoader``'s batch of ``(image, target)`` samples, ``[images, targets]`` (its
    default collate makes a list of a tuple), not a list of two images: its second item is no image, nor a list of
    them, but labels ``(N,)``, one label, or targets of a type no image has (int64 attributes ``(N, K)``).

    Raises:
        InputError: the second item could be either, rows of floats, bools or uint8 as many as the first item's
            images (a split's factors ``(N, K)`` or a grey image ``(H, W)``, masks ``(N, H, W)`` or an image
            ``(C, H, W)``): taken as one, it would be the other.
    """
    if len(items) != 2 or _is_pil(items[1]) or isinstance(items[1], list):
        return False
    images, second = items
    if getattr(second, "ndim", 0) < 2 or not _pixel_type(second):
        return True
    if second.ndim in (2, 3) and getattr(images, "ndim", 0) == 4 and len(images) == len(second):
        raise InputError(f"a list of images {tuple(images.shape)} and a {_pixel_type(second)} {tuple(second.shape)} "
                         f"tensor could be a DataLoader's [images, targets] or two images; give the images alone "
                         f"(model.preprocess(batch[0])), or the image as a batch of one, (1, C, H, W)")
    return False


def _pixel_type(x: Any) -> str:
    """The dtype of ``x`` where an image can have it (uint8, bool, floats), else an empty string."""
    name = str(getattr(x, "dtype", "")).removeprefix("torch.")
    return name if name in ("uint8", "bool") or name.startswith(("float", "bfloat")) else ""


def _filter(name: str):
    from PIL import Image

    if name.upper() not in Image.Resampling.__members__:
        raise InputError(f"unknown interpolation '{name}'; use one of "
                         f"{', '.join(m.lower() for m in Image.Resampling.__members__)}")
    return Image.Resampling[name.upper()]
