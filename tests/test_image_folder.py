"""The built-in ``image_folder`` dataset: a folder of your own images read as torchvision's ImageFolder reads it,
split deterministically, refused in one line where it does not fit, and a card trained on it that loads where the
folder is not."""

from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np
import pytest
import torch
from kit import assert_one_line_error, cli, write_toml

import vaezoo
from vaezoo.assemble import data_info, load_dataset
from vaezoo.data.images import read_images
from vaezoo.entries.catalog import parse_card
from vaezoo.errors import DataError


def draw(folder, names, size=(12, 10), mode="RGB", seed=0):
    """Random PNGs at ``folder/NAME`` (``NAME`` may hold a class folder), of PIL ``mode`` and ``size``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (size[1], size[0], len(mode)), dtype=np.uint8)
        Image.fromarray(pixels[..., 0] if mode == "L" else pixels, mode).save(path)


def card(folder, name="betatcvae-mine", **options):
    """A beta-TCVAE card on ``folder``, small enough to train a step in a moment."""
    return {"name": name, "architecture": "betatcvae", "summary": "beta-TCVAE on my images.",
            "dataset": "image_folder", "paper": "Chen et al. (2018). https://arxiv.org/abs/1802.04942",
            "license": "MIT", "vaezoo_version": vaezoo.__version__,
            "model": {"latent_dim": 2, "hidden": 8},
            "train": {"epochs": 1, "batch_size": 8,
                      "data": {"name": "image_folder",
                               "options": {"folder": str(folder), "image_size": 16, "channels": 1, **options}},
                      "optimizer": {"name": "Adam", "lr": 1e-3}}}


def test_class_folders_are_read_as_torchvision_imagefolder_reads_them(tmp_path):
    from PIL import Image
    from torchvision.datasets import ImageFolder

    draw(tmp_path, [f"{label}/{i}.png" for label in ("dogs", "cats") for i in range(10)], size=(20, 14))
    reference = ImageFolder(str(tmp_path))
    expected = {}
    for path, target in reference.samples:
        image = Image.open(path).convert("RGB").resize((8, 8), Image.LANCZOS)
        expected[path] = (np.asarray(image).transpose(2, 0, 1), target)
    seen = {}
    for split in ("train", "test"):
        data = load_dataset("image_folder", split=split, folder=str(tmp_path), image_size=8)
        assert data.images.shape[1:] == (3, 8, 8) and data.images.dtype == torch.uint8
        for image, label in zip(data.images.numpy(), data.labels.tolist()):
            found = [path for path, (pixels, target) in expected.items()
                     if np.array_equal(pixels, image) and target == label]
            assert len(found) == 1
            seen[found[0]] = split
    assert sorted(seen) == sorted(expected)  # every image once, in one split
    assert list(seen.values()).count("test") == 2  # 10% of 20


def plain(folder, names):
    """A grey PNG of one level per name, 8 times its index: the level says which file an image was."""
    from PIL import Image

    folder.mkdir(parents=True)
    for name in names:
        Image.new("L", (6, 6), 8 * names.index(name)).save(folder / name)


def test_the_held_out_images_depend_on_their_names_not_on_the_order_the_folder_lists_them(tmp_path, monkeypatch):
    names = [f"img{i:02d}.png" for i in range(30)]
    plain(tmp_path / "a", names)
    # the rule the docs state: the share of the images whose paths inside the folder have the lowest sha256
    expected = sorted(names, key=lambda name: hashlib.sha256(name.encode()).hexdigest())[:6]
    real_scandir = os.scandir

    class Backwards:
        """What os.scandir gives (an iterator and a context manager), listed backwards, as another file system
        may list a folder."""

        def __init__(self, path):
            self.entries = iter(sorted(real_scandir(path), key=lambda entry: entry.name, reverse=True))

        def __iter__(self):
            return self

        def __next__(self):
            return next(self.entries)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr("vaezoo.data.folder.os.scandir", Backwards)
    splits = {split: load_dataset("image_folder", split=split, folder=str(tmp_path / "a"), image_size=2,
                                  channels=1, test_share=0.2) for split in ("train", "test")}
    held = sorted(names[int(image[0, 0, 0]) // 8] for image in splits["test"].images)
    assert held == sorted(expected) and splits["test"].labels is None
    assert len(splits["train"]) == 24 and not set(held) & {names[int(image[0, 0, 0]) // 8]
                                                           for image in splits["train"].images}


def test_train_and_test_folders_are_the_splits(tmp_path):
    draw(tmp_path, [f"train/{c}/{i}.png" for c in ("a", "b") for i in range(3)] + ["test/b/0.png"])
    train = load_dataset("image_folder", split="train", folder=str(tmp_path), image_size=4, channels=1)
    test = load_dataset("image_folder", split="test", folder=str(tmp_path), image_size=4, channels=1)
    assert (len(train), len(test)) == (6, 1) and train.images.shape[1] == 1
    assert train.labels.tolist() == [0, 0, 0, 1, 1, 1] and test.labels.tolist() == [1]


def test_images_of_every_size_and_mode_are_resized_and_converted(tmp_path):
    draw(tmp_path, ["grey.png"], (30, 20), "L")
    draw(tmp_path, ["rgba.png"], (5, 9), "RGBA")
    draw(tmp_path, ["rgb.jpg"], (64, 64), "RGB")
    draw(tmp_path, [f"{i}.png" for i in range(7)], (16, 16))
    both = [load_dataset("image_folder", split=split, folder=str(tmp_path), image_size=16, channels=3)
            for split in ("train", "test")]
    assert [len(data) for data in both] == [9, 1] and all(data.images.shape[1:] == (3, 16, 16) for data in both)


def test_links_back_up_the_folder_are_walked_once(tmp_path):
    draw(tmp_path, [f"c/{i}.png" for i in range(10)])
    (tmp_path / "c" / "up").symlink_to("..")
    (tmp_path / "c" / "here").symlink_to(".")
    assert data_info_of(tmp_path, "train").size == 9


def data_info_of(folder, split, **options):
    from vaezoo.entries.schema import Card

    return data_info(Card.model_validate(card(folder, **options)), split)


def careless(tmp_path):
    """Folders that do not fit, each with what its one-line error says."""
    tmp_path.mkdir()
    yield "missing", tmp_path / "nowhere", {}, "{folder} does not exist; set folder in the card's [train.data]"
    (tmp_path / "file").write_text("x")
    yield "a file", tmp_path / "file", {}, "{folder} is a file, not a folder"
    yield "relative", "faces", {}, "folder 'faces' is a relative path"
    (tmp_path / "empty").mkdir()
    yield "empty", tmp_path / "empty", {}, "{folder} holds no images (files ending .jpg"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("x")
    yield "no images", tmp_path / "notes", {}, "{folder} holds no images"
    draw(tmp_path / "mixed", ["a.png", "cls/b.png"])
    yield "images and subfolders", tmp_path / "mixed", {}, "{folder} holds both images (a.png) and subfolders (cls/)"
    draw(tmp_path / "hollow", ["a/1.png", "a/2.png"])
    (tmp_path / "hollow" / "b").mkdir()
    yield "a class without images", tmp_path / "hollow", {}, "the class folder {folder}/b holds no images"
    draw(tmp_path / "few", [f"{i}.png" for i in range(4)])
    yield "a share leaving no test image", tmp_path / "few", {}, \
        "a test_share of 0.1 of the 4 images in {folder} leaves no test image"
    yield "a share of 1", tmp_path / "few", {"test_share": 1.0}, "between 0 and 1, got 1.0"
    draw(tmp_path / "half", ["train/1.png"])
    yield "train/ without test/", tmp_path / "half", {}, "{folder} holds train/ but no test/"
    draw(tmp_path / "split", ["train/1.png", "test/1.png"])
    yield "a share beside train/ and test/", tmp_path / "split", {"test_share": 0.2}, \
        "{folder} holds train/ and test/, which are its splits; remove test_share"
    yield "four channels", tmp_path / "split", {"channels": 4}, "channels is 1 (grey levels) or 3 (RGB), got 4"


@pytest.mark.parametrize("case", range(12))
def test_a_folder_that_does_not_fit_is_refused_in_one_line_by_the_cli(tmp_path, capsys, case):
    what, folder, options, message = list(careless(tmp_path / "data"))[case]
    path = write_toml(tmp_path / "mine.toml", card(folder, **options))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), "--max-steps", "1")
    assert code != 0 and out == "", what
    assert_one_line_error(err, "image_folder", message.format(folder=folder))
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_hidden_files_and_folders_are_neither_images_nor_classes(tmp_path):
    """macOS leaves ``._NAME`` beside each file it copies to another file system, and Jupyter a
    ``.ipynb_checkpoints/`` in each folder it opens: ImageFolder took the first for images (which cannot be read)
    and the second for a class."""
    draw(tmp_path / "loose", [f"{i}.png" for i in range(20)] + [".ipynb_checkpoints/0-checkpoint.png"])
    (tmp_path / "loose" / "._3.png").write_bytes(b"\0\5\26\7Mac OS X")
    draw(tmp_path / "classes", [f"{c}/{i}.png" for c in ("a", "b") for i in range(10)]
         + [".ipynb_checkpoints/0.png", "a/.ipynb_checkpoints/0-checkpoint.png"])
    (tmp_path / "classes" / "b" / "._3.png").write_bytes(b"\0\5\26\7Mac OS X")
    for folder in ("loose", "classes"):
        train = load_dataset("image_folder", split="train", folder=str(tmp_path / folder), image_size=8)
        test = load_dataset("image_folder", split="test", folder=str(tmp_path / folder), image_size=8)
        assert len(train) + len(test) == 20, folder
    assert sorted(set(train.labels.tolist()) | set(test.labels.tolist())) == [0, 1]


@pytest.mark.parametrize("sizes", [{"train": 18, "test": 2, "validation": 5}, {"train": 18}, {"train": -18, "test": 2}])
def test_a_hand_edited_split_sizes_is_refused(tmp_path, sizes):
    """A card's split_sizes holds the images of train and test, and nothing else: a third split was kept, and a
    card recording train alone loaded (its test split was refused later, when read)."""
    with pytest.raises(DataError, match="image_folder's split_sizes records the images of each split"):
        data_info_of(tmp_path, "train", split_sizes=sizes)


@pytest.mark.parametrize("folder", ["./faces", "../faces", "faces/", ".."])
def test_a_relative_folder_is_refused_with_a_whole_path_to_give(tmp_path, folder):
    """The message put the user's './faces' inside the path to give: '/path/to/./faces', '~/./faces'."""
    tail = "images" if folder == ".." else "faces"
    with pytest.raises(DataError) as info:
        data_info_of(folder, "train")
    assert str(info.value).endswith(f"give it whole (/path/to/{tail}) or from your home (~/{tail})")


def test_a_corrupt_or_unreadable_image_is_named(tmp_path, monkeypatch):
    draw(tmp_path, [f"{i}.png" for i in range(10)])
    (tmp_path / "3.png").write_bytes(b"\x89PNG not an image")
    with pytest.raises(DataError, match=f"image {tmp_path / '3.png'} cannot be read .*replace it"):
        load_dataset("image_folder", split="train", folder=str(tmp_path), image_size=8)


def test_sixteen_bit_and_sideways_images_are_read_as_they_are_seen(tmp_path):
    """PIL's convert() clipped a 16-bit PNG's levels above 255 to white, and EXIF's orientation (a phone's photo
    stored sideways) was not applied."""
    from PIL import Image

    grey = np.full((8, 8), 0x8000, dtype=np.uint16)  # mid-grey in 16 bits
    grey[:, :4] = 0x4000
    Image.fromarray(grey).save(tmp_path / "grey.png")
    upright = np.zeros((8, 8, 3), dtype=np.uint8)
    upright[:4] = 255  # white on top, as the photo is seen
    stored = Image.fromarray(np.rot90(upright, 1).copy())  # stored turned; EXIF orientation 6 turns it back
    exif = stored.getexif()
    exif[0x0112] = 6
    stored.save(tmp_path / "sideways.png", exif=exif)
    images = read_images([tmp_path / "grey.png", tmp_path / "sideways.png"], "L", 8, True, "image_folder")
    assert images[0, 0, 0, :4].tolist() == [64] * 4 and images[0, 0, 0, 4:].tolist() == [128] * 4
    assert (images[1, 0, :4] == 255).all() and (images[1, 0, 4:] == 0).all()


def test_an_image_too_large_to_decode_or_not_an_image_is_named_with_what_to_do(tmp_path, monkeypatch):
    draw(tmp_path, ["big.png"], (20, 20))
    (tmp_path / "empty.png").write_bytes(b"")
    monkeypatch.setattr("vaezoo.data.images.MAX_PIXELS", 399)
    with pytest.raises(DataError) as info:
        read_images([tmp_path / "big.png"], "L", 8, True, "image_folder")
    assert str(info.value).endswith("declares 20x20 pixels, more than the 399 vaezoo decodes; shrink it (to at most "
                                    "4096x4096) or remove it")
    with pytest.raises(DataError) as info:
        read_images([tmp_path / "empty.png"], "L", 8, True, "image_folder")
    assert str(info.value) == (f"image_folder image {tmp_path / 'empty.png'} cannot be read (not an image file PIL "
                               f"knows); replace it with a fresh copy")


def test_an_image_the_user_may_not_read_is_named_with_how_to_read_it(tmp_path, monkeypatch):
    """It was told 'replace it with a fresh copy' (simulated: the tests run as root, who may read it)."""
    draw(tmp_path, ["mine.png"])
    real_open = os.open

    def forbidden(path, *args, **kwargs):
        if os.fspath(path) == str(tmp_path / "mine.png"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", forbidden)
    with pytest.raises(DataError) as info:
        read_images([tmp_path / "mine.png"], "L", 8, True, "image_folder")
    assert str(info.value) == (f"image_folder image {tmp_path / 'mine.png'} cannot be read (Permission denied); make "
                               f"it readable (chmod u+r {tmp_path / 'mine.png'})")


def test_a_class_folder_that_cannot_be_listed_is_refused_not_left_out(tmp_path, monkeypatch):
    """os.walk leaves out a folder it cannot list unless told otherwise: its images would be missing silently."""
    draw(tmp_path, [f"{c}/{i}.png" for c in ("a", "b") for i in range(5)])
    real_scandir = os.scandir

    def no_entry(path):
        if os.fspath(path) == str(tmp_path / "b"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", no_entry)
    with pytest.raises(DataError) as info:
        load_dataset("image_folder", split="train", folder=str(tmp_path), image_size=8)
    assert str(info.value) == (f"image_folder: {tmp_path / 'b'} cannot be read (Permission denied); make it readable "
                               f"(chmod -R u+rX {tmp_path})")


def test_a_folder_too_large_for_memory_is_refused_before_a_file_is_read(tmp_path, monkeypatch):
    draw(tmp_path, [f"{i}.png" for i in range(20)])
    monkeypatch.setattr("vaezoo.devices.physical_memory", lambda: 18 * 64 * 64 - 1)
    with pytest.raises(DataError, match="dataset 'image_folder' .* more than this machine's"):
        data_info_of(tmp_path, "train", image_size=64)


def test_a_run_on_a_folder_loads_shows_and_measures_where_the_folder_is_not(tmp_path, capsys):
    draw(tmp_path / "mine", [f"{c}/{i}.png" for c in ("a", "b") for i in range(10)], (20, 20))
    path = write_toml(tmp_path / "mine.toml", card(tmp_path / "mine"))
    code, _, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--name", "mine")
    assert code == 0, err
    recorded = parse_card(tmp_path / "run" / "mine.toml").train.data.options
    assert recorded["split_sizes"] == {"train": 18, "test": 2}
    trained = vaezoo.load(tmp_path / "run")

    shutil.move(tmp_path / "mine", tmp_path / "moved")  # another machine: the folder is not there
    model = vaezoo.load(tmp_path / "run")
    assert model.regularizers[0].dataset_size == 18  # the estimator's N is the run's
    for name, value in trained.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    code, out, err = cli(capsys, "show", str(tmp_path / "run"), "sample", "-n", "4", "-o", str(tmp_path / "s.png"))
    assert code == 0 and (tmp_path / "s.png").stat().st_size > 0, err
    code, out, err = cli(capsys, "push", str(tmp_path / "run"), "me/mine", "--dry-run", "--out", str(tmp_path / "hub"))
    assert code == 0, err
    assert vaezoo.load(tmp_path / "hub").regularizers[0].dataset_size == 18  # as a Hub repository gives it
    code, out, err = cli(capsys, "eval", str(tmp_path / "run"))
    assert_one_line_error(err, f"image_folder: {tmp_path / 'mine'} does not exist")

    shutil.move(tmp_path / "moved", tmp_path / "mine")
    draw(tmp_path / "mine", ["a/new.png"], seed=1)  # the folder holds other images than the run's card says
    code, out, err = cli(capsys, "eval", str(tmp_path / "run"))
    assert_one_line_error(err, f"image_folder: {tmp_path / 'mine'} holds 21 (19 train, 2 test) images now, and the "
                               f"card was trained on 20 (18 train, 2 test); put back the images")


def test_a_run_shared_on_the_hub_leaves_out_the_path_of_its_folder(tmp_path, capsys, monkeypatch):
    """The folder's path names the user's machine and files (/home/alice/patients/...): neither the card pushed
    nor its weights' header hold it, the pusher is told, and the Hub's copy still loads the run's weights."""
    folder = tmp_path / "patients" / "scans"
    draw(folder, [f"{i}.png" for i in range(20)])
    path = write_toml(tmp_path / "mine.toml", card(folder))
    assert cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--max-steps", "1", "--no-eval")[0] == 0
    code, out, err = cli(capsys, "push", str(tmp_path / "run"), "me/mine", "--dry-run", "--out", str(tmp_path / "hub"))
    assert code == 0, err
    assert f"leaves out what names this machine's files: image_folder's folder ({folder})" in err
    for file in (tmp_path / "hub").iterdir():
        assert b"patients" not in file.read_bytes(), file.name
    shared, trained = vaezoo.load(tmp_path / "hub"), vaezoo.load(tmp_path / "run")
    assert shared.card.train.data.options == {"image_size": 16, "channels": 1, "split_sizes": {"train": 18, "test": 2}}
    for name, value in trained.state_dict().items():
        assert torch.equal(shared.state_dict()[name], value), name

    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(tmp_path / "run"))  # the run in the zoo: 'push --all' staged it
    code, out, err = cli(capsys, "push", "--all", "me", "--dry-run", "--out", str(tmp_path / "zoo"))  # as it was
    assert code == 0 and "push --all: card betatcvae-mine-run" in err and "skipped: its dataset's options name" in err
    for file in (tmp_path / "zoo").rglob("*"):
        assert file.is_dir() or b"patients" not in file.read_bytes(), file.name


def test_a_card_on_a_folder_refuses_metrics_of_factors_it_has_not(tmp_path, capsys):
    draw(tmp_path / "mine", [f"{i}.png" for i in range(20)])
    path = write_toml(tmp_path / "mine.toml", card(tmp_path / "mine"))
    assert cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--no-eval")[0] == 0
    code, out, err = cli(capsys, "eval", str(tmp_path / "run"), "--metrics", "mig_chen")
    assert_one_line_error(err, "metric 'mig_chen' needs a dataset with ground-truth factors", "its dataset has none")
    code, out, err = cli(capsys, "eval", str(tmp_path / "run"))
    assert code == 0 and "reconstruction" in out, err


def test_the_conformance_kit_passes_a_folder(tmp_path):
    from vaezoo import testing

    draw(tmp_path, [f"{c}/{i}.png" for c in ("a", "b") for i in range(10)])
    testing.check_dataset("image_folder", folder=str(tmp_path), image_size=16, channels=1)


def test_the_readme_card_trains_on_a_folder(tmp_path, capsys):
    import re
    import tomllib

    from kit import REPO

    blocks = re.findall(r"```toml\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S)
    readme = tomllib.loads(next(block for block in blocks if 'name = "image_folder"' in block))
    assert readme["train"]["data"]["options"]["folder"].startswith("~/")
    readme["train"]["data"]["options"]["folder"] = str(tmp_path / "mine")
    draw(tmp_path / "mine", [f"{i}.png" for i in range(10)], (70, 50))
    path = write_toml(tmp_path / "mine.toml", readme)
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 0, err
    assert vaezoo.load(tmp_path / "run").card.train.data.options["split_sizes"] == {"train": 9, "test": 1}


def test_a_resume_on_a_folder_that_gained_images_is_refused_and_the_card_records_what_the_run_trained_on(tmp_path,
                                                                                                         capsys):
    """The split sizes were read again as the card was written: a resume after an image was added trained on the
    new folder and recorded 19 training images without a word, and a run whose folder grew while it trained
    recorded images it never saw."""
    draw(tmp_path / "mine", [f"{i}.png" for i in range(20)], (20, 20))
    path = write_toml(tmp_path / "mine.toml", card(tmp_path / "mine", test_share=0.1))
    out = tmp_path / "run"
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--name", "mine", "--max-steps", "1")
    assert code == 0, err
    draw(tmp_path / "mine", ["new.png"], (20, 20), seed=1)
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--name", "mine", "--resume")
    assert code == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"error: checkpoint {out / 'checkpoint.pt'} was made from card 'betatcvae-mine' with its dataset read "
        f"otherwise: train.data.options.split_sizes.train 18 in the checkpoint, 19 in card 'betatcvae-mine'; the "
        f"card's [train.data] options, or the files they name, changed since the run started: put back what it "
        f"trained on, or choose another --out")  # it said to resume with the card that started the run, as it was
    assert "reading image_folder" not in err  # refused before the images are read, not after
    assert parse_card(out / "mine.toml").train.data.options["split_sizes"] == {"train": 18, "test": 2}

    (tmp_path / "mine" / "new.png").unlink()  # the images it trained on: it finishes
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--name", "mine", "--resume", "--no-eval")
    assert code == 0, err
    assert parse_card(out / "mine.toml").train.data.options["split_sizes"] == {"train": 18, "test": 2}


def test_a_card_without_split_sizes_lists_its_folder_once_per_state_of_the_folder(tmp_path, monkeypatch):
    """The card you wrote, before its run, listed its folder each time its model was built (seconds for a folder of
    50,000 images); any change of the names the folder holds, however deep, is seen."""
    from vaezoo.data import folder

    draw(tmp_path / "mine", [f"{label}/{i}.png" for label in ("cats", "dogs") for i in range(10)])
    listed, real = [], folder._split_files
    monkeypatch.setattr(folder, "_split_files", lambda *args: listed.append(args) or real(*args))
    options = card(tmp_path / "mine")["train"]["data"]["options"]  # as the model's build asks (data_info)
    sizes = folder.ImageFolder().info

    assert [sizes("train", **options).size for _ in range(3)] == [18] * 3 and len(listed) == 1
    draw(tmp_path / "mine", ["cats/deep/new.png"])  # in a folder of its own, below a class
    assert sizes("train", **options).size == 19 and len(listed) == 2
    (tmp_path / "mine" / "cats" / "deep" / "new.png").rename(tmp_path / "mine" / "cats" / "deep" / "new.png.txt")
    assert sizes("train", **options).size == 18 and sizes("test", **options).size == 2 and len(listed) == 3


def test_the_listing_cache_keeps_the_same_few_bytes_of_state_for_a_folder_of_any_size(tmp_path):
    """It kept every name the folder holds beside its listing, for the life of the process: tens of megabytes for a
    folder of a million images."""
    import pickle

    from vaezoo.data import folder

    kept = []
    for name, count in (("few", 10), ("many", 200)):
        for i in range(count):  # the listing reads names, not pixels
            (tmp_path / name / f"{i // 100}").mkdir(parents=True, exist_ok=True)
            (tmp_path / name / f"{i // 100}" / f"{i}.png").touch()
        assert folder.ImageFolder().info("train", folder=str(tmp_path / name)).size == count - count // 10
        kept.append(len(pickle.dumps(folder._LISTINGS[tmp_path / name, None][0])))
    assert kept[0] == kept[1]


def test_an_image_added_while_the_folder_is_listed_is_seen_by_the_next_lookup(tmp_path, monkeypatch):
    """The state a listing is kept with is read before the listing: an image added as the listing ends (another
    thread's or process's) makes the next lookup list the folder again, not give the listing that lacks it."""
    from vaezoo.data import folder

    for i in range(10):
        (tmp_path / "mine").mkdir(exist_ok=True)
        (tmp_path / "mine" / f"{i}.png").touch()
    real = folder._split_files

    def listed_then_added(*args):
        listing = real(*args)
        (tmp_path / "mine" / "late.png").touch()
        return listing

    monkeypatch.setattr(folder, "_split_files", listed_then_added)
    sizes = [folder.ImageFolder().info(split, folder=str(tmp_path / "mine")).size for split in ("train", "test")]
    monkeypatch.setattr(folder, "_split_files", real)
    assert sizes == [9, 1]
    assert folder.ImageFolder().info("train", folder=str(tmp_path / "mine")).size == 10
