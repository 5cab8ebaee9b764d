"""Pictures of a VAE: latent traversals, reconstructions and samples from the prior.

Each function returns a :class:`Grid` of image tiles (rows x columns), which
renders to a tensor with ``torchvision.utils.make_grid`` and saves as a PNG
with a label drawn beside each row. Everything works from the latent-family
protocol (:class:`vaezoo.latents.LatentFamily`): each part says how to sweep it
(continuous families one dimension at a time, a categorical one category at a
time), whatever family, plugin or architecture the model has.

>>> model = vaezoo.load("jointvae-mnist")
>>> test_split = vaezoo.assemble.card_dataset(model.card, "../shared/datasets")
>>> traverse_dataset(model, test_split).save("traversal.png")
>>> sample(model, n=100, seed=0).save("samples.png")
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from vaezoo.context import real_number, whole_number
from vaezoo.data import ImageDataset, check_data_root
from vaezoo.entries.schema import SEED_LIMIT, Card
from vaezoo.errors import InputError, PluginError, VaezooError
from vaezoo.latents import LatentFamily, Posterior, Sweep
from vaezoo.model import VAE, checked_codes
from vaezoo.terminal import printable

PADDING = 2  # pixels between tiles
SCALE = 2  # default upscaling of each tile when rendering
BLANK = 1.0  # value of padding and of empty tiles (white)
LABEL_GAP = 6  # pixels around a row label in the left margin
LABEL_SIZE = (13, 22)  # the smallest and largest row label, in pixels: a quarter of the row's height between them
INACTIVE_KL = 0.01
"""Nats: a traversal row whose KL to the prior (averaged over data) is below this is an inactive dimension, which
the posterior leaves at the prior; :func:`fold_inactive` leaves such rows out."""
ENCODE_BATCH = 256
DEFAULT_SPAN = (-3.0, 3.0)  # traversal range, in prior standard deviations around the prior mean
MAX_SPAN = 100.0  # how far a traversal may go, in prior standard deviations: further, decoders only saturate
KL_IMAGES = 1000  # data images a traversal of a card's model averages the KL over
MAX_TILES = 10_000  # images in one picture: more is no picture to look at, and may not fit in memory
MAX_PIXELS = 2**27  # pixels in one picture (134 megapixels, 1.6 GB as floats)


@dataclass(frozen=True, eq=False)
class Grid:
    """Image tiles laid out in rows, with an optional label per row.

    Attributes:
        tiles: ``(rows, columns, channels, height, width)`` images in [0, 1], on the CPU;
            channels is 1 or 3. Empty places hold blank (white) tiles.
        labels: one label per row, or none.
    """

    tiles: Tensor
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.tiles.dim() != 5 or self.tiles.shape[2] not in (1, 3):
            raise ValueError(f"tiles must be (rows, columns, 1 or 3, H, W), got {tuple(self.tiles.shape)}")
        if self.labels and len(self.labels) != self.rows:
            raise ValueError(f"{len(self.labels)} labels for {self.rows} rows")

    @property
    def rows(self) -> int:
        return self.tiles.shape[0]

    @property
    def columns(self) -> int:
        return self.tiles.shape[1]

    def image(self, padding: int = PADDING, scale: int = SCALE) -> Tensor:
        """The tiles as one RGB image ``(3, H, W)`` with ``padding`` pixels around each tile.

        ``H = rows * (tile height * scale + padding) + padding`` and likewise for the width.

        Args:
            padding: pixels between tiles and around the border.
            scale: integer upscaling of each tile (nearest neighbour), to make small images legible.
        """
        from torchvision.utils import make_grid

        _check_scale(scale)
        if padding < 0:
            raise VaezooError.of_value("{padding} must be at least 0, got {got}", got=padding)
        height = self.rows * (self.tiles.shape[3] * scale + padding) + padding
        width = self.columns * (self.tiles.shape[4] * scale + padding) + padding
        if height * width > MAX_PIXELS:
            raise VaezooError(f"the picture would be {width:,} x {height:,} pixels, over the {MAX_PIXELS:,} one "
                              f"picture can have; lower the scale or draw fewer images")
        flat = self.tiles.flatten(0, 1).clamp(0, 1)
        if scale > 1:
            flat = F.interpolate(flat, scale_factor=scale, mode="nearest")
        grid = make_grid(flat, nrow=self.columns, padding=padding, pad_value=BLANK)
        if flat.shape[0] == 1:  # make_grid returns a lone image without its border
            grid = F.pad(grid, (padding,) * 4, value=BLANK)
        return grid

    def to_pil(self, padding: int = PADDING, scale: int = SCALE):
        """The grid as a PIL image, with each row's label drawn in a white margin on the left, on one line: a label
        may be a plugin's part name, whose control characters are drawn as escapes (``\\x1b``, ``\\n``).

        Args:
            padding, scale: as in :meth:`image`.

        Returns:
            A ``PIL.Image.Image`` in RGB; the grid of :meth:`image` occupies its right-hand side.
        """
        from PIL import Image, ImageDraw, ImageFont

        grid = self.image(padding, scale)
        picture = Image.fromarray(grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).numpy())
        if not self.labels:
            return picture
        row_height = self.tiles.shape[3] * scale + padding
        font = ImageFont.load_default(size=min(max(row_height // 4, LABEL_SIZE[0]), LABEL_SIZE[1]))
        labels = [printable(label) for label in self.labels]  # a plugin's part name: a newline would draw two lines
        margin = math.ceil(max(font.getlength(label) for label in labels)) + 2 * LABEL_GAP
        canvas = Image.new("RGB", (margin + picture.width, picture.height), "white")
        canvas.paste(picture, (margin, 0))
        draw = ImageDraw.Draw(canvas)
        for row, label in enumerate(labels):
            _, top, _, bottom = font.getbbox(label)
            middle = padding + row * row_height + (row_height - padding) / 2
            draw.text((LABEL_GAP, middle - (top + bottom) / 2), label, fill="black", font=font)
        return canvas

    def _repr_png_(self) -> bytes:
        """The grid as a PNG (:meth:`to_pil`): what a Jupyter notebook shows of a grid left at the end of a cell."""
        import io

        png = io.BytesIO()
        self.to_pil().save(png, format="PNG")
        return png.getvalue()

    def save(self, path: str | Path, padding: int = PADDING, scale: int = SCALE) -> Path:
        """Write the grid (with its labels) to ``path`` as a PNG, atomically.

        Returns:
            The path written.
        """
        from vaezoo.store.files import atomic_save

        path = check_picture_file(path, scale)
        picture = self.to_pil(padding, scale)
        atomic_save(path, lambda tmp: picture.save(tmp, format="PNG"))
        return path


def check_picture_file(path: str | Path, scale: int = SCALE) -> Path:
    """``path`` as a :class:`Path`, if :meth:`Grid.save` can write a PNG there at ``scale``: what ``vaezoo show``
    checks before the model is loaded, so that a picture is not drawn only to be refused.

    Raises:
        VaezooError: ``path`` is no ``.png`` name, or ``scale`` is below 1.
        OutputError: a folder (a FIFO, a device) stands at ``path``.
    """
    from vaezoo.store.files import check_target

    if Path(path).suffix.lower() != ".png":
        raise VaezooError(f"images are written as PNG; give a .png file name, not '{path}'")
    _check_scale(scale)
    check_target(Path(path))
    return Path(path)


def _check_scale(scale: int) -> None:
    if scale < 1:
        raise VaezooError.of_value("{scale} must be at least 1, got {got}", got=scale)


@dataclass(frozen=True)
class TraversalRow:
    """What one row of a traversal varies.

    Attributes:
        part: the latent part's name (``"z"`` for a single-family latent; ``inner.a`` for part ``a`` of a joint
            part ``inner``, as the card's layout names it).
        index: the dimension within a Gaussian part, or None for a categorical part
            (whose row shows each category in turn).
        code: the columns of the decoder input that the row changes.
        kl: the dimension's (or categorical part's) KL to the prior, averaged over the data; None without data.
    """

    part: str
    index: int | None
    code: slice
    kl: float | None

    @property
    def label(self) -> str:
        """``"part[index]  KL 1.23"``, or without the KL when there was no data."""
        name = self.part if self.index is None else f"{self.part}[{self.index}]"
        return name if self.kl is None else f"{name}  KL {self.kl:.2f}"


@dataclass(frozen=True, eq=False, kw_only=True)
class Traversal(Grid):
    """A :class:`Grid` of latent traversals; ``dimensions[i]`` says what row ``i`` varies."""

    dimensions: tuple[TraversalRow, ...]


def check_span(span: tuple[float, float]) -> tuple[float, float]:
    """``span``, a traversal range, as two floats, if it goes from low to high within :data:`MAX_SPAN` prior standard
    deviations of the prior mean (so every value it gives is a finite number).

    Raises:
        VaezooError: one line giving the range and the bounds it must keep, or saying that ``span`` is not two
            numbers (a bool is none: ``(True, 2)`` ran from 1).
    """
    try:
        bounds = [] if isinstance(span, str | bytes) else [real_number(value) for value in span]
    except TypeError:  # not a sequence (a number, a 0-d tensor)
        bounds = []
    if len(bounds) != 2 or None in bounds:
        raise VaezooError.about("{span} is a traversal range, two numbers from low to high, e.g. (-2.5, 2.5), got "
                                "{got!r}", got=span)
    low, high = map(float, bounds)
    if not -MAX_SPAN <= low < high <= MAX_SPAN:  # false for NaN and for infinities
        raise VaezooError(f"the traversal range must go from low to high within {-MAX_SPAN:g}..{MAX_SPAN:g} prior "
                          f"standard deviations, got {low:g}..{high:g}")
    return low, high


def traverse(model: VAE, data: Tensor | None = None, reference: Tensor | None = None, steps: int = 10,
             span: tuple[float, float] = DEFAULT_SPAN) -> Traversal:
    """Decode the latent one dimension at a time: one row per Gaussian dimension, one per categorical part.

    A Gaussian dimension's row takes ``steps`` values evenly spaced from
    ``span[0]`` to ``span[1]`` prior standard deviations around the prior mean.
    A categorical part's row shows each of its categories in turn (so a row is
    as long as the longer of ``steps`` and the category count; shorter rows end
    in blank tiles). Every other dimension stays at the posterior mode of
    ``reference``, or without one at the prior mean (Gaussian parts) and the
    first category (categorical parts).

    With ``data``, rows are ordered by their KL to the prior averaged over
    ``data``, largest first, so the dimensions the model uses come first;
    without, they follow the latent's layout.

    Args:
        model: the VAE; it is run in eval mode and left in the mode it was in.
        data: images ``(N, C, H, W)`` in [0, 1] to average the KL over (e.g. a batch of the test split).
        reference: one image ``(C, H, W)`` whose code holds the dimensions a row does not vary.
        steps: values per Gaussian dimension (>= 2).
        span: the range of values, in prior standard deviations from the prior mean.

    Returns:
        A :class:`Traversal`, labelled ``part[dimension]  KL value``.
    """
    if whole_number(steps) is None or steps < 2:  # the CLI's --n: no keyword named
        raise VaezooError(f"a traversal needs at least 2 steps (a whole number), got {steps!r}")
    steps = whole_number(steps)
    _check_tiles(steps)
    low, high = check_span(span)
    device, dtype = _device_dtype(model)
    with _evaluating(model), torch.no_grad():
        base = _base_code(model, reference)
        kl = _mean_kl(model, data) if data is not None else None
        rows: list[TraversalRow] = []
        codes: list[Tensor] = []
        for name, family, start in _leaf_parts(model.latent):
            for sweep in _checked_sweeps(family, steps, (low, high)):
                columns = slice(start + sweep.columns.start, start + sweep.columns.stop)
                code = base.repeat(len(sweep.values), 1)
                code[:, columns] = sweep.values.to(device, dtype)
                if kl is not None and sweep.kl_index >= len(kl[name]):
                    raise PluginError(f"{_family(family)}: kl() has {len(kl[name])} values per image, fewer than its "
                                      f"sweeps index ({sweep.kl_index + 1})")
                rows.append(TraversalRow(name, sweep.index, columns, None if kl is None else kl[name][sweep.kl_index]))
                codes.append(code)
        order = sorted(range(len(rows)), key=lambda r: -rows[r].kl) if kl is not None else range(len(rows))
        rows, codes = [rows[r] for r in order], [codes[r] for r in order]
        _check_tiles(len(codes) * max(len(c) for c in codes))  # the layout pads shorter rows with blanks
        images = _decode_mean(model, torch.cat(codes)).split([len(c) for c in codes])
    return Traversal(tiles=_layout(list(images)), labels=tuple(r.label for r in rows), dimensions=tuple(rows))


def reconstruct(model: VAE, images: Tensor, columns: int = 10) -> Grid:
    """Images above their reconstructions (decoded from the posterior mode).

    Rows come in pairs: a row of up to ``columns`` inputs, then their reconstructions.

    Args:
        model: the VAE; it is run in eval mode and left in the mode it was in.
        images: ``(N, C, H, W)`` in [0, 1], shaped like the model's input.
        columns: images per row.

    Returns:
        A :class:`Grid` of ``2 * ceil(N / columns)`` rows labelled "input" and "reconstruction".
    """
    columns = _whole("columns", columns, 1)
    model.check_input(images)
    if len(images) == 0:
        raise InputError("no images to reconstruct")
    _check_tiles(2 * len(images))
    device, dtype = _device_dtype(model)
    with _evaluating(model), torch.no_grad():
        mode = model.encode(images.to(device, dtype), checked=True).mode
        recon = model.decode(checked_codes(model.latent, mode, len(images), "the posterior's mode")).cpu()
    rows: list[Tensor] = []
    for start in range(0, len(images), columns):
        rows += [images[start:start + columns].float().cpu(), recon[start:start + columns].float()]
    return Grid(_layout(rows, min(columns, len(images))), ("input", "reconstruction") * (len(rows) // 2))


def sample(model: VAE, n: int = 64, seed: int = 0, columns: int = 8) -> Grid:
    """``n`` images decoded from codes drawn from the prior, the same ones for the same ``seed``.

    For a joint latent, Gaussian parts are drawn from N(0, I) and each
    categorical part uniformly (each family's ``sample_prior``).

    Args:
        model: the VAE; it is run in eval mode and left in the mode it was in.
        n: number of samples.
        seed: seed of the random generator (on the model's device).
        columns: images per row.

    Returns:
        A :class:`Grid` of ``ceil(n / columns)`` rows.
    """
    n = _whole("n", n, 1)
    columns = _whole("columns", columns, 1)
    seed = _check_seed(seed)
    _check_tiles(n)
    device, _ = _device_dtype(model)
    generator = torch.Generator(device=device).manual_seed(seed)
    with _evaluating(model):
        images = model.sample(n, generator=generator).float().cpu()
    return Grid(_layout(list(images.split(columns)), min(columns, n)))


def data_sample(dataset: ImageDataset, n: int, seed: int = 0) -> Tensor:
    """``n`` images of ``dataset`` drawn without replacement, the same ones for the same ``seed``.

    Returns:
        ``(min(n, len(dataset)), C, H, W)`` floats in [0, 1] on the CPU.
    """
    n = _whole("n", n, 1)
    generator = torch.Generator().manual_seed(_check_seed(seed))
    index = torch.randperm(len(dataset), generator=generator)[:n]
    return dataset.batch(index)


def fold_inactive(traversal: Traversal, min_kl: float = INACTIVE_KL) -> tuple[Traversal, tuple[TraversalRow, ...]]:
    """``traversal`` without its inactive rows (KL below ``min_kl`` nats), and the rows left out.

    Rows drawn without data (no KL) are kept; so is the first row, should every row be inactive.

    Returns:
        ``(the traversal of the rows kept, the rows folded)``, each in the traversal's order.

    Raises:
        VaezooError: ``min_kl`` is no number of nats >= 0 (NaN folded every row but the first, True ran as 1).
    """
    if (least := real_number(min_kl)) is None or not least >= 0:
        raise VaezooError.about("{min_kl} is the KL, in nats, below which a row is folded: a number >= 0, got {got!r}",
                                got=min_kl)
    keep = [i for i, row in enumerate(traversal.dimensions) if row.kl is None or row.kl >= least] or [0]
    folded = tuple(row for i, row in enumerate(traversal.dimensions) if i not in keep)
    kept = Traversal(tiles=traversal.tiles[keep], labels=tuple(traversal.labels[i] for i in keep),
                     dimensions=tuple(traversal.dimensions[i] for i in keep))
    return kept, folded


def traverse_dataset(model: VAE, dataset: ImageDataset, images: int = KL_IMAGES, seed: int = 0, steps: int = 10,
                     span: tuple[float, float] = DEFAULT_SPAN) -> Traversal:
    """:func:`traverse` with the KL averaged over ``images`` images of ``dataset`` drawn with ``seed``.

    The dimensions a row does not vary stay at the code of the first of those images.
    """
    data = data_sample(dataset, _whole("images", images, 1), seed)
    return traverse(model, data, reference=data[0], steps=steps, span=span)


def _whole(keyword: str, value: object, least: int) -> int:
    """``value`` as an int, refused unless it is a whole number of at least ``least`` (``keyword`` names it)."""
    number = whole_number(value)
    if number is None or number < least:
        raise VaezooError.of_value(f"{{{keyword}}} must be a whole number >= {least}, got {{got!r}}", got=value)
    return number


def _check_seed(seed: object) -> int:
    number = whole_number(seed)
    if number is None or not 0 <= number < SEED_LIMIT:
        raise VaezooError.of_value("{seed} must be a whole number from 0 to 2^63 - 1, got {got!r}", got=seed)
    return number


def _layout(rows: list[Tensor], columns: int | None = None) -> Tensor:
    """Stack rows of tiles ``(n_i, C, H, W)`` into ``(rows, columns, C, H, W)``, padding with blank tiles."""
    columns = columns or max(len(r) for r in rows)
    tiles = torch.full((len(rows), columns, *rows[0].shape[1:]), BLANK)
    for i, row in enumerate(rows):
        tiles[i, :len(row)] = row.float().cpu()
    return tiles


def _base_code(model: VAE, reference: Tensor | None) -> Tensor:
    """The code a traversal starts from: ``reference``'s posterior mode, or the latent's reference code."""
    device, dtype = _device_dtype(model)
    if reference is not None:
        reference = reference.unsqueeze(0) if isinstance(reference, Tensor) and reference.dim() == 3 else reference
        model.check_input(reference)
        if len(reference) != 1:  # the first of a batch was taken, silently
            raise InputError(f"a traversal's reference is one image (C, H, W), got a batch of {len(reference)}; "
                             f"give one of them, e.g. images[0]")
        mode = model.encode(reference[:1].to(device, dtype), checked=True).mode
        return checked_codes(model.latent, mode, 1, "the posterior's mode")[0]
    try:
        code = model.latent.reference_code()
    except NotImplementedError:
        raise PluginError(f"{_family(model.latent)}: it has neither reference_code() of its own nor the prior the "
                          f"default one reads; give it one of them (docs/plugins.md)") from None
    return checked_codes(model.latent, code.unsqueeze(0) if isinstance(code, Tensor) else code, 1,
                          "reference_code()")[0].to(device, dtype)


def _mean_kl(model: VAE, data: Tensor) -> dict[str, list[float]]:
    """Each part's KL to the prior per KL dimension, averaged over ``data``."""
    model.check_input(data)
    if len(data) == 0:
        raise InputError("no images to average the KL over")
    device, dtype = _device_dtype(model)
    families = {name: family for name, family, _ in _leaf_parts(model.latent)}
    totals: dict[str, Tensor] = {}
    for chunk in data.split(ENCODE_BATCH):
        for name, posterior in _leaf_posteriors(model.encode(chunk.to(device, dtype), checked=True)):
            kl = posterior.kl()
            if not (isinstance(kl, Tensor) and kl.dim() >= 1 and kl.shape[0] == len(chunk)):
                raise PluginError(f"{_family(families[name])}: kl() is {_described(kl)}, not one row per "
                                  f"image ({len(chunk)}, ...)")
            totals[name] = totals.get(name, 0) + kl.double().sum(0)
    means = {name: (total / len(data)).tolist() for name, total in totals.items()}
    for name, values in means.items():
        for value in values:
            if not (math.isfinite(value) and value >= -1e-4):  # a KL is >= 0, up to float rounding
                raise PluginError(f"{_family(families[name])}: kl() averages {value:.6g} over the images; "
                                  f"a KL is a finite number >= 0")
    return means


def _leaf_parts(family: LatentFamily, prefix: str = "", start: int = 0) -> Iterator[tuple[str, LatentFamily, int]]:
    """The parts of ``family`` that have no parts of their own, in code order, each with where its columns start in
    the code, named as the card's layout names them (``inner.a``: part ``a`` of the joint part ``inner``): a
    traversal sweeps these, as a joint part has no prior of its own to sweep."""
    slices = family.part_slices()
    for name, part in family.parts.items():
        if part is family or list(part.parts.values()) == [part]:
            yield prefix + name, part, start + slices[name].start
        else:
            yield from _leaf_parts(part, f"{prefix}{name}.", start + slices[name].start)


def _leaf_posteriors(posterior: Posterior, prefix: str = "") -> Iterator[tuple[str, Posterior]]:
    """The parts of ``posterior`` that have no parts of their own, named as :func:`_leaf_parts` names their
    families."""
    for name, part in posterior.parts.items():
        if part is posterior or list(part.parts.values()) == [part]:
            yield prefix + name, part
        else:
            yield from _leaf_posteriors(part, f"{prefix}{name}.")


def _family(family: object) -> str:
    """How a message names a latent family: its class and the module (a plugin's) defining it."""
    return f"latent family {type(family).__qualname__} ({type(family).__module__})"


def _described(value: object) -> str:
    return f"a tensor of shape {tuple(value.shape)}" if isinstance(value, Tensor) else f"a {type(value).__name__}"


def _checked_sweeps(family: LatentFamily, steps: int, span: tuple[float, float]) -> list[Sweep]:
    """``family.sweeps(steps, span)`` if they are rows a traversal can draw: at least one, each setting columns of the
    family's code to finite values of their width; else a :class:`PluginError` naming the family."""
    try:
        sweeps = family.sweeps(steps, span)
    except NotImplementedError:  # a traceback from vaezoo show, and the gallery stopped on it
        raise PluginError(f"{_family(family)}: it has neither sweeps() of its own nor the prior the default sweeps() "
                          f"reads; give it one of them (docs/plugins.md)") from None
    if not (isinstance(sweeps, list | tuple) and all(isinstance(sweep, Sweep) for sweep in sweeps)):
        raise PluginError(f"{_family(family)}: sweeps() returned a {type(sweeps).__name__}, not a list of "
                          f"vaezoo.latents.Sweep")
    if not sweeps:
        raise PluginError(f"{_family(family)}: sweeps() gave no row: a traversal would leave the part out")
    for sweep in sweeps:
        width = len(range(family.code_size)[sweep.columns])
        if not width:
            raise PluginError(f"{_family(family)}: a sweep sets 0 of the code's {family.code_size} columns "
                              f"({sweep.columns}); each sweep sets at least one")
        if not (isinstance(sweep.values, Tensor) and sweep.values.dim() == 2 and len(sweep.values)
                and sweep.values.shape[1] == width):
            raise PluginError(f"{_family(family)}: a sweep sets {width} of the code's {family.code_size} columns "
                              f"({sweep.columns}) to {_described(sweep.values)}, not (n >= 1, {width}) values")
        if not torch.isfinite(sweep.values).all():
            raise PluginError(f"{_family(family)}: a sweep's values are not finite (NaN or inf)")
    return list(sweeps)


def _decode_mean(model: VAE, codes: Tensor) -> Tensor:
    return model.decode(codes).float().cpu()


def _check_tiles(count: int) -> None:
    if count > MAX_TILES:
        raise VaezooError(f"the picture would hold {count:,} images, over the {MAX_TILES:,} one picture can; "
                          f"ask for fewer")


def _device_dtype(model: VAE) -> tuple[torch.device, torch.dtype]:
    parameter = next(model.parameters())
    return parameter.device, parameter.dtype


@contextmanager
def _evaluating(model: VAE) -> Iterator[None]:
    """Run ``model`` in eval mode and restore its mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


PICTURES = ("traverse", "reconstruct", "sample")
"""What :func:`show` draws."""
def show(card: Card, what: str, n: int, *, seed: int = 0, columns: int = 10,
         span: tuple[float, float] = DEFAULT_SPAN, data_root=None, use_data: bool = True,
         fold_below: float | None = None, device=None, out: str | Path | None = None,
         scale: int = SCALE) -> tuple[Grid, list[str]]:
    """The picture ``vaezoo show`` draws of ``card``'s pretrained model, and what to say of it; saved as a PNG at
    ``out`` too, if given.

    Args:
        card: the card whose model is drawn.
        what: ``"traverse"``, ``"reconstruct"`` or ``"sample"``.
        n: values per traversal row, images to reconstruct, or samples.
        seed: picks the samples and the test images.
        columns: images per row of reconstructions and samples.
        span: traversal range, in prior standard deviations, of a family that sweeps that way.
        data_root: where the test split lives (``traverse`` ranks its rows by KL over test images).
        use_data: False traverses without test images (rows in latent order); ``reconstruct`` needs them.
        fold_below: leave out the traversal rows whose KL is below this many nats (needs test images).
        device: where to run the model (``"auto"`` too: :func:`vaezoo.devices.usable_device`).
        out: where to save the picture (:meth:`Grid.save`), checked before the model is loaded.
        scale: the picture's upscaling, with ``out``.

    Returns:
        The grid, and lines that say how it was drawn (for stderr).

    Raises:
        VaezooError: options that do not go together, or an ``out`` or ``scale`` :meth:`Grid.save` refuses,
            checked before the model is loaded.
    """
    from vaezoo.assemble import card_dataset, load_model

    if what not in PICTURES:
        raise VaezooError(f"no picture '{what}'; choose one of {', '.join(PICTURES)}")
    if not use_data and what == "reconstruct":
        raise VaezooError("reconstruct needs test images; drop --no-data")
    if fold_below is not None and (not use_data or what != "traverse"):
        raise VaezooError("--fold-below folds traversal rows by their KL over test images; give it to traverse "
                          "without --no-data")
    span = check_span(tuple(span))  # before the model is loaded
    check_data_root(data_root)
    if out is not None:
        check_picture_file(out, scale)
    model = load_model(card, device)
    notes: list[str] = []
    if what == "sample":
        grid = sample(model, n, seed=seed, columns=columns)
    elif what == "reconstruct":
        grid = reconstruct(model, data_sample(card_dataset(card, data_root), n, seed), columns)
    elif not use_data:
        grid = traverse(model, steps=n, span=span)
    else:
        test_split = card_dataset(card, data_root)
        grid = traverse_dataset(model, test_split, seed=seed, steps=n, span=span)
        if fold_below is not None:
            grid, folded = fold_inactive(grid, fold_below)
            notes.append(f"{len(folded)} rows with KL below {fold_below:g} nats left out")
        notes.append(f"rows ordered by KL averaged over {min(KL_IMAGES, len(test_split))} test images (seed {seed}); "
                     f"other dimensions at the code of the first of them")
    if out is not None:
        grid.save(out, scale=scale)
    return grid, notes
