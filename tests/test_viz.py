"""vaezoo.evaluation.viz: traversals, reconstructions and samples, drawn from any model's latent."""

import math
import re

import numpy as np
import pytest
import torch
from PIL import Image

from vaezoo.assemble import build_part
from vaezoo.cli import main
from vaezoo.data import ImageDataset
from vaezoo.errors import InputError, VaezooError
from vaezoo.evaluation import viz
from vaezoo.latents import LatentFamily

IMAGE_SIZE = 16
CONTINUOUS = 3
CATEGORIES = (4, 6)


def tiny_vae(seed: int = 0, latent=None):
    """A randomly initialised 16x16 VAE: 3 Gaussian dimensions, then a 4-way and a 6-way categorical."""
    torch.manual_seed(seed)
    latent = latent or {"type": "joint", "parts": [
        {"type": "gaussian", "name": "style", "dim": CONTINUOUS},
        *({"type": "gumbel_categorical", "name": f"class{i}", "categories": k} for i, k in enumerate(CATEGORIES)),
    ]}
    return build_part("architecture", {"type": "vae", "image_size": IMAGE_SIZE, "channels": 1, "latent": latent,
                                       "encoder": {"type": "conv_encoder", "hidden": 32},
                                       "decoder": {"type": "conv_decoder", "hidden": 32}}).eval()


def images(n: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 1, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(seed))


def grid_extent(count: int, tile: int, padding: int) -> int:
    """Pixels spanned by ``count`` tiles of ``tile`` pixels with ``padding`` between and around them."""
    return count * (tile + padding) + padding


def record_decoder_inputs(model, monkeypatch) -> list[torch.Tensor]:
    calls: list[torch.Tensor] = []
    decode = model.decode

    def recording(z):
        calls.append(z.detach().clone())
        return decode(z)

    monkeypatch.setattr(model, "decode", recording)
    return calls


@pytest.mark.parametrize("steps, scale, padding", [(5, 1, 2), (8, 2, 0), (3, 3, 4)])
def test_traversal_image_has_one_row_per_dimension_and_part(steps, scale, padding):
    traversal = viz.traverse(tiny_vae(), steps=steps)
    rows, columns = CONTINUOUS + len(CATEGORIES), max(steps, *CATEGORIES)
    assert traversal.tiles.shape == (rows, columns, 1, IMAGE_SIZE, IMAGE_SIZE)
    image = traversal.image(padding=padding, scale=scale)
    assert image.shape == (3, grid_extent(rows, IMAGE_SIZE * scale, padding),
                           grid_extent(columns, IMAGE_SIZE * scale, padding))


def test_saved_traversal_is_the_grid_with_a_label_margin(tmp_path):
    traversal = viz.traverse(tiny_vae(), steps=5)
    path = traversal.save(tmp_path / "t.png", padding=2, scale=2)
    saved = np.asarray(Image.open(path).convert("RGB"))
    grid = traversal.image(padding=2, scale=2).mul(255).add(0.5).clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()
    assert saved.shape[0] == grid.shape[0] and saved.shape[1] > grid.shape[1]
    assert np.array_equal(saved[:, -grid.shape[1]:], grid)
    margin = saved[:, :-grid.shape[1]]
    row_height = IMAGE_SIZE * 2 + 2
    for row in range(traversal.rows):  # each row's band of the margin carries its label's ink
        band = margin[2 + row * row_height: 2 + (row + 1) * row_height - 2]
        assert (band < 128).any(), f"row {row} has no label"
    assert [p.name for p in tmp_path.iterdir()] == ["t.png"]


def test_a_label_holding_control_characters_is_drawn_as_its_escapes():
    """A row label names a latent part, which a plugin names: a newline or an ESC in it is drawn escaped on one line
    (PIL drew a newline as a second line and an ESC as a box)."""
    tiles = torch.rand(2, 3, 1, IMAGE_SIZE, IMAGE_SIZE)
    drawn = viz.Grid(tiles, ("a\nb[0]", "c\x1b[31m[1]")).to_pil()
    escaped = viz.Grid(tiles, ("a\\nb[0]", "c\\x1b[31m[1]")).to_pil()
    assert np.array_equal(np.asarray(drawn), np.asarray(escaped))


def test_a_grid_left_at_the_end_of_a_notebook_cell_shows_as_its_picture():
    """Jupyter showed a traversal as the repr of its tiles, a tensor of numbers; it asks an object for a PNG through
    ``_repr_png_``, which now gives the picture that to_pil draws, labels included."""
    import io

    traversal = viz.traverse(tiny_vae(), reference=images(1)[0], steps=3)
    shown = Image.open(io.BytesIO(traversal._repr_png_()))
    assert shown.format == "PNG"
    assert np.array_equal(np.asarray(shown.convert("RGB")), np.asarray(traversal.to_pil()))


def test_continuous_row_changes_only_the_decoder_input_it_names(monkeypatch):
    model, reference, steps = tiny_vae(), images(1)[0], 7
    calls = record_decoder_inputs(model, monkeypatch)
    traversal = viz.traverse(model, reference=reference, steps=steps, span=(-2.0, 2.5))
    lengths = [steps if d.index is not None else d.code.stop - d.code.start for d in traversal.dimensions]
    codes = torch.cat(calls).split(lengths)
    base = model.encode(reference[None]).mode[0]
    continuous = [d for d in traversal.dimensions if d.index is not None]
    assert sorted(d.code.start for d in continuous) == list(range(CONTINUOUS))
    for row, dimension in enumerate(traversal.dimensions):
        code = codes[row]
        changed = torch.zeros(code.shape[1], dtype=torch.bool)
        changed[dimension.code] = True
        assert torch.equal(code[:, ~changed], base[~changed].expand(len(code), -1)), dimension.label
        if dimension.index is not None:
            assert torch.allclose(code[:, dimension.code].squeeze(1), torch.linspace(-2.0, 2.5, steps))
        else:
            assert torch.equal(code[:, dimension.code], torch.eye(code.shape[0]))


def test_rows_are_ordered_by_the_kl_averaged_over_the_data():
    model, data = tiny_vae(), images(300)
    traversal = viz.traverse(model, data=data, reference=data[0], steps=4)
    parts = model.encode(data).parts
    expected = {("style", i): parts["style"].kl()[:, i].mean().item() for i in range(CONTINUOUS)}
    expected |= {(f"class{i}", None): parts[f"class{i}"].kl().mean().item() for i in range(len(CATEGORIES))}
    got = {(d.part, d.index): d.kl for d in traversal.dimensions}
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(v, rel=1e-5, abs=1e-7) for k, v in expected.items())
    kls = [d.kl for d in traversal.dimensions]
    assert kls == sorted(kls, reverse=True)
    assert traversal.labels == tuple(d.label for d in traversal.dimensions)


def test_row_labels_name_the_dimension_and_its_kl():
    assert viz.TraversalRow("style", 2, slice(2, 3), 1.234).label == "style[2]  KL 1.23"
    assert viz.TraversalRow("class0", None, slice(3, 7), 0.5).label == "class0  KL 0.50"
    assert viz.TraversalRow("z", 0, slice(0, 1), None).label == "z[0]"


def test_without_data_rows_follow_the_layout_from_the_prior_mean(monkeypatch):
    model = tiny_vae()
    calls = record_decoder_inputs(model, monkeypatch)
    traversal = viz.traverse(model, steps=4)
    assert [(d.part, d.index, d.kl) for d in traversal.dimensions] == [
        ("style", 0, None), ("style", 1, None), ("style", 2, None), ("class0", None, None), ("class1", None, None)]
    assert traversal.labels[:2] == ("style[0]", "style[1]")
    first = torch.cat(calls)[0]  # style[0] at the low end, everything else at the prior mean / first category
    expected = torch.zeros(CONTINUOUS + sum(CATEGORIES))
    expected[0] = -3.0
    expected[CONTINUOUS] = expected[CONTINUOUS + CATEGORIES[0]] = 1.0
    assert torch.equal(first, expected)


def test_a_joint_latent_inside_a_joint_latent_is_traversed_part_by_part():
    """A joint part of a joint latent (whose layout names its parts inner.a, inner.c) has no prior of its own to
    sweep: vaezoo show traverse was a NotImplementedError traceback, and the gallery stopped on it."""
    latent = {"type": "joint", "parts": [
        {"type": "gaussian", "name": "g", "dim": 2},
        {"type": "joint", "name": "inner", "parts": [{"type": "gaussian", "name": "a", "dim": 2},
                                                     {"type": "gumbel_categorical", "name": "c", "categories": 3}]}]}
    model = tiny_vae(latent=latent)
    assert [part.name for part in model.latent.layout()] == ["g", "inner.a", "inner.c"]
    plain = viz.traverse(model, steps=3)
    assert plain.labels == ("g[0]", "g[1]", "inner.a[0]", "inner.a[1]", "inner.c")
    assert [row.code for row in plain.dimensions] == [slice(0, 1), slice(1, 2), slice(2, 3), slice(3, 4), slice(4, 7)]
    data = images(8)
    ranked = viz.traverse(model, data, reference=data[0], steps=3)
    assert sorted(row.part for row in ranked.dimensions) == ["g", "g", "inner.a", "inner.a", "inner.c"]
    assert all(row.kl is not None for row in ranked.dimensions)


def test_single_gaussian_latent_is_traversed_as_part_z():
    traversal = viz.traverse(tiny_vae(latent={"type": "gaussian", "dim": 2}), steps=3)
    assert traversal.labels == ("z[0]", "z[1]")
    assert traversal.tiles.shape[:2] == (2, 3)


def test_a_latent_family_viz_does_not_know_is_traversed_through_the_protocol():
    """A family defined here, with only a prior object: viz sweeps it with no code of its own."""

    class Uniform(LatentFamily):
        code_size = param_size = 2

        @property
        def prior(self):
            return torch.distributions.Uniform(torch.tensor(-2.0), torch.tensor(2.0))

    model = tiny_vae(latent={"type": "gaussian", "dim": 2})
    model.latent = Uniform()
    traversal = viz.traverse(model, steps=3, span=(-1.0, 1.0))
    assert [(row.part, row.index) for row in traversal.dimensions] == [("z", 0), ("z", 1)]
    # a bounded prior is swept at the standard normal quantiles of the offsets: U(-2, 2)'s icdf is -2 + 4 q
    phi = [0.5 * (1 + math.erf(v / math.sqrt(2))) for v in (-1.0, 0.0, 1.0)]
    codes = torch.stack([torch.tensor([-2 + 4 * q, 0.0]) for q in phi])
    expected = model.decode(codes)
    assert torch.allclose(traversal.tiles[0], expected, atol=1e-6)


def test_a_default_sweep_stays_inside_the_prior_support():
    """However wide the span, a bounded prior's sweep stays inside it and a Bernoulli's takes its two values."""

    class Uniform(LatentFamily):
        code_size = param_size = 2

        @property
        def prior(self):
            return torch.distributions.Uniform(torch.tensor(-2.0), torch.tensor(2.0))

    class Binary(LatentFamily):
        code_size = param_size = 3

        @property
        def prior(self):
            return torch.distributions.Bernoulli(probs=torch.tensor(0.5))

    wide = Uniform().sweeps(7, (-10.0, 10.0))
    assert all(bool(((s.values > -2) & (s.values < 2)).all()) for s in wide)
    binary = Binary().sweeps(7, (-3.0, 3.0))
    assert [s.index for s in binary] == [0, 1, 2]
    assert all(s.values.flatten().tolist() == [0.0, 1.0] for s in binary)
    assert Binary().reference_code().tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("n, columns", [(7, 3), (4, 10), (10, 5)])
def test_reconstructions_sit_below_their_inputs(n, columns):
    model, x = tiny_vae(), images(n)
    grid = viz.reconstruct(model, x, columns=columns)
    rows, width = 2 * math.ceil(n / columns), min(n, columns)
    assert grid.tiles.shape == (rows, width, 1, IMAGE_SIZE, IMAGE_SIZE)
    assert grid.labels == ("input", "reconstruction") * (rows // 2)
    expected = model.reconstruct(x)
    for i in range(n):
        pair, column = divmod(i, columns)
        assert torch.equal(grid.tiles[2 * pair, column], x[i])
        assert torch.allclose(grid.tiles[2 * pair + 1, column], expected[i])
    empty = rows // 2 * width - n
    if empty:
        assert (grid.tiles[-2:, width - empty:] == viz.BLANK).all()
    extent = (grid_extent(rows, IMAGE_SIZE, 1), grid_extent(width, IMAGE_SIZE, 1))
    assert grid.image(padding=1, scale=1).shape[1:] == extent


@pytest.mark.parametrize("bad, got", [(torch.rand(2, 1, 28, 28), "shape (2, 1, 28, 28)"), ("x.png", "str"),
                                      (torch.full((1, 1, 16, 16), 255, dtype=torch.uint8), "uint8 values")])
def test_reconstruct_and_traverse_refuse_what_the_model_does_not_take(bad, got):
    for draw in (lambda model: viz.reconstruct(model, bad), lambda model: viz.traverse(model, reference=bad)):
        expected = rf"takes float images \(N, 1, 16, 16\) in \[0, 1\], got {re.escape(got)}; "
        with pytest.raises(InputError, match=expected + r".*model.preprocess\(images\)"):
            draw(tiny_vae())


def test_a_traversal_refuses_a_reference_of_several_images():
    """A batch of 4 was taken: its first image, silently."""
    with pytest.raises(InputError, match=r"^a traversal's reference is one image \(C, H, W\), got a batch of 4; "):
        viz.traverse(tiny_vae(), reference=images(4))
    assert viz.traverse(tiny_vae(), reference=images(1)).tiles.shape[0] == CONTINUOUS + len(CATEGORIES)


def test_counts_and_seeds_may_be_numpy_or_torch_integers():
    """np.int64(3) steps, count or seed was refused as 'no whole number'."""
    model = tiny_vae()
    assert viz.traverse(model, steps=np.int64(3)).tiles.shape[1] == max(3, *CATEGORIES)
    assert torch.equal(viz.sample(model, np.int64(4), seed=torch.tensor(2), columns=np.int32(2)).tiles,
                       viz.sample(model, 4, seed=2, columns=2).tiles)


def test_samples_fill_the_promised_grid():
    grid = viz.sample(tiny_vae(), n=11, seed=0, columns=4)
    assert grid.tiles.shape == (3, 4, 1, IMAGE_SIZE, IMAGE_SIZE)
    assert (grid.tiles[2, 3] == viz.BLANK).all() and not (grid.tiles[2, 2] == viz.BLANK).all()
    assert grid.to_pil(padding=2, scale=2).size == (grid_extent(4, 32, 2), grid_extent(3, 32, 2))
    assert viz.sample(tiny_vae(), n=1).image(padding=3, scale=1).shape == (3, 22, 22)


def test_samples_are_decoded_from_the_prior(monkeypatch):
    model = tiny_vae()
    calls = record_decoder_inputs(model, monkeypatch)
    viz.sample(model, n=200, seed=1)
    code = torch.cat(calls)
    for start, k in ((CONTINUOUS, CATEGORIES[0]), (CONTINUOUS + CATEGORIES[0], CATEGORIES[1])):
        one_hot = code[:, start:start + k]
        assert torch.equal(one_hot.sum(1), torch.ones(200)) and set(one_hot.unique().tolist()) == {0.0, 1.0}
        assert len(one_hot.argmax(1).unique()) == k
    assert abs(code[:, :CONTINUOUS].std().item() - 1) < 0.15


def test_pictures_are_deterministic_for_a_seed(tmp_path):
    model = tiny_vae()
    first, again, other = (viz.sample(model, 12, seed=s).save(tmp_path / f"{i}.png") for i, s in enumerate((3, 3, 4)))
    assert first.read_bytes() == again.read_bytes() != other.read_bytes()
    dataset = ImageDataset((images(50) * 255).to(torch.uint8))
    data = viz.data_sample(dataset, 20, seed=5)
    assert torch.equal(data, viz.data_sample(dataset, 20, seed=5))
    assert not torch.equal(data, viz.data_sample(dataset, 20, seed=6))
    traversals = [viz.traverse(model, data, reference=data[0]).save(tmp_path / f"t{i}.png") for i in range(2)]
    assert traversals[0].read_bytes() == traversals[1].read_bytes()


def test_model_mode_is_restored():
    model = tiny_vae().train()
    viz.sample(model, 2)
    viz.traverse(model, steps=2)
    assert model.training


def test_bad_parameters_are_refused(tmp_path):
    model = tiny_vae()
    with pytest.raises(VaezooError, match="at least 2 steps"):
        viz.traverse(model, steps=1)
    with pytest.raises(VaezooError, match="from low to high"):
        viz.traverse(model, span=(1.0, -1.0))
    with pytest.raises(VaezooError, match="^n must be a whole number >= 1, got 0$"):
        viz.sample(model, 0)
    with pytest.raises(VaezooError, match="^columns must be a whole number >= 1, got 0$"):
        viz.sample(model, 4, columns=0)
    data = ImageDataset((images(8) * 255).to(torch.uint8))
    for call, message in ((lambda: viz.sample(model, 4, seed=2**64), "^seed must be a whole number from 0 to 2"),
                          (lambda: viz.sample(model, 4, seed=1.5), "^seed must be a whole number .* got 1.5$"),
                          (lambda: viz.sample(model, 4, columns=2.5), "^columns must be a whole number >= 1"),
                          (lambda: viz.traverse(model, steps=2.5), "at least 2 steps .*, got 2.5$"),
                          (lambda: viz.traverse(model, steps="5"), "at least 2 steps .*, got '5'$"),
                          (lambda: viz.traverse_dataset(model, data, images=0), "^images must be a whole"),
                          (lambda: viz.traverse_dataset(model, data, seed=-1), "^seed must be")):
        with pytest.raises(VaezooError, match=message):  # torch's and Python's own errors before
            call()
    with pytest.raises(VaezooError, match="give a .png file name"):
        viz.sample(model, 2).save(tmp_path / "x.jpg")


def test_pictures_beyond_the_limits_are_refused_before_they_are_drawn(monkeypatch):
    model = tiny_vae()
    decoded = record_decoder_inputs(model, monkeypatch)
    with pytest.raises(VaezooError, match=f"10,001 images, over the {viz.MAX_TILES:,}"):
        viz.sample(model, viz.MAX_TILES + 1)
    with pytest.raises(VaezooError, match="images, over the"):
        viz.traverse(model, steps=viz.MAX_TILES + 1)
    # 3 Gaussian rows of 4,000 steps and two categorical rows padded to as many: within the steps, beyond the tiles
    with pytest.raises(VaezooError, match="20,000 images"):
        viz.traverse(model, steps=4000)
    with pytest.raises(VaezooError, match="10,002 images"):
        viz.reconstruct(model, images(viz.MAX_TILES // 2 + 1))
    assert decoded == []
    grid = viz.sample(model, 4, columns=2)
    # 2 x 2 tiles of 16 pixels: scale 4096 makes each side 2 * (16 * 4096 + 2) + 2 pixels
    with pytest.raises(VaezooError, match="131,078 x 131,078 pixels"):
        grid.image(scale=4096)
    assert grid.image(scale=8).shape == (3, grid_extent(2, 128, 2), grid_extent(2, 128, 2))


@pytest.mark.parametrize("span", [(-math.inf, math.inf), (-1e308, 1e308), (0.0, math.inf), (math.nan, 1.0),
                                  (-101.0, 0.0), (1e307, 1e308)])
def test_a_span_that_is_not_finite_and_bounded_is_refused_before_anything_is_decoded(monkeypatch, span):
    model = tiny_vae()
    decoded = record_decoder_inputs(model, monkeypatch)
    with pytest.raises(VaezooError) as caught:
        viz.traverse(model, span=span)
    assert str(caught.value) == (f"the traversal range must go from low to high within -100..100 prior standard "
                                 f"deviations, got {span[0]:g}..{span[1]:g}")
    assert decoded == []
    traversal = viz.traverse(model, steps=3, span=(-viz.MAX_SPAN, viz.MAX_SPAN))  # the bounds themselves draw
    assert all(bool(torch.isfinite(t).all()) for t in traversal.tiles)


@pytest.mark.parametrize("span", [(True, 2.0), ("a", 2.0), (-2.0,), (-2.0, 0.0, 2.0), 2.0, torch.tensor(2.0), "ab",
                                  (torch.tensor([-2.0]), 2.0)])
def test_a_span_that_is_not_two_numbers_is_refused_in_one_line_before_anything_is_decoded(monkeypatch, span):
    """(True, 2) ran from 1, ("a", 2) and (-2,) were Python's TypeError and ValueError."""
    model = tiny_vae()
    decoded = record_decoder_inputs(model, monkeypatch)
    with pytest.raises(VaezooError, match=r"^span is a traversal range, two numbers from low to high, e\.g\. "
                                          r"\(-2\.5, 2\.5\), got "):
        viz.traverse(model, span=span)
    assert decoded == []


def test_a_span_of_numpy_or_torch_numbers_draws_as_its_python_floats():
    model = tiny_vae()
    plain = viz.traverse(model, steps=3, span=(-2.0, 2.0)).tiles
    for span in ((np.float32(-2), np.int64(2)), (torch.tensor(-2.0), torch.tensor(2)), np.array([-2.0, 2.0]),
                 torch.tensor([-2.0, 2.0])):
        assert torch.equal(viz.traverse(model, steps=3, span=span).tiles, plain)


@pytest.mark.parametrize("min_kl", [True, "x", math.nan, -1.0, torch.tensor([0.1])])
def test_fold_inactive_refuses_a_threshold_that_is_no_number_of_nats(min_kl):
    """NaN folded every row but the first, True folded at 1 nat, "x" was Python's TypeError."""
    traversal = viz.traverse(tiny_vae(), data=images(4), steps=3)
    with pytest.raises(VaezooError, match=r"^min_kl is the KL, in nats, below which a row is folded: a number >= 0, "
                                          r"got "):
        viz.fold_inactive(traversal, min_kl)
    assert viz.fold_inactive(traversal, np.float32(0.0))[1] == ()


@pytest.mark.parametrize("span", [["0", "inf"], ["0", "1e308"], ["nan", "1"], ["-1e308", "1e308"], ["-inf", "inf"]])
def test_show_refuses_such_a_span_in_one_line_and_writes_nothing(tmp_path, capsys, span):
    out = tmp_path / "t.png"
    code = main(["show", "jointvae-mnist", "traverse", "--no-data", "-o", str(out), "--span", *span])
    err = capsys.readouterr().err
    assert "Traceback" not in err and not out.exists()
    last = err.strip().splitlines()[-1]
    if span[0].startswith("-") and code == 2:  # argparse (Python 3.11) reads '-1e308' and '-inf' as options
        assert last == "vaezoo show: error: argument --span: expected 2 arguments"
    else:
        assert code == 1 and err.count("\n") == 1
        assert last == (f"error: the traversal range must go from low to high within -100..100 prior standard "
                        f"deviations, got {float(span[0]):g}..{float(span[1]):g}")
