"""Distributed training on CPU with gloo: two processes end with identical weights, and only rank 0 writes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

from kit import child_env, entries, make_card, write_toml
from vaezoo.train import CHECKPOINT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_as_rank(rank: int, world: int, port: int, card: dict, tmp) -> None:
    """One process of a DDP run (what torchrun sets up), each rank with its own --out to see who writes."""
    from vaezoo.entries.schema import Card
    from vaezoo.train import train

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    result = train(Card.model_validate(card), tmp / f"out{rank}")
    torch.save(result.model.state_dict(), tmp / f"weights{rank}.pt")


@pytest.mark.slow
def test_two_processes_end_with_identical_weights_and_only_rank_0_writes(data_plugin, tmp_path):
    mp.spawn(train_as_rank, args=(2, free_port(), make_card("toy", train={"epochs": 2}), tmp_path), nprocs=2)
    rank0 = torch.load(tmp_path / "weights0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "weights1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys()
    for key in rank0:
        assert torch.equal(rank0[key], rank1[key]), key
    checkpoint = torch.load(tmp_path / "out0" / CHECKPOINT, weights_only=True)
    assert checkpoint["step"] == 6  # 48 images per rank, 16 per step: 3 steps per epoch, 2 epochs
    assert len(checkpoint["rng_ranks"]) == 2
    assert entries(tmp_path / "out0") == [CHECKPOINT, "toyvae-bars-run.safetensors", "toyvae-bars-run.toml"]
    assert not (tmp_path / "out1").exists()


@pytest.mark.slow
def test_torchrun_trains_the_cli_on_two_processes(data_plugin, tmp_path):
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "vaezoo", "train", str(path), "--out", str(out), "--max-steps", "3"],
                         env=child_env(tmp_path / "home", site=data_plugin), capture_output=True, text=True,
                         check=False, timeout=900)
    assert run.returncode == 0, run.stderr
    assert torch.load(out / CHECKPOINT, weights_only=True)["step"] == 3
    resume = f"torchrun --nproc-per-node 2 -m vaezoo train {path} --out {out} --resume"  # on to the end
    assert run.stderr.count(f"stopped at step 3 of 12; continue with: {resume}") == 1  # rank 0 reports, rank 1 not
