"""Datasets: what vaezoo says when one is missing, and MNIST as the JointVAE recipe reads it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vaezoo.cli import main
from vaezoo.assemble import load_dataset
from vaezoo.errors import DataError

RAW_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def test_a_missing_dataset_says_where_vaezoo_looked_and_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataset("mnist", tmp_path, "train", image_size=32)
    message = str(info.value)
    assert f"vaezoo looked in {tmp_path / 'MNIST' / 'raw'} (from --data-root)" in message
    assert all(name in message for name in RAW_FILES)
    assert "--data-root or VAEZOO_DATA" in message and "download it into" in message


def test_vaezoo_data_is_where_vaezoo_looks_without_data_root(tmp_path, monkeypatch):
    monkeypatch.setenv("VAEZOO_DATA", str(tmp_path))
    (tmp_path / "FashionMNIST" / "raw").mkdir(parents=True)
    (tmp_path / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").write_bytes(b"")
    with pytest.raises(DataError) as info:
        load_dataset("fashion_mnist", split="test")
    message = str(info.value)
    assert f"looked in {tmp_path / 'FashionMNIST' / 'raw'} (from VAEZOO_DATA)" in message
    assert "is missing train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte;" in message


def test_pointing_at_the_dataset_folder_itself_gets_a_hint(tmp_path):
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    with pytest.raises(DataError, match="looks like the MNIST folder itself: pass the folder that holds it"):
        load_dataset("mnist", tmp_path / "MNIST")


def test_a_failed_download_is_explained_and_progress_stays_off_stdout(tmp_path, monkeypatch, capsys):
    from torchvision.datasets import MNIST

    def failing_download(self):
        print("Downloading https://example.invalid/train-images-idx3-ubyte.gz")
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://example.invalid/, got:\n"
                           "<urlopen error [Errno -3] Temporary failure in name resolution>")

    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    monkeypatch.setattr("vaezoo.data.base.default_data_dir", lambda: tmp_path)
    monkeypatch.setattr(MNIST, "download", failing_download)
    with pytest.raises(DataError) as info:
        load_dataset("mnist")
    message = str(info.value)
    assert message.startswith(f"could not download mnist into {tmp_path / 'MNIST' / 'raw'} "
                              "(Error downloading train-images-idx3-ubyte.gz:); check the network")
    assert MNIST.mirrors[0] in message and "--data-root DIR" in message
    out, err = capsys.readouterr()
    assert out == "" and "Downloading" in err


def test_a_missing_dataset_is_a_one_line_cli_error(tmp_path, capsys):
    code = main(["train", "jointvae-mnist", "--data-root", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith("error: mnist not found: vaezoo looked in")
    assert not (tmp_path / "out").exists()


def test_options_a_dataset_does_not_take_are_refused(tmp_path):
    with pytest.raises(DataError, match="dataset 'mnist' does not take the options {'image_sz': 32}"):
        load_dataset("mnist", tmp_path, image_sz=32)


def test_mnist_is_read_and_resized_as_torchvision_resizes_it(mnist_root):
    from torchvision.datasets import MNIST
    from torchvision.transforms import Resize

    data = load_dataset("mnist", mnist_root, "test", image_size=32)
    reference = MNIST(str(mnist_root), train=False)
    assert data.images.shape == (10_000, 1, 32, 32) and data.images.dtype == torch.uint8
    assert torch.equal(data.labels, reference.targets)
    for i in (0, 1234, 9999):
        expected = np.asarray(Resize(32)(reference[i][0]))
        assert np.array_equal(data.images[i, 0].numpy(), expected), i
    batch = data.batch(slice(0, 8))
    assert batch.dtype == torch.float32 and 0 <= batch.min() and batch.max() <= 1
