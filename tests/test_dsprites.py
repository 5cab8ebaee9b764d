"""dSprites: the grid's order, the renderer against the official frames, the npz reader and downloader."""

from __future__ import annotations

import hashlib
import importlib.util
import zipfile

import numpy as np
import pytest
import torch

from kit import REPO, SHARED, require_shared
from vaezoo.data import DataRoot
from vaezoo.assemble import load_dataset
from vaezoo.data import dsprites as ds
from vaezoo.data.dsprites import official
from vaezoo.errors import DataError
from vaezoo.cli.common import flag_spelling

# The renderer is checked against the official frames by the benchmark's own matcher.
_spec = importlib.util.spec_from_file_location("bench_dsprites", REPO / "benchmarks" / "bench_dsprites.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

OFFICIAL_FRAMES = SHARED / "reference" / "dsprites" / "official_gif_frames.npy"
# the official animation shows a heart (frames 0-191), then an ellipse, then a square
GIF_SHAPES = np.array([2] * 192 + [1] * 64 + [0] * 64)


def grid_index(shape, scale, orientation, x, y) -> int:
    return int(np.ravel_multi_index((shape, scale, orientation, x, y), ds.FACTOR_SIZES))


def image(shape, scale, orientation, x, y) -> np.ndarray:
    return ds.unpack(ds.render([grid_index(shape, scale, orientation, x, y)]))[0]


def centroid(img: np.ndarray) -> np.ndarray:
    rows, cols = np.nonzero(img)
    return np.array([rows.mean(), cols.mean()])


def test_grid_is_c_order_over_the_factors():
    classes = ds.factor_classes()
    expected = np.stack(np.meshgrid(*map(np.arange, ds.FACTOR_SIZES), indexing="ij"), -1).reshape(-1, 5)
    assert classes.shape == (737_280, 5)
    np.testing.assert_array_equal(classes, expected)


def test_factor_values_match_the_official_description():
    shape, scale, orientation, x, y = ds.factor_values()
    np.testing.assert_array_equal(shape, [1, 2, 3])
    np.testing.assert_allclose(scale, [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert len(orientation) == 40 and orientation[0] == 0 and orientation[-1] == pytest.approx(2 * np.pi)
    np.testing.assert_allclose(x, np.arange(32) / 31)
    np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("shape,scale,orientation", [(0, 0, 0), (0, 5, 13), (1, 2, 7), (1, 5, 39), (2, 3, 21),
                                                     (2, 5, 5)])
def test_block_renderer_matches_the_per_image_renderer(shape, scale, orientation):
    block = ds.render_block(shape, scale, orientation)
    start = grid_index(shape, scale, orientation, 0, 0)
    np.testing.assert_array_equal(block, ds.render(np.arange(start, start + 1024)))


@pytest.mark.parametrize("shape", [0, 1, 2])
def test_orientation_wraps_around_at_two_pi(shape):
    np.testing.assert_array_equal(image(shape, 4, 0, 10, 20), image(shape, 4, 39, 10, 20))
    assert not np.array_equal(image(shape, 4, 0, 10, 20), image(shape, 4, 3, 10, 20))


@pytest.mark.parametrize("shape", [0, 1, 2])
def test_posx_moves_right_and_posy_moves_down_by_32_over_31_pixels(shape):
    step = 32 / 31
    start = centroid(image(shape, 2, 0, 0, 0))
    np.testing.assert_allclose(centroid(image(shape, 2, 0, 31, 0)) - start, [0, 31 * step], atol=0.2)
    np.testing.assert_allclose(centroid(image(shape, 2, 0, 0, 31)) - start, [31 * step, 0], atol=0.2)


@pytest.mark.parametrize("shape", [0, 1, 2])
def test_area_grows_with_the_square_of_scale(shape):
    def mean_area(scale):  # over all positions, which averages out the pixel grid
        return np.bitwise_count(ds.render_block(shape, scale, 0)).sum() / 1024

    assert mean_area(5) / mean_area(0) == pytest.approx(4, rel=0.03)


def test_best_match_finds_a_rendered_image_exactly():
    shapes = np.array([0, 1, 2])
    picks = [grid_index(s, 3, 17, 5 + 9 * s, 30 - 7 * s) for s in shapes]
    frames = ds.unpack(ds.render(picks))
    grid = np.zeros((ds.GRID_SIZE, 64, 8), np.uint8)
    grid[picks] = ds.render(picks)
    np.testing.assert_array_equal(bench.best_match_iou(frames, shapes, grid), [1.0, 1.0, 1.0])


@pytest.mark.slow
def test_every_official_frame_is_matched_at_iou_090():
    require_shared(OFFICIAL_FRAMES)
    frames = np.load(OFFICIAL_FRAMES)
    ious = bench.best_match_iou(frames, GIF_SHAPES)
    assert ious.min() >= 0.9, f"worst frame {ious.argmin()} at IoU {ious.min():.3f}"


def test_dataset_subset_holds_bit_packed_images_and_factors():
    data = ds.dsprites(subset=300, subset_seed=1)
    assert len(data) == 300 and data.factor_names == ds.FACTOR_NAMES
    indices = data.indices.numpy()
    np.testing.assert_array_equal(data.factors.numpy(), ds.factor_classes(indices))
    np.testing.assert_allclose(data.factor_values[:, 1].numpy(), 0.5 + 0.1 * data.factors[:, 1].numpy())
    x = data.batch(torch.tensor([0, 5, 299]))
    assert x.shape == (3, 1, 64, 64) and x.dtype == torch.float32
    np.testing.assert_array_equal(x[:, 0].numpy().astype(bool), ds.unpack(ds.render(indices[[0, 5, 299]])))


def test_both_splits_are_the_same_images_and_subsets_follow_the_seed():
    train, test = ds.dsprites(split="train", subset=50), ds.dsprites(split="test", subset=50)
    assert torch.equal(train.indices, test.indices) and torch.equal(train.images, test.images)
    assert not torch.equal(ds.dsprites(subset=50, subset_seed=1).indices, train.indices)


def test_dsprites_is_a_registered_dataset():
    data = load_dataset("dsprites", subset=20)
    assert isinstance(data, ds.DSprites) and len(data) == 20


@pytest.mark.parametrize("options,message", [
    ({"split": "valid"}, "splits 'train' and 'test'"),
    ({"source": "web"}, "source must be"),
    ({"subset": 0}, "subset must be between"),
])
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(DataError, match=message) as info:
        ds.dsprites(**options)
    assert "\n" not in str(info.value)


def write_fake_npz(path, indices) -> bytes:
    """An npz laid out like the official file, holding the rendered images at ``indices``."""
    classes = ds.factor_classes(indices)
    values = np.stack([v[c] for v, c in zip(ds.factor_values(), classes.T)], axis=1)
    np.savez_compressed(
        path, imgs=ds.unpack(ds.render(indices)).astype(np.uint8),
        latents_classes=np.concatenate([np.zeros((len(indices), 1), np.int64), classes], axis=1),
        latents_values=np.concatenate([np.ones((len(indices), 1)), values], axis=1),
        metadata=np.array({"description": "fake"}, dtype=object))
    return path.read_bytes()


@pytest.fixture
def fake_npz(tmp_path):
    indices = np.random.default_rng(0).choice(ds.GRID_SIZE, 40, replace=False)
    path = tmp_path / "dsprites" / ds.OFFICIAL_FILE
    path.parent.mkdir()
    write_fake_npz(path, indices)
    return path, indices


def test_official_npz_is_read_from_a_file_or_a_folder(fake_npz):
    path, indices = fake_npz
    for root in (path, path.parent.parent):
        data = ds.dsprites(root=root, source="official")
        np.testing.assert_array_equal(data.indices.numpy(), indices)
        np.testing.assert_array_equal(data.images[:, 0].numpy(), ds.render(indices))
        np.testing.assert_array_equal(data.factors.numpy(), ds.factor_classes(indices))


def test_official_npz_subset_needs_the_images_it_asks_for(fake_npz):
    with pytest.raises(DataError, match="lacks some of the images"):
        ds.dsprites(root=fake_npz[0], source="official", subset=10)


def test_npz_without_images_is_refused(tmp_path):
    path = tmp_path / "broken.npz"
    np.savez(path, latents_classes=np.zeros((2, 6), np.int64))
    with pytest.raises(DataError, match="no array 'imgs'"):
        ds.dsprites(root=path, source="official")


def test_missing_npz_error_names_where_it_looked(tmp_path):
    with pytest.raises(DataError, match="dSprites npz not found") as info:
        ds.dsprites(root=tmp_path, source="official")
    assert str(tmp_path / "dsprites" / ds.OFFICIAL_FILE) in str(info.value)
    assert "(from data_root)" in str(info.value) and "leave out data_root and unset VAEZOO_DATA" in str(info.value)
    cli = info.value.spelled(flag_spelling)  # the same error as `vaezoo train --data-root DIR` prints it
    assert "(from --data-root)" in cli and "leave out --data-root and unset VAEZOO_DATA" in cli


SERVED = f"/{ds.OFFICIAL_FILE}"


def test_download_verifies_md5_and_writes_atomically(server, tmp_path):
    content = server.files[SERVED] = write_fake_npz(tmp_path / ds.OFFICIAL_FILE, np.arange(8))
    target = tmp_path / "data"
    path = official.download_official(target, server.url(SERVED), hashlib.md5(content).hexdigest())
    assert path.read_bytes() == content
    with pytest.raises(DataError, match="has md5"):
        official.download_official(tmp_path / "other", server.url(SERVED), "0" * 32)
    assert list((tmp_path / "other").iterdir()) == []


def test_download_failure_is_a_data_error(server, tmp_path):
    target = tmp_path / "data"
    with pytest.raises(DataError, match="could not download"):
        official.download_official(target, server.url("/missing.npz"), ds.OFFICIAL_MD5)
    assert list(target.iterdir()) == []


def test_official_source_downloads_into_the_default_folder(server, tmp_path, monkeypatch):
    indices = np.arange(100, 116)
    content = server.files[SERVED] = write_fake_npz(tmp_path / ds.OFFICIAL_FILE, indices)
    monkeypatch.setattr(official, "OFFICIAL_URL", server.url(SERVED))
    monkeypatch.setattr(official, "OFFICIAL_MD5", hashlib.md5(content).hexdigest())
    monkeypatch.setattr(official, "data_root",
                        lambda root: DataRoot(tmp_path / "home", True, "the default data folder"))
    data = ds.dsprites(source="official")
    np.testing.assert_array_equal(data.indices.numpy(), indices)
    assert (tmp_path / "home" / "dsprites" / ds.OFFICIAL_FILE).read_bytes() == content


def test_reading_the_npz_never_unpickles(fake_npz, monkeypatch):
    import pickle

    def refuse(*args, **kwargs):
        raise AssertionError("unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    with zipfile.ZipFile(fake_npz[0]) as archive:
        assert "metadata.npy" in archive.namelist()
    assert len(ds.dsprites(root=fake_npz[0], source="official")) == 40
