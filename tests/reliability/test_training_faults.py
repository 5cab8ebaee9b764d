"""Training faults: a NaN stops the run cleanly, SIGKILL never costs the last checkpoint, resume is exact."""

from __future__ import annotations

import io
import multiprocessing
import os
import random
import signal
import time

import pytest
import torch
from faultkit import assert_one_line_error, cli, tiny_card, write_toml

from vaezoo.cards import Card, parse_card
from vaezoo.errors import TrainingError
from vaezoo.train import CHECKPOINT, train
from vaezoo.weights import read_safetensors

KILLS = 5  # random-time SIGKILLs in the resume test
FORK = multiprocessing.get_context("fork")  # the child shares this process's imports: no torch start-up


@pytest.fixture(autouse=True)
def one_thread():
    """Run torch on one thread: a forked child that enters an OpenMP region its parent used can hang."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _card(**train_changes) -> Card:
    data = tiny_card()
    data["train"].update(train_changes)
    return Card.model_validate(data)


def _step_of(checkpoint) -> int:
    """The step stored in a checkpoint, read the way ``vaezoo train --resume`` reads it."""
    return int(torch.load(checkpoint, map_location="cpu", weights_only=True)["step"])


def _same_weights(a, b) -> None:
    left, right = read_safetensors(a), read_safetensors(b)
    assert left.keys() == right.keys()
    for key in left:
        assert torch.equal(left[key], right[key]), f"{key} differs between {a} and {b}"


def test_nan_loss_stops_with_the_last_good_checkpoint(tiny_data, tmp_path):
    card = _card(checkpoint_every=4)
    card = card.model_copy(update={"model": {**card.model, "regularizers": [{"type": "nan_after", "at": 6}]}})
    out = tmp_path / "run"
    with pytest.raises(TrainingError) as err:
        train(card, out)
    message = str(err.value)
    assert "loss became nan at step 6" in message and str(out / CHECKPOINT) in message and "step 4" in message
    assert _step_of(out / CHECKPOINT) == 4
    assert sorted(p.name for p in out.iterdir()) == [CHECKPOINT], "a NaN run must write no weights or card"


def test_nan_in_the_data_through_the_command_line(tiny_data, tmp_path, capsys):
    data = tiny_card()
    data["train"]["data"]["options"] = {"nan": True}
    card_path = write_toml(tmp_path / "tiny.toml", data)
    out = tmp_path / "run"
    code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, "loss became nan at step 0")
    assert not out.exists() or not any(out.iterdir())


def _train_and_die_in_save(card: Card, out, die_at: int) -> None:
    """Train, and on the ``die_at``-th checkpoint write half of it and SIGKILL this process."""
    real_save, saves = torch.save, 0

    def half_save_then_die(obj, path) -> None:
        nonlocal saves
        saves += 1
        if saves < die_at:
            return real_save(obj, path)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        with open(path, "wb") as f:
            f.write(buffer.getvalue()[: buffer.tell() // 2])
            f.flush()
            os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)

    torch.save = half_save_then_die
    train(card, out)


def test_sigkill_during_a_checkpoint_write(tiny_data, tmp_path):
    card = _card(checkpoint_every=4)
    out = tmp_path / "killed"
    child = FORK.Process(target=_train_and_die_in_save, args=(card, out, 2))
    child.start()
    child.join(timeout=300)
    assert child.exitcode == -signal.SIGKILL

    partial = [p for p in out.iterdir() if p.name != CHECKPOINT]
    assert len(partial) == 1 and partial[0].name.startswith(f".{CHECKPOINT}.") and partial[0].suffix == ".tmp"
    with pytest.raises((RuntimeError, OSError)):  # it really is half a checkpoint (torch's error varies)
        torch.load(partial[0], weights_only=True)
    assert _step_of(out / CHECKPOINT) == 4, "the previous checkpoint must survive the kill"

    train(card, out, resume=True)
    assert sorted(p.name for p in out.iterdir()) == [CHECKPOINT, f"{card.name}.safetensors", f"{card.name}.toml"]
    reference = tmp_path / "reference"
    train(card, reference)
    _same_weights(out / f"{card.name}.safetensors", reference / f"{card.name}.safetensors")


def _resume(card: Card, out) -> None:
    train(card, out, resume=True)


def test_resume_after_random_sigkills_is_exact(tiny_data, tmp_path):
    """Kill a run at random moments (a checkpoint every step), resume each time: the weights are unchanged."""
    card = _card(epochs=50, checkpoint_every=1)
    out, checkpoint = tmp_path / "killed", tmp_path / "killed" / CHECKPOINT
    rng = random.Random(0)
    steps = [0]
    for _ in range(KILLS):
        child = FORK.Process(target=_resume, args=(card, out))
        child.start()
        deadline = time.monotonic() + 300
        while not checkpoint.exists() or _step_of(checkpoint) <= steps[-1]:
            assert child.is_alive() and time.monotonic() < deadline, "the run ended before it could be killed"
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL
        steps.append(_step_of(checkpoint))
    assert steps == sorted(steps) and len(set(steps)) == len(steps), steps
    leftovers = [p.name for p in out.iterdir() if p.name != CHECKPOINT]
    assert all(n.startswith(f".{CHECKPOINT}.") and n.endswith(".tmp") for n in leftovers), leftovers

    train(card, out, resume=True, checkpoint_every=10_000)
    assert not list(out.glob("*.tmp")), "resuming removes what the killed writes left"
    reference = tmp_path / "reference"
    train(card, reference, checkpoint_every=10_000)
    _same_weights(out / f"{card.name}.safetensors", reference / f"{card.name}.safetensors")
    assert parse_card(out / f"{card.name}.toml").train.steps == 50 * 8
