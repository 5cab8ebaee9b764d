"""``image_folder`` through the verbs that train and read several runs: an ensemble's and a sweep's members, torchrun's
processes, ``eval`` of several runs, ``seeds``, ``study``, ``leaderboard`` and ``gallery``. Each run's card records the
folder's split sizes as the run starts, loads where the folder is not, and a folder that changed is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kit import assert_one_line_error, child_env, cli, run_ranks, write_toml
from test_distributed import free_port
from test_ensemble import relative_difference
from test_image_folder import card, draw

import vaezoo
from vaezoo.data import folder
from vaezoo.data.folder import ImageFolder
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.schema import Card
from vaezoo.training.train import train

SIZES = {"train": 18, "test": 2}
"""The split sizes of a folder of 20 images with the default test_share."""


def folder_card(tmp_path):
    """20 images in ``tmp_path/mine`` and a card on them, 3 steps an epoch."""
    draw(tmp_path / "mine", [f"{i}.png" for i in range(20)], (20, 20))
    return write_toml(tmp_path / "mine.toml", card(tmp_path / "mine"))


def recorded(path):
    return parse_card(path).train.data.options["split_sizes"]


@pytest.mark.slow
def test_an_ensembles_members_record_the_folder_load_without_it_resume_only_on_it_and_end_as_their_seeds_alone(
        tmp_path, capsys):
    path = folder_card(tmp_path)
    out = tmp_path / "runs"
    train_ensemble = ["train", str(path), "--out", str(out), "--seeds", "0-2", "--no-eval"]
    code, _, err = cli(capsys, *train_ensemble, "--max-steps", "1")
    assert code == 0, err
    members = [out / f"seed-{seed}" for seed in range(3)]
    assert [recorded(member / "betatcvae-mine-run.toml") for member in members] == [SIZES] * 3

    shutil.move(tmp_path / "mine", tmp_path / "moved")  # another machine: the folder is not there
    assert [vaezoo.load(member).regularizers[0].dataset_size for member in members] == [18] * 3
    shutil.move(tmp_path / "moved", tmp_path / "mine")

    draw(tmp_path / "mine", ["new.png"], (20, 20), seed=1)
    code, _, err = cli(capsys, *train_ensemble, "--resume")
    assert_one_line_error(err, f"checkpoint {members[0] / 'checkpoint.pt'} was made from card 'betatcvae-mine' with "
                               f"its dataset read otherwise", "split_sizes.train 18 in the checkpoint, 19 in card")
    assert code == 1 and [recorded(member / "betatcvae-mine-run.toml") for member in members] == [SIZES] * 3

    (tmp_path / "mine" / "new.png").unlink()  # the images it trained on: it finishes
    code, _, err = cli(capsys, *train_ensemble, "--resume")
    assert code == 0, err
    for seed, member in enumerate(members):
        alone = train(Card.model_validate(card(tmp_path / "mine")), tmp_path / f"alone-{seed}", seed=seed,
                      evaluate=False)
        assert recorded(alone.card_path) == recorded(member / "betatcvae-mine-run.toml") == SIZES
        # bit for bit, as `train --help` promises a convolutional model's members on the CPU
        assert relative_difference(vaezoo.load(member).state_dict(), alone.model.state_dict()) == 0, seed


@pytest.mark.slow
def test_a_sweeps_members_record_the_folder_and_resume_only_on_it(tmp_path, capsys):
    path = folder_card(tmp_path)
    out = tmp_path / "runs"
    sweep = ["train", str(path), "--out", str(out), "--sweep", "model.latent_dim=2,3", "--seeds", "0,1", "--no-eval"]
    code, _, err = cli(capsys, *sweep, "--max-steps", "1")
    assert code == 0, err
    cards = sorted(out.glob("*/seed-*/betatcvae-mine-run.toml"))
    assert len(cards) == 4 and [recorded(each) for each in cards] == [SIZES] * 4
    draw(tmp_path / "mine", ["new.png"], (20, 20), seed=1)
    code, _, err = cli(capsys, *sweep, "--resume")
    assert code == 1 and "split_sizes.train 18 in the checkpoint, 19 in card" in err.strip().splitlines()[-1], err
    (tmp_path / "mine" / "new.png").unlink()
    code, _, err = cli(capsys, *sweep, "--resume")
    assert code == 0, err
    assert [parse_card(each).train.steps for each in cards] == [3] * 4  # the whole epoch, not the step it stopped at
    assert [recorded(each) for each in cards] == [SIZES] * 4


def test_an_ensemble_reads_the_folders_split_sizes_once_for_every_member(tmp_path, capsys, monkeypatch):
    """Each member read the folder in turn: a file that was in the folder for one member's read only (an image
    being copied in, then moved away) was recorded on that member's card, which then said it trained on 19
    images where every member trained on 18."""
    path = folder_card(tmp_path)
    record, reads = ImageFolder.record, []

    def copied_in_meanwhile(self, **options):
        reads.append(options)
        if len(reads) == 2:
            draw(tmp_path / "mine", ["copying.png"], (20, 20), seed=1)
            try:
                return record(self, **options)
            finally:
                (tmp_path / "mine" / "copying.png").unlink()
        return record(self, **options)

    monkeypatch.setattr(ImageFolder, "record", copied_in_meanwhile)
    code, _, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "runs"), "--seeds", "0,1", "--no-eval",
                       "--max-steps", "1")
    assert code == 0, err
    assert [recorded(tmp_path / "runs" / f"seed-{seed}" / "betatcvae-mine-run.toml") for seed in (0, 1)] == [SIZES] * 2


@pytest.mark.slow
def test_torchrun_processes_record_the_same_split_sizes(tmp_path):
    path = folder_card(tmp_path)
    out = tmp_path / "runs"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "vaezoo", "train", str(path), "--out", str(out), "--seeds", "0-1", "--no-eval"],
                         env=child_env(tmp_path / "home"), capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stderr
    assert [recorded(out / f"seed-{seed}" / "betatcvae-mine-run.toml") for seed in (0, 1)] == [SIZES] * 2


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [[], ["--seeds", "0-1"]])
def test_processes_that_read_the_folder_otherwise_are_refused_not_trained_apart(tmp_path, seeds):
    """The card's folder is ~/mine and each process has its own home: process 1 reads one image more, as where an
    image is added between the processes' reads. Each process said the other was given another card, and to
    start them with the same card, which they were."""
    for rank, images in enumerate([20, 21]):
        draw(tmp_path / f"home{rank}" / "mine", [f"{i}.png" for i in range(images)], (20, 20))
    path = write_toml(tmp_path / "mine.toml", card("~/mine"))
    env = {**child_env(tmp_path / "vaezoo-home"), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    said = run_ranks([sys.executable, "-m", "vaezoo", "train", str(path), "--out", str(tmp_path / "out"), "--no-eval",
                      *seeds], env, 300, own=lambda rank: {"HOME": str(tmp_path / f"home{rank}")})
    assert [code for code, _, _ in said] == [1, 1], said
    for _, _, err in said:
        assert_one_line_error(err, "process 1 of this run read dataset 'image_folder' otherwise than process 0 "
                                   "(split_sizes.train 19, not 18): its files changed between the processes' reads")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_eval_seeds_study_leaderboard_and_gallery_take_an_ensembles_members(tmp_path, capsys, monkeypatch):
    path = folder_card(tmp_path)
    out = tmp_path / "runs"
    code, _, err = cli(capsys, "train", str(path), "--out", str(out), "--seeds", "0-1", "--no-eval")
    assert code == 0, err
    members = [str(out / f"seed-{seed}") for seed in (0, 1)]
    read, reads = folder.read_images, []

    def counted(files, *args, **kwargs):
        reads.append(files)
        return read(files, *args, **kwargs)

    monkeypatch.setattr(folder, "read_images", counted)
    code, out_text, err = cli(capsys, "eval", *members, "--write")
    assert code == 0 and "2 of 2 runs measured, written" in err + out_text, err
    assert len(reads) == 1  # the test split, read once for both
    assert all("reconstruction" in parse_card(Path(member, "betatcvae-mine-run.toml")).metrics for member in members)

    shutil.move(tmp_path / "mine", tmp_path / "moved")  # what reads the cards alone needs no folder
    code, out_text, err = cli(capsys, "seeds", *members, "--metrics", "reconstruction")
    assert code == 0 and "2 seeds" in out_text + err, err
    code, _, err = cli(capsys, "study", str(tmp_path / "study"), members[0])
    assert_one_line_error(err, "card betatcvae-mine-run (image_folder) is no run of the study's recipes")
    monkeypatch.setenv("VAEZOO_CARDS_PATH", members[0])
    code, out_text, err = cli(capsys, "leaderboard", "reconstruction", "--dataset", "image_folder", "--json")
    assert code == 0 and "betatcvae-mine-run" in out_text, err
    code, _, err = cli(capsys, "gallery", str(tmp_path / "gallery"))
    assert code == 0, err
    assert 'id="betatcvae-mine-run"' in (tmp_path / "gallery" / "index.html").read_text(encoding="utf-8")
