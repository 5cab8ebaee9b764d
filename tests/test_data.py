"""Datasets: what vaezoo says when one is missing, and MNIST as the JointVAE recipe reads it."""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest
import torch

from vaezoo.cli import main
from vaezoo.cli.common import flag_spelling
from vaezoo.assemble import load_dataset
from vaezoo.data.dsprites import dsprites
from vaezoo.errors import DataError

RAW_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def test_a_missing_dataset_says_where_vaezoo_looked_and_how_to_get_it(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataset("mnist", tmp_path, "train", image_size=32)
    message = str(info.value)
    assert f"vaezoo looked in {tmp_path / 'MNIST' / 'raw'} (from data_root)" in message
    assert all(name in message for name in RAW_FILES)
    assert "point data_root or VAEZOO_DATA" in message and "download it into" in message


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


@pytest.mark.parametrize("place", ["raw/NAME.gz", "NAME"])
def test_mnist_files_still_packed_or_beside_raw_get_a_hint(tmp_path, place):
    """The .gz files the mirror serves, and the files one folder up, were called missing without a word."""
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    for name in RAW_FILES:
        (tmp_path / "MNIST" / place.replace("NAME", name)).write_bytes(b"")
    raw = tmp_path / "MNIST" / "raw"
    hint = (f"(their .gz files are there: unpack them, e.g. gunzip {raw}/*.gz)" if place.endswith(".gz") else
            f"({tmp_path / 'MNIST'} holds them: move them into {raw})")
    with pytest.raises(DataError, match=re.escape(f"is missing {', '.join(RAW_FILES)} {hint}; point data_root")):
        load_dataset("mnist", tmp_path)


@pytest.mark.parametrize("level", ["", "MNIST", "MNIST/raw"], ids=["data folder", "MNIST", "raw"])
def test_a_data_folder_that_may_not_be_read_is_named_with_what_to_do(tmp_path, monkeypatch, level):
    """chmod 000 on a folder (as a user without root: the suite runs as root, so the refusal is os.access's): the
    files under it were called missing, or 'Permission denied' named a file (processed/training.pt) never there."""
    from vaezoo.data import base

    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    locked = tmp_path / level
    monkeypatch.setattr(base.os, "access", lambda path, mode: os.fspath(path) != os.fspath(locked))
    with pytest.raises(DataError, match=re.escape(f"mnist: cannot read the folder {locked} (Permission denied); make "
                                                  f"it readable (chmod u+rx), or point data_root or VAEZOO_DATA at")):
        load_dataset("mnist", tmp_path, "test")


def test_a_dsprites_folder_that_may_not_be_read_is_named_with_what_to_do(tmp_path, monkeypatch):
    """'Permission denied' named DIR/dsprites/dsprites_ndarray_...npz, a path never there."""
    from vaezoo.data import base

    monkeypatch.setattr(base.os, "access", lambda path, mode: os.fspath(path) != os.fspath(tmp_path))
    with pytest.raises(DataError, match=re.escape(f"dsprites: cannot read the folder {tmp_path} (Permission denied)")):
        dsprites(tmp_path, source="official")


def test_a_data_folder_that_may_be_entered_but_not_listed_loads(mnist_root, monkeypatch):
    """chmod 711, as a shared data folder may be: its files are opened by name, and loaded before the check of an
    unreadable folder refused the folder for its missing read permission."""
    from vaezoo.data import base

    unlisted = {os.fspath(mnist_root / level) for level in ("", "MNIST", "MNIST/raw")}
    access = base.os.access
    monkeypatch.setattr(base.os, "access", lambda path, mode: (
        not mode & os.R_OK if os.fspath(path) in unlisted else access(path, mode)))
    assert len(load_dataset("mnist", mnist_root, "test")) == 10_000


def test_an_mnist_file_that_may_not_be_read_says_so_not_to_replace_it(tmp_path, monkeypatch):
    from vaezoo.data import torchvision_sets

    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "t10k-images-idx3-ubyte").write_bytes(b"")
    opened = torchvision_sets.os.open

    def refuse(path, *args, **kwargs):
        if os.fspath(path).endswith("t10k-images-idx3-ubyte"):
            raise PermissionError(13, "Permission denied")
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(torchvision_sets.os, "open", refuse)
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte cannot be read \(Permission denied\); make it "
                                        r"readable \(chmod u\+r\), or give a copy you can read$"):
        load_dataset("mnist", tmp_path, "test")


def test_offline_a_missing_dataset_is_not_downloaded(tmp_path, monkeypatch):
    from torchvision.datasets import MNIST

    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    monkeypatch.setattr("vaezoo.data.base.default_data_dir", lambda: tmp_path)
    monkeypatch.setattr(MNIST, "download", lambda self: pytest.fail("downloaded although VAEZOO_OFFLINE=1"))
    with pytest.raises(DataError, match=r"mnist not found: vaezoo looked in .* \(from the default data folder, which "
                                        r"VAEZOO_OFFLINE=1 downloads nothing into\)"):
        load_dataset("mnist")


@pytest.mark.parametrize("load", [lambda: load_dataset("mnist"), lambda: load_dataset("celeba"),
                                  lambda: dsprites(source="official")], ids=["mnist", "celeba", "dsprites"])
def test_offline_a_missing_dataset_says_to_unset_vaezoo_offline_not_to_leave_out_what_is_left_out(tmp_path,
                                                                                                  monkeypatch, load):
    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    monkeypatch.setattr("vaezoo.data.base.default_data_dir", lambda: tmp_path)
    with pytest.raises(DataError) as info:
        load()
    message = str(info.value)
    assert f"or unset VAEZOO_OFFLINE to let vaezoo download it into {tmp_path}" in message, message
    assert "leave out" not in message and "\n" not in message


def test_offline_a_dataset_missing_from_data_root_says_to_leave_it_out_and_unset_vaezoo_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    monkeypatch.setattr("vaezoo.data.base.default_data_dir", lambda: tmp_path / "default")
    with pytest.raises(DataError) as info:
        load_dataset("mnist", tmp_path)
    assert info.value.spelled(flag_spelling).endswith(
        f"point --data-root or VAEZOO_DATA at a folder holding MNIST/raw/ in torchvision's layout, or leave out both "
        f"and unset VAEZOO_OFFLINE to let vaezoo download it into {tmp_path / 'default'}")


def test_a_failed_download_is_explained_and_progress_stays_off_stdout(tmp_path, monkeypatch, capsys):
    from torchvision.datasets import MNIST

    def failing_download(self):
        os.makedirs(self.raw_folder, exist_ok=True)  # as torchvision's download does first
        print("Downloading https://example.invalid/train-images-idx3-ubyte.gz")
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://example.invalid/, got:\n"
                           "<urlopen error [Errno -3] Temporary failure in name resolution>")

    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    monkeypatch.setattr("vaezoo.data.base.default_data_dir", lambda: tmp_path)
    monkeypatch.setattr(MNIST, "download", failing_download)
    with pytest.raises(DataError) as info:
        load_dataset("mnist")
    message = str(info.value)
    assert message.startswith(f"could not download mnist into {tmp_path / 'MNIST' / 'raw'} (Error downloading "
                              "train-images-idx3-ubyte.gz: Tried https://example.invalid/, got: <urlopen error [Errno "
                              "-3] Temporary failure in name resolution>); check the network")
    assert MNIST.mirrors[0] in message and "pass data_root=DIR" in message
    assert list(tmp_path.iterdir()) == [], "the failed download left the folders it made"
    out, err = capsys.readouterr()
    assert out == "" and "Downloading" in err


def test_a_missing_dataset_is_a_one_line_cli_error(tmp_path, capsys):
    code = main(["train", "jointvae-mnist", "--data-root", str(tmp_path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: mnist not found: vaezoo looked in {tmp_path / 'MNIST' / 'raw'} (from --data-root)")
    assert "; point --data-root or VAEZOO_DATA at a folder" in line
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


def _chairs_folder(root, chairs: int = 2, views: int = 3, size: int = 64):
    """A folder laid out as the original JointVAE code read Chairs: one subfolder per chair of grey renders."""
    from PIL import Image

    rng = np.random.default_rng(0)
    expected = []
    for chair in range(chairs):
        folder = root / "rendered_chairs_64" / f"chair_{chair:04d}" / "renders"
        folder.mkdir(parents=True)
        for view in range(views):
            rgb = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(rgb).save(folder / f"image_{view:03d}.png")
            expected.append(np.asarray(Image.fromarray(rgb).convert("L")))
    return np.stack(expected)


def test_chairs_are_read_as_the_original_imagefolder_in_grey_levels(tmp_path, monkeypatch):
    from torchvision import transforms
    from torchvision.datasets import ImageFolder

    expected = _chairs_folder(tmp_path)
    monkeypatch.setattr("vaezoo.data.chairs.IMAGES", 6)  # the real folder holds 86,366 renders
    data = load_dataset("chairs", tmp_path, "test")
    assert data.images.shape == (6, 1, 64, 64) and data.images.dtype == torch.uint8
    assert np.array_equal(data.images[:, 0].numpy(), expected)
    original = ImageFolder(str(tmp_path / "rendered_chairs_64"),
                           transform=transforms.Compose([transforms.Grayscale(), transforms.ToTensor()]))
    reference = torch.stack([original[i][0] for i in range(len(original))])
    torch.testing.assert_close(data.batch(slice(None)), reference, rtol=0, atol=0)


def test_links_back_up_a_chair_folder_are_walked_once(tmp_path, monkeypatch):
    """ImageFolder follows them until the path is too long: one link counted each image 41 times, two made
    the walk exponential (a hang, its memory growing)."""
    expected = _chairs_folder(tmp_path)
    renders = tmp_path / "rendered_chairs_64" / "chair_0000" / "renders"
    (renders / "up").symlink_to("..")
    (renders / "here").symlink_to(".")
    monkeypatch.setattr("vaezoo.data.chairs.IMAGES", 6)
    data = load_dataset("chairs", tmp_path, "test")
    assert np.array_equal(data.images[:, 0].numpy(), expected)


@pytest.mark.parametrize("arrange, message", [
    (lambda root: None, "chairs not found: vaezoo looked for {root}/rendered_chairs_64 (from data_root); "
                        "center-crop the renders"),
    (lambda root: (root / "rendered_chairs_64").mkdir(), "holds no images in one subfolder per chair"),
    (lambda root: _chairs_folder(root, 1, 2), "chairs: found 2 images in {root}/rendered_chairs_64, expected 86,366"),
    (lambda root: _chairs_folder(root, 1, 1, size=600), "is 600x600, not 64x64; center-crop the renders"),
])
def test_a_chairs_folder_that_does_not_fit_is_one_line(tmp_path, monkeypatch, arrange, message):
    arrange(tmp_path)
    if "600x600" in message:
        monkeypatch.setattr("vaezoo.data.chairs.IMAGES", 1)
    with pytest.raises(DataError) as info:
        load_dataset("chairs", tmp_path)
    text = str(info.value)
    assert message.format(root=tmp_path) in text and "\n" not in text
    assert "https://www.di.ens.fr/willow/research/seeing3Dchairs/" in text


def test_pointing_at_the_chairs_folder_itself_gets_a_hint(tmp_path):
    (tmp_path / "rendered_chairs_64").mkdir()
    with pytest.raises(DataError, match="looks like the rendered_chairs_64 folder itself"):
        load_dataset("chairs", tmp_path / "rendered_chairs_64")


def test_a_missing_celeba_lists_the_missing_files_in_one_line(tmp_path):
    (tmp_path / "celeba").mkdir()
    (tmp_path / "celeba" / "list_eval_partition.txt").write_text("000001.jpg 0\n")
    with pytest.raises(DataError) as info:
        load_dataset("celeba", tmp_path, "test")
    text = str(info.value)
    assert text.startswith(f"celeba not found: vaezoo looked in {tmp_path / 'celeba'} (from data_root) and is "
                           f"missing img_align_celeba/, list_attr_celeba.txt, identity_CelebA.txt")
    assert "list_eval_partition.txt" not in text.split("missing", 1)[1].split(";")[0]
    assert "https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html" in text and "\n" not in text


def test_a_failed_celeba_download_is_one_line(tmp_path, monkeypatch):
    from torchvision.datasets import CelebA

    def failing_download(self):
        raise RuntimeError("Too many users have viewed or downloaded this file recently.\nTry again later.")

    monkeypatch.delenv("VAEZOO_DATA", raising=False)
    monkeypatch.setattr("vaezoo.data.base.default_data_dir", lambda: tmp_path)
    monkeypatch.setattr(CelebA, "download", failing_download)
    with pytest.raises(DataError) as info:
        load_dataset("celeba")
    assert str(info.value).startswith(f"could not download celeba into {tmp_path / 'celeba'} (Too many users have "
                                      f"viewed or downloaded this file recently.); Google Drive often refuses it")
    assert "\n" not in str(info.value)


def _celeba_folder(root, partition):
    """CelebA in torchvision's layout: aligned 178x218 faces, the split file and (empty) label files."""
    from PIL import Image
    from torchvision.datasets import CelebA

    folder = root / "celeba"
    (folder / "img_align_celeba").mkdir(parents=True)
    rng = np.random.default_rng(0)
    names = [f"{i + 1:06d}.jpg" for i in range(len(partition))]
    for name in names:
        Image.fromarray(rng.integers(0, 256, (218, 178, 3), dtype=np.uint8)).save(folder / "img_align_celeba" / name)
    rows = {"list_eval_partition.txt": [f"{n} {p}" for n, p in zip(names, partition)],
            "identity_CelebA.txt": [f"{n} 1" for n in names],
            "list_bbox_celeba.txt": [str(len(names)), "image_id x_1 y_1 width height"]
                                    + [f"{n} 0 0 1 1" for n in names],
            "list_landmarks_align_celeba.txt": [str(len(names)), "lefteye_x lefteye_y"] + [f"{n} 0 0" for n in names],
            "list_attr_celeba.txt": [str(len(names)), "Smiling"] + [f"{n} 1" for n in names]}
    for name, lines in rows.items():
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder, names, CelebA


def test_celeba_faces_are_resized_whole_to_64x64_rgb(tmp_path, monkeypatch):
    from PIL import Image

    folder, names, CelebA = _celeba_folder(tmp_path, [0, 2, 2, 1])
    monkeypatch.setattr(CelebA, "_check_integrity", lambda self: True)  # the label files are stand-ins
    data = load_dataset("celeba", tmp_path, "test")
    assert data.images.shape == (2, 3, 64, 64) and data.images.dtype == torch.uint8
    for image, name in zip(data.images, [names[1], names[2]]):
        expected = np.asarray(Image.open(folder / "img_align_celeba" / name).convert("RGB")
                              .resize((64, 64), Image.LANCZOS))
        assert np.array_equal(image.permute(1, 2, 0).numpy(), expected)


def test_celeba_and_chairs_describe_their_splits_without_reading_files():
    from vaezoo.plugins import registry

    celeba, chairs = registry("dataset")["celeba"], registry("dataset")["chairs"]
    assert (celeba.info("train").size, celeba.info("test").size) == (162_770, 19_962)
    assert (celeba.info("test").channels, celeba.info("test").image_size) == (3, 64)
    assert (chairs.info("test").size, chairs.info().channels, chairs.info().image_size) == (86_366, 1, 64)
    for dataset, split in [(celeba, "validation"), (chairs, "valid")]:
        with pytest.raises(DataError, match=f"has splits .*not '{split}'"):
            dataset.info(split)


def test_a_split_is_a_map_style_dataset_that_a_dataloader_batches_as_batch_does():
    from vaezoo.data import ImageDataset

    images = torch.randint(0, 256, (10, 1, 4, 4), dtype=torch.uint8)
    labelled = ImageDataset(images, labels=torch.arange(10) % 3)
    assert isinstance(labelled, torch.utils.data.Dataset)  # as a type checker takes it for DataLoader's argument
    assert len(labelled + labelled) == 20  # torch's datasets concatenate
    x, y = next(iter(torch.utils.data.DataLoader(labelled, batch_size=4)))
    assert torch.equal(x, labelled.batch(slice(0, 4))) and y.tolist() == [0, 1, 2, 0]
    image, label = ImageDataset(images)[torch.tensor(7)]
    assert torch.equal(image, labelled.batch(slice(7, 8))[0]) and label.item() == -1  # no labels
    with pytest.raises(TypeError, match="at an int index, not slice; take several with dataset.batch"):
        labelled[2:4]


def test_a_split_goes_through_dataloader_workers_and_pickles_as_a_spawned_worker_takes_it():
    """What a torch user's pipeline does with a split: DataLoader workers started the default way (fork on Linux)
    and the pickle a spawned or forkserver worker is given; each gives the batches the loader gives without them."""
    import copy
    import pickle

    from vaezoo.data.synthetic import synthetic

    for split in (synthetic("train", size=12), dsprites(split="test", subset=12)):
        alone = list(torch.utils.data.DataLoader(split, batch_size=5))
        workers = list(torch.utils.data.DataLoader(split, batch_size=5, num_workers=2))
        for other in (workers, list(torch.utils.data.DataLoader(pickle.loads(pickle.dumps(split)), batch_size=5)),
                      list(torch.utils.data.DataLoader(copy.deepcopy(split), batch_size=5))):
            assert [len(x) for x, _ in other] == [5, 5, 2]
            assert all(torch.equal(x, y) and torch.equal(a, b) for (x, a), (y, b) in zip(alone, other))


def test_an_items_label_is_a_copy_as_its_image_is():
    """dataset[i]'s label was a view of the dataset's labels: label += 1 on it changed the dataset."""
    from vaezoo.data import ImageDataset

    dataset = ImageDataset(torch.zeros(3, 1, 2, 2, dtype=torch.uint8), labels=torch.tensor([4, 5, 6]))
    image, label = dataset[1]
    image += 1
    label += 1
    assert dataset.labels.tolist() == [4, 5, 6] and dataset[1][1].item() == 5 and dataset.images.sum() == 0


def test_datasets_are_equal_and_hashed_by_identity_as_torchs_are():
    """Two datasets compared field by field compared their tensors: a == b, a in [b, a] and list.remove raised
    torch's 'Boolean value of Tensor with more than one value is ambiguous', and a dataset was no dict key."""
    from vaezoo.data import ImageDataset

    images = torch.zeros(3, 1, 2, 2, dtype=torch.uint8)
    for a, b in [(ImageDataset(images), ImageDataset(images.clone())),
                 (dsprites(split="test", subset=3), dsprites(split="test", subset=3))]:
        assert a == a and a != b and [b, a].index(a) == 1 and {a: 1, b: 2}[a] == 1


def test_a_dataset_is_shown_in_one_line_saying_what_it_holds():
    """print(dataset) showed every field's tensor: 54 lines of MNIST's pixels, 263 of 100 dSprites."""
    from vaezoo.data import ImageDataset

    images = torch.zeros(1200, 1, 4, 4, dtype=torch.uint8)
    assert repr(ImageDataset(images, labels=torch.zeros(1200), binarize=True)) == \
        "ImageDataset(1,200 images (1, 4, 4), labels, binarize=True)"
    assert repr(dsprites(split="test", subset=3)) == \
        "DSprites(3 images (1, 64, 64), factors ('shape', 'scale', 'orientation', 'posX', 'posY'))"  # unpacked


@pytest.mark.parametrize("index", [slice(0, 2), 0, [0, 1]])
def test_a_batch_is_a_copy_in_the_standard_layout_whatever_the_stored_images(index):
    from vaezoo.data import ImageDataset

    stored = torch.full((4, 1, 3, 3), 200.0)
    data = ImageDataset(stored.clone(), scale=255.0)  # float images in [0, 255], which a slice of them is a view of
    first = data.batch(index)
    assert torch.equal(data.images, stored) and torch.equal(data.batch(index), first)  # not divided again
    first.zero_()
    assert torch.equal(data.images, stored)
    # one channel read from (N, H, W, C) pixels: channels-last strides, which torch calls contiguous too
    grey = ImageDataset(torch.zeros(4, 3, 3, 1, dtype=torch.uint8).permute(0, 3, 1, 2).contiguous())
    assert grey.batch(slice(0, 2)).stride() == torch.empty(2, 1, 3, 3).stride()


@pytest.mark.parametrize("index", [True, np.True_, torch.tensor(True), 1.0, np.float32(1), None, "0",
                                   torch.tensor([0.0, 1.0]), torch.zeros(2, 2, dtype=torch.long), slice(0, 3, -1),
                                   slice(0.5, 2)])
def test_a_batch_at_an_index_that_is_none_is_refused_in_one_line(index):
    """batch(True) and batch(torch.tensor(True)) were every image in a batch of one, batch(np.True_) and
    batch(1.0) torch's IndexError about "long or byte Variables", dataset[torch.tensor(True)] image 1."""
    from vaezoo.data import ImageDataset

    images = torch.randint(0, 256, (10, 1, 4, 4), dtype=torch.uint8)
    for dataset in (ImageDataset(images), dsprites(split="test", subset=10)):
        with pytest.raises(TypeError, match=r"^a dataset's batch (is taken at an int, a slice, a sequence or 1-D "
                                            r"tensor of ints, or a bool mask of one value per image|takes a slice "
                                            r"of whole numbers with a step of 1 or more), got [^\n]+$"):
            dataset.batch(index)
    with pytest.raises(TypeError, match="^a dataset's item is one image, at an int index, not Tensor"):
        ImageDataset(images, labels=torch.arange(10))[torch.tensor(True)]


def test_a_batch_out_of_range_names_the_range_and_a_batch_at_ints_or_a_mask_is_taken():
    from vaezoo.data import ImageDataset

    images = torch.randint(0, 256, (10, 1, 4, 4), dtype=torch.uint8)
    dataset = ImageDataset(images, labels=torch.arange(10))
    for index in (10, -11, np.int64(100), torch.tensor([0, 10]), [3, 12]):
        with pytest.raises(IndexError, match=r"out of range for a dataset of 10 images; use 0 to 9 \(or -10 to -1 "
                                             r"from the end\)$"):
            dataset.batch(index)
    with pytest.raises(IndexError, match=r"^index 10 is out of range for a dataset of 10 images"):
        dataset[10]
    with pytest.raises(IndexError, match=r"^a mask picks images with one truth value per image, 10, got 3$"):
        dataset.batch(torch.tensor([True, False, True]))
    mask = torch.arange(10) % 3 == 0
    assert torch.equal(dataset.batch(mask), dataset.batch(torch.tensor([0, 3, 6, 9])))
    assert torch.equal(dataset.batch(torch.tensor([1, 2], dtype=torch.uint8)), dataset.batch([1, 2]))  # no mask
    assert torch.equal(dataset.batch(np.array([1, 2])), dataset.batch((1, 2)))
    assert dataset.batch([]).shape == (0, 1, 4, 4) and dataset.batch(-1).shape == (1, 4, 4)


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist", "celeba"])
@pytest.mark.parametrize("size", [0, -1])
def test_an_image_size_below_one_is_refused_before_any_file_is_read(tmp_path, name, size):
    """load_dataset("mnist", image_size=0) read the files, then met the resize's "height and width must be > 0" (a
    card's options were refused already, by the card's schema)."""
    with pytest.raises(DataError, match=rf"dataset '{name}': image_size = {size} is not a whole number \(int\), at "
                                        rf"least 1"):
        load_dataset(name, tmp_path / "nothing here", "test", image_size=size)


def test_batches_of_no_whole_number_of_images_and_batches_of_no_model_dtype_are_refused():
    """batches(0) was range()'s ValueError and batches(-1) yielded nothing (a metric over no image); batch(dtype=
    torch.int64) was torch's cast error, and dSprites' gave integer images."""
    from vaezoo.data import ImageDataset
    from vaezoo.errors import DtypeError

    grey = ImageDataset(torch.randint(0, 256, (5, 1, 4, 4), dtype=torch.uint8))
    for dataset in (grey, dsprites(split="test", subset=5)):
        for size in (0, -1, 2.0, True, None):
            with pytest.raises(DataError, match=rf"^batches takes batch_size, the images per batch, a whole number "
                                                rf">= 1, got {size!r}$"):
                list(dataset.batches(size))
        assert [start for start, _ in dataset.batches(np.int64(2))] == [0, 2, 4]
        with pytest.raises(DtypeError, match=r"^dtype torch.int64 cannot be a model's parameters' type"):
            dataset.batch(slice(0, 2), dtype=torch.int64)
        assert dataset.batch(slice(0, 2), dtype="bf16").dtype == torch.bfloat16


BINARY = (torch.rand(8, 1, 4, 4, generator=torch.Generator().manual_seed(0)) > 0.5).to(torch.uint8)
FACTORS = torch.arange(16).reshape(8, 2) % 3
MISBUILT = {  # each met a deep torch error at its first batch, or trained or scored silently
    "numpy images": (dict(images=BINARY.numpy()), r"a dataset's images are a torch tensor \(N, C, H, W\), got "
                                                  r"ndarray; convert them \(torch.from_numpy\(array\)"),
    "a list": (dict(images=BINARY.tolist()), r"a dataset's images are a torch tensor \(N, C, H, W\), got list"),
    "no channels": (dict(images=BINARY[:, 0]), r"a dataset's images are \(N, C, H, W\), got shape \(8, 4, 4\); add "
                                               r"the channel dimension \(images.unsqueeze\(1\)\)"),
    "5-d": (dict(images=BINARY[:, None]), r"a dataset's images are \(N, C, H, W\), got shape \(8, 1, 1, 4, 4\); "
                                          r"reshape them"),
    "complex": (dict(images=BINARY.to(torch.complex64)), r"a dataset's images are real numbers, got complex64; give "
                                                         r"their real values"),
    "bool at 255": (dict(images=BINARY.bool()), r"a dataset of bool images holds 0 and 1: give it scale=1.0, not "
                                                r"255.0 \(their pixels would be 0 and 1/255\)"),
    **{f"scale {scale!r}": (dict(images=BINARY, scale=scale),
                            rf"a dataset's scale, what its stored values are divided by to lie in \[0, 1\], is a "
                            rf"number > 0 \(255 for 8-bit images, 1 for images in \[0, 1\]\), got {re.escape(said)}")
       for scale, said in ((0, "0 (int)"), (-1.0, "-1.0 (float)"), (math.nan, "nan (float)"),
                           (math.inf, "inf (float)"), ("255", "'255' (str)"), (True, "True (bool)"))},
    "labels of 3": (dict(images=BINARY, labels=torch.arange(3)),
                    r"a dataset's labels are \(N,\), one per image, and it holds 8 images, got shape \(3,\)"),
    "labels of 2 columns": (dict(images=BINARY, labels=FACTORS),
                            r"a dataset's labels are \(N,\), one per image, and it holds 8 images, got shape \(8, 2\)"),
    "factors of 5": (dict(images=BINARY, factors=FACTORS[:5]),
                     r"a dataset's factors are \(N, K\) with K >= 1, one per image, and it holds 8 images, got shape "
                     r"\(5, 2\)"),
    "1-d factors": (dict(images=BINARY, factors=FACTORS[:, 0]),
                    r"a dataset's factors are \(N, K\) with K >= 1, one per image, and it holds 8 images, got shape "
                    r"\(8,\)"),
    "no factors": (dict(images=BINARY, factors=FACTORS[:, :0]), r"a dataset's factors are \(N, K\) with K >= 1, "),
    "text factors": (dict(images=BINARY, factors="shape"), r"a dataset's factors are a tensor \(N, K\) with K >= 1, "
                                                           r"one per image, got 'shape' \(str\)"),
    "one name for 2 factors": (dict(images=BINARY, factors=FACTORS, factor_names=("shape",)),
                               r"a dataset's factor_names name 1 factor\(s\) \('shape',\) and it holds factors of 2 "
                               r"column\(s\); give one name per column of its factors"),
    "names without factors": (dict(images=BINARY, factor_names=("shape", "x")),
                              r"a dataset's factor_names name 2 factor\(s\) \('shape', 'x'\) and it holds no factors"),
    "names as a string": (dict(images=BINARY, factors=FACTORS, factor_names="xy"),
                          r"a dataset's factor_names are a tuple of names, one per column of its factors, got 'xy' "
                          r"\(str\)"),
    "nominal as a string": (dict(images=BINARY, factors=FACTORS, factor_names=("shape", "x"), nominal_factors="shape"),
                            r"a dataset's nominal_factors are a tuple of names, each one of its factor_names, got "
                            r"'shape' \(str\)"),
    "nominal unknown": (dict(images=BINARY, factors=FACTORS, factor_names=("shape", "x"), nominal_factors=("colour",)),
                        r"a dataset's nominal_factors \['colour'\] are not among its factor_names \('shape', 'x'\); "
                        r"name factors of the dataset"),
    "binarize 'yes'": (dict(images=BINARY, binarize="yes"), r"a dataset's binarize is True or False, got 'yes'"),
}


@pytest.mark.parametrize("fields, message", MISBUILT.values(), ids=MISBUILT)
def test_a_dataset_built_by_hand_wrongly_is_refused_when_it_is_made(fields, message):
    """Numpy or complex images met "'numpy.ndarray' object has no attribute 'to'" or trained on their real part;
    labels or factors of another length trained, and scored where their names or lengths did not match; bool images
    at the default scale trained on pixels of 0 and 1/255."""
    from vaezoo.data import ImageDataset

    with pytest.raises(DataError, match=f"^{message}"):
        ImageDataset(**fields)


def test_a_dataset_built_by_hand_takes_its_labels_and_factors_as_arrays_and_any_real_images():
    from vaezoo.data import ImageDataset

    made = ImageDataset(BINARY.bool(), scale=1, labels=np.arange(8), factors=FACTORS.numpy(), factor_names=["a", "b"],
                        nominal_factors=["a"])
    assert torch.equal(made.labels, torch.arange(8)) and torch.equal(made.factors, FACTORS)
    assert (made.factor_names, made.nominal_factors) == (("a", "b"), ("a",))
    assert torch.equal(made.batch(slice(None)), BINARY.float())
    assert len(ImageDataset(BINARY[:0], factors=FACTORS[:0])) == 0  # refused where it is used (nothing to measure)
    for images in (BINARY.long() * 255, BINARY.double() * 255, BINARY.to(torch.int16) * 255):
        assert torch.equal(ImageDataset(images).batch(slice(None)), BINARY.float())


def test_a_dataset_built_by_hand_takes_a_flag_a_scale_and_nominal_factors_computed_with_numpy_or_torch():
    # each trained before the dataset was checked when made, and was then refused: np.True_ as "binarize is True or
    # False, got np.True_ (bool)"
    from vaezoo.data import ImageDataset

    made = ImageDataset(BINARY * 255, scale=(BINARY * 255).max(), binarize=np.bool_(True), factors=FACTORS,
                        factor_names=("a", "b"), nominal_factors={"b", "a"})
    assert made.binarize is True and made.scale == 255 and not isinstance(made.scale, torch.Tensor)
    assert made.nominal_factors == ("a", "b") and torch.equal(made.batch(slice(None)), BINARY.float())
    with pytest.raises(DataError, match=r"^a dataset's scale, .* got tensor\(True\)"):
        ImageDataset(BINARY, scale=torch.tensor(True))
    with pytest.raises(DataError, match=r"^a dataset's factor_names are a tuple of names, one per column of its "
                                        r"factors, got \{'a'\} \(set\)"):  # a set has no order to name columns by
        ImageDataset(BINARY, factors=FACTORS[:, :1], factor_names={"a"})
