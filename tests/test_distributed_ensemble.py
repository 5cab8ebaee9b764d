"""An ensemble over several processes (torchrun): each process trains its share of the runs as one ensemble, and
each run's folder ends as training that run alone would leave it; ``--seeds`` takes ranges."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
import torch
from kit import assert_member_checkpoint_is_the_solo_runs, child_env, make_card, write_toml

from vaezoo.cli.train import MOST_SEEDS, seeds_arg
from vaezoo.entries.schema import Card
from vaezoo.errors import TrainingError
from vaezoo.training.train import CHECKPOINT, train, train_seeds


@pytest.mark.slow
def test_torchrun_shares_the_seeds_out_and_each_folder_is_its_solo_run(data_plugin, tmp_path):
    card = make_card("toy")
    path = write_toml(tmp_path / "toy.toml", card)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "vaezoo", "train", str(path), "--out", str(out), "--seeds", "0-3", "--no-eval"],
                         env=child_env(tmp_path / "home", site=data_plugin), capture_output=True, text=True,
                         check=False, timeout=900)
    assert run.returncode == 0, run.stderr
    printed = run.stdout.split()
    assert sorted(printed) == [str(out / f"seed-{s}" / "toyvae-bars-run.toml") for s in range(4)]
    assert run.stderr.count("2 runs in one step") == 4  # each process: its two members, stacked
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as torchrun runs each process (OMP_NUM_THREADS=1): the same order of float sums
    try:
        for seed in range(4):
            train(Card.model_validate(card), tmp_path / f"alone-{seed}", seed=seed, evaluate=False)
    finally:
        torch.set_num_threads(threads)
    for seed in range(4):
        alone = tmp_path / f"alone-{seed}"
        name = "toyvae-bars-run.safetensors"
        assert (out / f"seed-{seed}" / name).read_bytes() == (alone / name).read_bytes(), seed
        assert_member_checkpoint_is_the_solo_runs(out / f"seed-{seed}" / CHECKPOINT, alone / CHECKPOINT, "loop", 2)


@pytest.mark.parametrize(("world", "seeds", "said"), [
    (3, [0, 1], "torchrun starts 3 processes for 2 runs, so some would have none; run at most 2 processes "
                "(--nproc-per-node)"),
    (2, [0], "torchrun starts 2 processes for 1 run, so some would have none; run it without torchrun"),
])
def test_more_processes_than_runs_is_a_one_line_error(data_plugin, tmp_path, monkeypatch, world, seeds, said):
    for name, value in {"WORLD_SIZE": str(world), "RANK": "0", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(name, value)  # what torchrun sets in process 0
    with pytest.raises(TrainingError) as raised:
        train_seeds(Card.model_validate(make_card("toy")), tmp_path / "out", seeds)
    assert str(raised.value) == said
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("text", "seeds"), [("0-4", [0, 1, 2, 3, 4]), ("0-3,8", [0, 1, 2, 3, 8]), ("5", [5]),
                                             ("2-2,0", [2, 0]), (" 0, 1", [0, 1]), ("0 - 2 ,5 ", [0, 1, 2, 5])])
def test_seeds_take_ranges(text, seeds):
    assert seeds_arg(text) == seeds


@pytest.mark.parametrize("text", ["4-0", "0-", "-3", "0--3", "a-b", f"0-{MOST_SEEDS}", "1,2-x", "1 2", " ,1", "0- ",
                                  " "])
def test_a_bad_range_of_seeds_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="or a range of them"):
        seeds_arg(text)
