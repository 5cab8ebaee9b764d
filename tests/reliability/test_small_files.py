"""Small files that ask for gigabytes, or never end: each refused in one line, with bounded memory, before
the part that would allocate or hang is read."""

from __future__ import annotations

import io
import os
import re
import struct
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest
import torch
from kit import cli, make_card, write_toml
from vaezoo_jointvae.convert import read_original

from vaezoo.data.dsprites.official import load_official
from vaezoo.data.images import read_images
from vaezoo.data.torchvision_sets import mnist
from vaezoo.entries.catalog import MAX_CARD_BYTES, parse_card, scan
from vaezoo.errors import CardError, DataError, TrainingError, WeightsError
from vaezoo.store.limits import MAX_DEPTH, load_json, too_deep
from vaezoo.entries.checkpoints import read_checkpoint

GIB = 1 << 30

# --- cards ------------------------------------------------------------------------------------------------------

DEEP_CARDS = {
    "400 nested inline tables": "x = " + "{a = " * 400 + "1" + "}" * 400 + "\n",
    "3,000-level dotted key": ".".join(["k"] * 3000) + " = 1\n",
    "a 400-level table header": "[" + ".".join(["t"] * 400) + "]\nx = 1\n",
    "2,000 nested arrays": "x = " + "[" * 2000 + "]" * 2000 + "\n",
}


@pytest.mark.parametrize("text", DEEP_CARDS.values(), ids=DEEP_CARDS)
def test_deeply_nested_card_is_one_line_in_every_command(cards, capsys, text):
    good = make_card(name="good-card")
    write_toml(cards / "good-card.toml", good)
    deep = cards / "deep.toml"
    deep.write_text(text, encoding="utf-8")
    assert len(text.encode()) < 64_000
    with pytest.raises(CardError, match=f"nests tables or arrays deeper than {MAX_DEPTH} levels"):
        parse_card(deep)
    assert [s.path.name for s in scan().skipped] == ["deep.toml"]
    code, out, err = cli(capsys, "list")
    assert code == 0 and "good-card" in out and "RecursionError" not in err
    for argv in (["info", str(deep)], ["verify", str(deep)]):
        code, out, err = cli(capsys, *argv)
        assert code == 1 and "Traceback" not in err and "RecursionError" not in err
        assert err.strip().splitlines()[-1].endswith(f"deeper than {MAX_DEPTH} levels; it is not a card file")


def test_sparse_100_gb_card_is_refused_unread(cards, capsys):
    big = cards / "big.toml"
    with open(big, "wb") as f:
        f.truncate(100 * 10**9)
    with pytest.raises(CardError, match=f"is 100,000,000,000 bytes, more than the {MAX_CARD_BYTES:,} a card"):
        parse_card(big)
    for argv in (["list"], ["info", str(big)], ["verify", str(big)]):
        code, out, err = cli(capsys, *argv)
        assert "MemoryError" not in err and "Traceback" not in err
        assert code == (0 if argv == ["list"] else 1)


def test_depth_is_measured_without_recursion():
    deep: list = []
    for _ in range(200_000):
        deep = [deep]
    assert too_deep(deep) and not too_deep({"a": [1, {"b": 2}]})
    with pytest.raises(ValueError, match="nests deeper than 64 levels"):
        load_json("[" * 200_000 + "]" * 200_000)


# --- checkpoints --------------------------------------------------------------------------------------------------

def _inflating_checkpoint(path, inflated=64 << 20):
    """A torch.save zip whose extra record inflates to ``inflated`` bytes from a few kilobytes."""
    buffer = io.BytesIO()
    torch.save({"a": torch.zeros(2)}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, zipfile.ZipFile(path, "w") as out:
        for record in source.infolist():
            out.writestr(record, source.read(record))
        out.writestr(zipfile.ZipInfo("archive/data/bomb"), b"\0" * inflated, compress_type=zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < inflated // 100
    return path


@pytest.fixture
def no_torch_load(monkeypatch):
    """Fails the test if torch.load is called: the refusal must come from the file's declarations."""
    def refused(*args, **kwargs):
        raise AssertionError("torch.load was called on a file that should have been refused first")

    monkeypatch.setattr(torch, "load", refused)


def test_inflating_zip_record_is_refused_before_torch_reads_it(tmp_path, no_torch_load):
    path = _inflating_checkpoint(tmp_path / "bomb.pt")
    with pytest.raises(TrainingError) as err:
        read_checkpoint(path, "start afresh")
    assert "record 'archive/data/bomb' inflates to 67,108,864 bytes, beyond the file's" in str(err.value)
    with pytest.raises(WeightsError, match="is not a checkpoint torch.save wrote: its record 'archive/data/bomb'"):
        read_original(path)


def test_inflating_checkpoint_in_the_cli_is_one_line(tmp_path, capsys, no_torch_load):
    path = _inflating_checkpoint(tmp_path / "bomb.pt")
    code, out, err = cli(capsys, "convert", "jointvae-original", str(path), "--dataset", "mnist",
                         "--out", str(tmp_path / "run"))
    assert code == 1 and "inflates to" in err.strip().splitlines()[-1] and not (tmp_path / "run").exists()


def test_a_checkpoint_that_may_not_be_read_is_said_so_not_called_another_kind_of_file(tmp_path, monkeypatch):
    """chmod 000 on the checkpoint was 'not a plain state dict ... (PermissionError ...)'."""
    import vaezoo_jointvae.convert as convert

    path = tmp_path / "original.pt"
    torch.save({"fc_mean.weight": torch.zeros(2, 2)}, path)

    def refused(*_, **__):  # as torch.load meets chmod 000 for a user without root
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(convert.torch, "load", refused)
    with pytest.raises(WeightsError, match=rf"^cannot read checkpoint {re.escape(str(path))}: Permission denied; "
                                           r"make it readable"):
        read_original(path)


def test_stride_0_tensors_are_refused(tmp_path):
    """A 4-byte storage seen as 10^8 elements: copying it would take 400 MB; refused from its strides."""
    expanded = torch.zeros(1).expand(10**8)
    original = tmp_path / "original.pt"
    torch.save({"fc_mean.weight": expanded.view(10**4, 10**4)}, original)
    assert original.stat().st_size < 10_000
    with pytest.raises(WeightsError, match=r"span more bytes than they store .* \['fc_mean.weight'\]"):
        read_original(original)
    checkpoint = tmp_path / "checkpoint.pt"
    torch.save({"model": {"w": expanded}, "optimizer": {"state": {}, "param_groups": []}, "step": 0,
                "rng_cpu": torch.get_rng_state()}, checkpoint)
    with pytest.raises(TrainingError, match=r"span more bytes than they store .* \['w'\]"):
        read_checkpoint(checkpoint, "start afresh")


@pytest.mark.parametrize("make", [torch.Tensor.to_sparse, lambda t: t.to("meta")], ids=["sparse", "meta"])
def test_tensors_not_dense_in_cpu_memory_are_refused_in_one_line(tmp_path, capsys, make):
    """torch.load(weights_only=True) returns sparse and meta tensors as saved; neither is a model's parameter."""
    original = tmp_path / "original.pt"
    torch.save({"fc_mean.weight": make(torch.ones(10, 256))}, original)
    with pytest.raises(WeightsError, match=r"not dense tensors in CPU memory .* \['fc_mean.weight'\]"):
        read_original(original)
    checkpoint = tmp_path / "checkpoint.pt"
    torch.save({"model": {"w": make(torch.ones(3, 3))}, "optimizer": {"state": {}, "param_groups": []}, "step": 0,
                "rng_cpu": torch.get_rng_state()}, checkpoint)
    with pytest.raises(TrainingError, match=r"not dense tensors in CPU memory .* \['w'\]"):
        read_checkpoint(checkpoint, "start afresh")
    code, out, err = cli(capsys, "convert", "jointvae-original", str(original), "--dataset", "mnist",
                         "--out", str(tmp_path / "run"))
    assert code == 1 and "not dense tensors" in err.strip().splitlines()[-1] and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_200000_deep_json_recipe_is_one_line(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "optimizer": {"state": {}, "param_groups": []}, "step": 0,
                "rng_cpu": torch.get_rng_state(), "card": "x", "recipe": "[" * 200_000 + "]" * 200_000,
                "fingerprint": "0" * 64}, path)
    with pytest.raises(TrainingError, match="its card name, recipe and fingerprint do not agree"):
        read_checkpoint(path, "start afresh")


# --- datasets --------------------------------------------------------------------------------------------------

def _idx(path, header, body_size):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack(f">{len(header)}i", *header))
        f.truncate(4 * len(header) + body_size)


def _mnist_test_split(root, images=10_000, labels=10_000, image_bytes=None, label_bytes=None):
    raw = root / "MNIST" / "raw"
    _idx(raw / "t10k-images-idx3-ubyte", (2051, images, 28, 28),
         images * 784 if image_bytes is None else image_bytes)
    _idx(raw / "t10k-labels-idx1-ubyte", (2049, labels), labels if label_bytes is None else label_bytes)
    return raw


@pytest.mark.parametrize("case", ["empty", "zero images", "sparse 100 GiB", "labels shorter", "fifo"])
def test_bad_mnist_idx_files_are_one_line(tmp_path, case):
    raw = _mnist_test_split(tmp_path)
    images = raw / "t10k-images-idx3-ubyte"
    if case == "empty":
        images.write_bytes(b"")
    elif case == "zero images":
        _idx(images, (2051, 0, 28, 28), 0)
    elif case == "sparse 100 GiB":
        _idx(images, (2051, 10_000, 28, 28), 100 * GIB)
    elif case == "labels shorter":
        _mnist_test_split(tmp_path, labels=9_000)
    else:
        images.unlink()
        os.mkfifo(images)
    with pytest.raises(DataError) as err:
        mnist.load(root=tmp_path, split="test")
    text = str(err.value)
    assert "\n" not in text and "replace it with a fresh copy" in text and "t10k-" in text


def test_good_mnist_idx_headers_pass_the_check(tmp_path):
    """Control: the same files with the sizes their headers announce are left to torchvision, which reads them."""
    raw = _mnist_test_split(tmp_path)
    _idx(raw / "train-images-idx3-ubyte", (2051, 60_000, 28, 28), 60_000 * 784)  # torchvision wants all four
    _idx(raw / "train-labels-idx1-ubyte", (2049, 60_000), 60_000)
    assert len(mnist.load(root=tmp_path, split="test")) == 10_000


def test_mnist_labels_outside_the_ten_classes_are_one_line(tmp_path):
    """A label file of the right header and size, its odd labels 200: evaluated without a word before."""
    raw = _mnist_test_split(tmp_path)
    _idx(raw / "train-images-idx3-ubyte", (2051, 60_000, 28, 28), 60_000 * 784)
    _idx(raw / "train-labels-idx1-ubyte", (2049, 60_000), 60_000)
    labels = raw / "t10k-labels-idx1-ubyte"
    data = bytearray(labels.read_bytes())
    data[9::2] = bytes([200]) * len(data[9::2])
    labels.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"^mnist: its label file holds labels from 0 to 200, not classes 0 to 9; "):
        mnist.load(root=tmp_path, split="test")


def _legacy_mnist(root, images, labels, extra=None):
    """torchvision's legacy MNIST/processed/{training,test}.pt, which it reads instead of the IDX files."""
    processed = root / "MNIST" / "processed"
    processed.mkdir(parents=True)
    for name in ("training.pt", "test.pt"):
        torch.save(extra if extra is not None else (images, labels), processed / name)


@pytest.mark.parametrize("case", ["7 images", "stride-0 10^8 images", "float images", "a dict"])
def test_legacy_mnist_files_are_checked_like_the_idx_files(tmp_path, case):
    """A 2 kB legacy file of a stride-0 tensor asked for 95 GiB when resized; 7 images trained silently."""
    if case == "7 images":
        _legacy_mnist(tmp_path, torch.zeros(7, 28, 28, dtype=torch.uint8), torch.arange(7))
    elif case == "stride-0 10^8 images":
        _legacy_mnist(tmp_path, torch.zeros(1, dtype=torch.uint8).expand(10**8, 28, 28),
                      torch.zeros(1, dtype=torch.int64).expand(10**8))
    elif case == "float images":
        _legacy_mnist(tmp_path, torch.zeros(10_000, 28, 28), torch.zeros(10_000, dtype=torch.int64))
    else:
        _legacy_mnist(tmp_path, None, None, extra={"images": torch.zeros(2)})
    with pytest.raises(DataError) as err:
        mnist.load(root=tmp_path, split="test", image_size=32)
    text = str(err.value)
    assert "\n" not in text and str(tmp_path / "MNIST" / "processed") in text
    assert "remove that processed/ folder" in text


def test_good_legacy_mnist_files_are_read(tmp_path):
    """Control: legacy files of the split's 10,000 images are what torchvision reads, as before."""
    _legacy_mnist(tmp_path, torch.full((10_000, 28, 28), 7, dtype=torch.uint8), torch.arange(10_000) % 10)
    data = mnist.load(root=tmp_path, split="test")
    assert len(data) == 10_000 and data.labels[:3].tolist() == [0, 1, 2]


def _png(width, height):
    """A tiny PNG whose header declares ``width`` x ``height`` pixels."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 10))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("resize", [False, True])
def test_huge_png_header_among_images_is_refused_from_its_header(tmp_path, resize):
    path = tmp_path / "huge.png"
    path.write_bytes(_png(20000, 20000))
    with pytest.raises(DataError) as err:
        read_images([path], "L", 64, resize=resize, name="chairs")
    assert str(path) in str(err.value) and "20000" in str(err.value).replace("400000000", "20000")


def test_fifo_among_images_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "chair.png"
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="is not a regular file"):
        read_images([fifo], "L", 64, resize=False, name="chairs")


def _npz(path, header: bytes, body: bytes, name="latents_classes"):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}.npy", header + body)
    return path


@pytest.mark.parametrize("header", [
    b"\x93NUMPY\x01\x00" + struct.pack("<H", 20) + b"{'descr': garbage}  \n",
    b"not a numpy file at all",
    np.lib.format.magic(1, 0) + struct.pack("<H", 118) + (
        "{'descr': '<i8', 'fortran_order': False, 'shape': (100000000000, 6), }".ljust(117) + "\n").encode(),
])
def test_bad_dsprites_npz_header_is_one_line(tmp_path, header):
    path = _npz(tmp_path / "dsprites.npz", header, np.zeros((4, 6), np.int64).tobytes())
    with pytest.raises(DataError) as err:
        load_official(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_dsprites_classes_that_are_no_whole_numbers_are_one_line(tmp_path):
    header = np.lib.format.magic(1, 0) + struct.pack("<H", 118) + (
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), }".ljust(117) + "\n").encode()
    path = _npz(tmp_path / "dsprites.npz", header, np.zeros((4, 6), np.float64).tobytes())
    with pytest.raises(DataError, match=r"latents_classes is a float64 array of shape \(4, 6\), expected whole"):
        load_official(path)


def test_deflated_dsprites_classes_beyond_the_grid_are_refused_before_they_inflate(tmp_path):
    """A 60 MB member deflates to about 60 kB: its rows are bounded by the grid before any is read."""
    rows = 10_000_000
    header = np.lib.format.magic(1, 0) + struct.pack("<H", 118) + (
        f"{{'descr': '|i1', 'fortran_order': False, 'shape': ({rows}, 6), }}".ljust(117) + "\n").encode()
    path = tmp_path / "dsprites.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("latents_classes.npy", header + bytes(rows * 6))
    assert path.stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="with N at most the grid's 737,280"):
            load_official(path)
        assert tracemalloc.get_traced_memory()[1] < 10_000_000
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_damaged_dsprites_npz_member_is_one_line(tmp_path, compression):
    """One byte of the images changed on disk: its CRC (or its deflate stream) fails while it is read."""
    path = tmp_path / "dsprites.npz"
    classes = np.zeros((4, 6), np.int64)
    classes[:, 1:] = [[0, 0, 0, 0, i] for i in range(4)]
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, array in (("latents_classes", classes), ("imgs", np.arange(4 * 64 * 64, dtype=np.uint8))):
            member = io.BytesIO()
            np.save(member, array.reshape(4, 64, 64) if name == "imgs" else array)
            archive.writestr(f"{name}.npy", member.getvalue())
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(DataError, match=r"array 'imgs' is damaged \(.*\); download the official file again") as err:
        load_official(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
