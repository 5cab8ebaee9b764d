"""Training faults: NaN, SIGKILL, SIGINT and SIGTERM, vaezoo uninstalled under a run, unusable output folders,
checkpoints that do not fit, a full disk.

Each ends in one line (or, for a signal, the checkpoint of the step it came at and the command that
resumes it), loses no checkpoint already written, leaves no temporary file, and resuming ends with
weights bit-identical to an uninterrupted run.
"""

from __future__ import annotations

import errno
import io
import json
import multiprocessing
import os
import pickle
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from kit import (OpensAFile, assert_one_line_error, child_env, cli, entries, files_under, make_card, refuse_writes,
                 run_python, write_toml)

import vaezoo
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.entry import update_card
from vaezoo.entries.schema import PRECISION_NAMES, Card, SeedRun, SeedSpread
from vaezoo.errors import TrainingError
from vaezoo.store.weights import read_safetensors
from vaezoo.training.train import CHECKPOINT, train

KILLS = 5  # random-time SIGKILLs in the resume test
# A fresh interpreter for each run to kill: a forked child cannot run backward once its parent's autograd engine
# has started its device threads, which an earlier test in this process may have done.
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(autouse=True)
def one_thread():
    """Run torch on one thread, as the runs in child processes do (:func:`_on_one_thread`): their weights are
    compared bit for bit with runs in this process."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _card(**train_changes) -> Card:
    data = make_card("tiny")
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


def test_nan_loss_stops_with_the_last_good_checkpoint(data_plugin, tmp_path):
    card = _card(checkpoint_every=4)
    card = card.model_copy(update={"model": {**card.model, "regularizers": [{"type": "nan_after", "at": 6}]}})
    out = tmp_path / "run"
    with pytest.raises(TrainingError) as err:
        train(card, out)
    message = str(err.value)
    assert "loss became nan at step 6" in message and str(out / CHECKPOINT) in message and "step 4" in message
    assert _step_of(out / CHECKPOINT) == 4
    assert entries(out) == [CHECKPOINT], "a NaN run must write no weights or card"


def test_nan_in_a_chunk_of_a_larger_dataset_names_its_images_among_the_datasets(data_plugin):
    from vaezoo.data import ImageDataset
    from vaezoo.errors import InputError
    from vaezoo.training.loop import Plan, check_before_training

    card = Card.model_validate(make_card("tiny"))
    images = torch.zeros(64, 1, 4, 4)
    images[40, 0, 1, 1] = float("nan")
    with pytest.raises(InputError) as caught:  # the chunk of images 32 to 47 refused before any step
        check_before_training(ImageDataset(images, scale=1.0),
                              [(vaezoo.build_model(card), card, Plan.of(card.train, 64, 1), None)], chunk=16)
    assert str(caught.value).startswith("the dataset's images 32 to 47 (of 64): the model takes ")
    assert str(caught.value).endswith("got NaN or infinite values in 1 of the 16 images; give finite values in [0, 1]")


def test_nan_in_the_data_through_the_command_line(data_plugin, tmp_path, capsys):
    data = make_card("tiny")
    data["train"]["data"]["options"] = {"nan": True}
    card_path = write_toml(tmp_path / "tiny.toml", data)
    out = tmp_path / "run"
    code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, "got NaN or infinite values in 64 of the 64 images")  # the input check of the data
    assert not out.exists()


def _on_one_thread() -> None:
    torch.set_num_threads(1)


def _train_and_die_in_save(card: Card, out, die_at: int) -> None:
    """Train, and on the ``die_at``-th checkpoint write half of it and SIGKILL this process."""
    _on_one_thread()
    real_save, saves = torch.save, 0

    def half_save_then_die(obj, f) -> None:
        nonlocal saves
        saves += 1
        if saves < die_at:
            return real_save(obj, f)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        f.write(buffer.getvalue()[: buffer.tell() // 2])
        f.flush()
        os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)

    torch.save = half_save_then_die
    train(card, out)


@pytest.mark.slow
def test_sigkill_during_a_checkpoint_write(data_plugin, tmp_path):
    card = _card(checkpoint_every=4)
    out = tmp_path / "killed"
    child = SPAWN.Process(target=_train_and_die_in_save, args=(card, out, 2))
    child.start()
    child.join(timeout=300)
    assert child.exitcode == -signal.SIGKILL

    partial = [out / n for n in entries(out) if n != CHECKPOINT]
    assert len(partial) == 1 and partial[0].name.startswith(f".{CHECKPOINT}.") and partial[0].suffix == ".tmp"
    with pytest.raises((RuntimeError, OSError)):  # it really is half a checkpoint (torch's error varies)
        torch.load(partial[0], weights_only=True)
    assert _step_of(out / CHECKPOINT) == 4, "the previous checkpoint must survive the kill"

    train(card, out, resume=True)
    assert entries(out) == [CHECKPOINT, "tiny-blobs-run.safetensors", "tiny-blobs-run.toml"]
    reference = tmp_path / "reference"
    train(card, reference)
    _same_weights(out / "tiny-blobs-run.safetensors", reference / "tiny-blobs-run.safetensors")


def _resume(card: Card, out) -> None:
    _on_one_thread()
    train(card, out, resume=True)


@pytest.mark.slow
def test_resume_after_random_sigkills_is_exact(data_plugin, tmp_path):
    """Kill a run at random moments (a checkpoint every step), resume each time: the weights are unchanged."""
    card = _card(epochs=50, checkpoint_every=1)
    out, checkpoint = tmp_path / "killed", tmp_path / "killed" / CHECKPOINT
    rng = random.Random(0)
    steps = [0]
    for _ in range(KILLS):
        child = SPAWN.Process(target=_resume, args=(card, out))
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
    leftovers = [n for n in entries(out) if n != CHECKPOINT]
    assert all(n.startswith(f".{CHECKPOINT}.") and n.endswith(".tmp") for n in leftovers), leftovers

    train(card, out, resume=True, checkpoint_every=10_000)
    assert not list(out.glob("*.tmp")), "resuming removes what the killed writes left"
    reference = tmp_path / "reference"
    train(card, reference, checkpoint_every=10_000)
    _same_weights(out / "tiny-blobs-run.safetensors", reference / "tiny-blobs-run.safetensors")
    assert parse_card(out / "tiny-blobs-run.toml").train.steps == 50 * 8


# --- stop signals -----------------------------------------------------------------------------------------

def _wait_for_the_loop(child: subprocess.Popen, deadline: float) -> None:
    """Read ``vaezoo train``'s stderr up to the line it prints as its loop starts (from then on a signal stops
    the run at a step)."""
    while time.monotonic() < deadline:
        line = child.stderr.readline()
        if line.startswith(("training ", "resuming at step ")):
            return
        assert line, f"the run ended before its loop started (exit {child.wait()})"
    raise AssertionError("the run did not start its loop in time")


@pytest.mark.slow
def test_sigint_then_sigterm_at_random_steps_checkpoint_that_step_and_the_printed_command_resumes_exactly(
        data_plugin, tmp_path):
    data = make_card("tiny")
    data["train"].update(epochs=100, checkpoint_every=10**6)  # 800 steps; no checkpoint but the signals'
    card_path = write_toml(tmp_path / "tiny.toml", data)
    out = tmp_path / "run"
    env = child_env(tmp_path / "home", site=data_plugin)
    command = [sys.executable, "-m", "vaezoo", "train", str(card_path), "--out", str(out)]
    last = 0
    for signum in (signal.SIGINT, signal.SIGTERM):
        child = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        try:
            _wait_for_the_loop(child, time.monotonic() + 300)
            delay = random.uniform(0.0, 0.25)  # 0 to about 200 steps on a 2-core machine
            time.sleep(delay)
            child.send_signal(signum)
            stdout, stderr = child.communicate(timeout=300)
        finally:
            child.kill()
        assert child.returncode == 128 + signum, stderr
        assert stdout == "" and "Traceback" not in stderr
        stopped = re.search(rf"^stopped by {signum.name} at step (\d+); the checkpoint {out / CHECKPOINT} holds it$",
                            stderr, re.MULTILINE)
        assert stopped, stderr
        step = int(stopped[1])
        assert last <= step < 800, f"signalled {delay:.2f} s into the loop, the run ended first"
        assert _step_of(out / CHECKPOINT) == step
        assert entries(out) == [CHECKPOINT], "no temporary file, no weights"
        resume = stderr.strip().splitlines()[-1]
        assert resume == "resume with: " + shlex.join([*command[:7], "--resume"])
        command, last = shlex.split(resume.removeprefix("resume with: ")), step

    resumed = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming at step {last} of 800" in resumed.stderr
    reference = tmp_path / "reference"
    train(Card.model_validate(data), reference)
    _same_weights(out / "tiny-blobs-run.safetensors", reference / "tiny-blobs-run.safetensors")


@pytest.mark.slow
def test_a_run_goes_on_when_its_log_is_no_longer_read_and_sighup_checkpoints_its_step(data_plugin, tmp_path):
    data = make_card("tiny")
    data["train"].update(epochs=100, checkpoint_every=10**6)  # 800 steps; no checkpoint but the signals'
    card_path = write_toml(tmp_path / "tiny.toml", data)
    env = child_env(tmp_path / "home", site=data_plugin)

    def start(out: Path) -> subprocess.Popen:
        child = subprocess.Popen([sys.executable, "-m", "vaezoo", "train", str(card_path), "--out", str(out)],
                                 env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for_the_loop(child, time.monotonic() + 300)
        return child

    piped = tmp_path / "piped"
    child = start(piped)  # as 'vaezoo train ... 2>&1 | head -3' leaves it: nobody reads its progress any more
    child.stderr.close()
    try:
        assert child.wait(timeout=300) == 0
    finally:
        child.kill()
    assert parse_card(piped / "tiny-blobs-run.toml").train.steps == 800
    assert child.stdout.read() == f"{piped / 'tiny-blobs-run.toml'}\n"

    hung_up = tmp_path / "hung-up"
    child = start(hung_up)  # its terminal closed
    try:
        time.sleep(random.uniform(0.0, 0.25))
        child.send_signal(signal.SIGHUP)
        _, stderr = child.communicate(timeout=300)
    finally:
        child.kill()
    assert child.returncode == 128 + signal.SIGHUP, stderr
    stopped = re.search(rf"^stopped by SIGHUP at step (\d+); the checkpoint {hung_up / CHECKPOINT} holds it$", stderr,
                        re.MULTILINE)
    assert stopped and _step_of(hung_up / CHECKPOINT) == int(stopped[1]), stderr


def _signal_during_save(monkeypatch, at: int, *signals: int) -> None:
    """Make the ``at``-th ``torch.save`` write half its bytes, send this process ``signals``, then finish."""
    real_save, saves = torch.save, 0

    def save(obj, f) -> None:
        nonlocal saves
        saves += 1
        if saves != at:
            return real_save(obj, f)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        f.write(buffer.getvalue()[: buffer.tell() // 2])
        f.flush()
        for signum in signals:
            os.kill(os.getpid(), signum)
        f.write(buffer.getvalue()[buffer.tell() // 2:])

    monkeypatch.setattr(torch, "save", save)


def test_sigterm_while_a_checkpoint_is_written_lets_it_finish_then_stops_at_the_next_step(data_plugin, tmp_path,
                                                                                           capsys, monkeypatch):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    _signal_during_save(monkeypatch, 1, signal.SIGTERM, signal.SIGTERM)  # the checkpoint of step 4
    code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 128 + signal.SIGTERM and stdout == ""
    assert f"stopped by SIGTERM at step 5; the checkpoint {out / CHECKPOINT} holds it" in stderr
    assert _step_of(out / CHECKPOINT) == 5
    assert entries(out) == [CHECKPOINT]


def test_a_second_sigint_stops_at_once_and_the_temporary_file_goes(data_plugin, tmp_path, capsys, monkeypatch):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        _signal_during_save(patch, 2, signal.SIGINT, signal.SIGINT)  # while the checkpoint of step 8 is written
        code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 130 and stdout == "" and "Traceback" not in stderr
    assert f"stopped by SIGINT; the last checkpoint is {out / CHECKPOINT}" in stderr
    assert stderr.strip().splitlines()[-1].endswith(f"train {card_path} --out {out} --resume")
    assert _step_of(out / CHECKPOINT) == 4, "the previous checkpoint stays"
    assert entries(out) == [CHECKPOINT], "the half-written temporary file is removed"

    assert cli(capsys, "train", str(card_path), "--out", str(out), "--resume")[0] == 0
    train(_card(), tmp_path / "reference")
    _same_weights(out / "tiny-blobs-run.safetensors", tmp_path / "reference" / "tiny-blobs-run.safetensors")


def test_sigterm_while_the_weights_are_published_removes_their_temporary_file(data_plugin, tmp_path, capsys,
                                                                              monkeypatch):
    import safetensors.torch

    real_save = safetensors.torch.save

    def save(tensors, metadata=None) -> bytes:
        """The weights' bytes, made while a SIGTERM arrives: their temporary file stands, empty."""
        os.kill(os.getpid(), signal.SIGTERM)
        return real_save(tensors, metadata=metadata)

    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(safetensors.torch, "save", save)
        code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 128 + signal.SIGTERM
    assert f"stopped by SIGTERM; the last checkpoint is {out / CHECKPOINT}" in stderr
    assert entries(out) == [CHECKPOINT] and _step_of(out / CHECKPOINT) == 16
    code, stdout, _ = cli(capsys, "train", str(card_path), "--out", str(out), "--resume")
    assert code == 0 and stdout.strip() == str(out / "tiny-blobs-run.toml")


# --- vaezoo uninstalled or upgraded under a run ----------------------------------------------------------------

UNINSTALLED_AFTER_THE_FIRST_STEP = """
import json, sys
from vaezoo.cli import main
from vaezoo.training.ensemble import Stack
from vaezoo.training.single import SingleRun


class Uninstalled:
    '''Finds no module of vaezoo or of a vaezoo_* plugin, as once pip has removed their files.'''
    refused = []

    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top == "vaezoo" or top.startswith("vaezoo_"):
            self.refused.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def then_uninstall(take_step):
    def step(self, *args, **kwargs):
        taken = take_step(self, *args, **kwargs)
        if not isinstance(sys.meta_path[0], Uninstalled):
            sys.meta_path.insert(0, Uninstalled())
        return taken
    return step


SingleRun.take_step = then_uninstall(SingleRun.take_step)
Stack.take_step = then_uninstall(Stack.take_step)
code = main(sys.argv[1:])
print(json.dumps({"uninstalled": isinstance(sys.meta_path[0], Uninstalled), "refused": Uninstalled.refused}))
sys.exit(code)
"""
"""``vaezoo ARGS`` in a child whose vaezoo (the core and the built-in plugins) is uninstalled once the run has
taken its first step: a module not imported by then cannot be imported; the modules already imported go on."""


@pytest.mark.slow
@pytest.mark.parametrize(("metrics", "seeds"), [
    (["cluster_accuracy"], []), (["cluster_accuracy"], ["--seeds", "0,1"]), ([], []),
], ids=["one-run", "ensemble", "no-metric"])
def test_a_run_publishes_its_card_and_weights_when_vaezoo_is_uninstalled_under_it(data_plugin, tmp_path, metrics,
                                                                                   seeds):
    # a JointVAE: its end measures its metrics and its own [labels] section, with the plugin's modules
    card_path = write_toml(tmp_path / "toy.toml", make_card("toy", eval_metrics=metrics))
    out = tmp_path / "run"
    result = run_python("-c", UNINSTALLED_AFTER_THE_FIRST_STEP, "train", str(card_path), "--out", str(out), *seeds,
                        env=child_env(tmp_path / "home", site=data_plugin))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {"uninstalled": True, "refused": []}
    cards = sorted(out.rglob("toyvae-bars-run.toml"))
    assert len(cards) == max(1, len(seeds))
    for path in cards:
        card = parse_card(path)
        assert card.train.steps == 12 and set(metrics) <= set(card.metrics) and "labels" in card.sections
        model = vaezoo.load(path.parent)  # the weights beside the card, of the size and sha256 it states
        assert model.card.name == "toyvae-bars-run"


# --- output paths, checked before the first step ------------------------------------------------------------

@pytest.fixture
def no_data_before_checks(monkeypatch):
    """Fail the test if the run loads its data: the output checks must come first."""
    def load_dataset(*args, **kwargs):
        raise AssertionError("the data was loaded before the output folder was checked")

    monkeypatch.setattr("vaezoo.training.train.load_dataset", load_dataset)


def _finished_run(tmp: Path) -> None:
    folder = tmp / "finished"
    folder.mkdir()
    (folder / "old-run.toml").write_text("name = 'old-run'\n")
    (folder / "old-run.safetensors").write_bytes(b"weights")


@pytest.mark.parametrize(("make", "out", "fragments"), [
    (lambda t: (t / "file").write_text("x"), "file/run", ["is a file, not a folder"]),
    (lambda t: (t / "file").write_text("x"), "file", ["--out", "is a file, not a folder"]),
    (_finished_run, "finished", ["already holds old-run.toml, the files of a finished run", "choose another --out"]),
    (lambda t: (t / "run").mkdir() or (t / "run" / "tiny-blobs-run.safetensors").write_bytes(b"w"), "run",
     ["already holds tiny-blobs-run.safetensors"]),
], ids=["through-a-file", "a-file", "a-finished-run", "this-runs-weights"])
def test_an_unusable_out_is_one_line_before_the_first_step(data_plugin, tmp_path, capsys, no_data_before_checks,
                                                            make, out, fragments):
    make(tmp_path)
    before = files_under(tmp_path)
    card_path = write_toml(tmp_path / "cards" / "tiny.toml", make_card("tiny"))
    code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(tmp_path / out))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, *fragments)
    assert files_under(tmp_path) == sorted([*before, "cards/tiny.toml"]), "nothing written, nothing removed"


@pytest.mark.parametrize("error", [errno.EACCES, errno.EROFS], ids=["EACCES", "EROFS"])
def test_an_out_vaezoo_cannot_write_in_is_one_line_before_the_first_step(data_plugin, tmp_path, capsys, monkeypatch,
                                                                        no_data_before_checks, error):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    (tmp_path / "locked").mkdir()
    refuse_writes(monkeypatch, tmp_path / "locked", error)
    for out in (tmp_path / "locked", tmp_path / "locked" / "new"):
        code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
        assert code == 1
        assert_one_line_error(stderr, f"cannot write in --out {out}: {os.strerror(error)}; choose another --out")
    assert not any((tmp_path / "locked").iterdir())


def test_resume_into_a_folder_holding_another_runs_card_is_refused(data_plugin, tmp_path, capsys,
                                                                  no_data_before_checks):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "other.toml").write_text("name = 'other'\n")
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(tmp_path / "run"), "--resume")
    assert code == 1
    assert_one_line_error(stderr, "holds the card other.toml, not this run's tiny-blobs-run.toml",
                          "resume with the --name the run was started with")


def test_resume_of_a_run_an_earlier_vaezoo_named_after_its_card_names_the_name_to_resume_with(
        data_plugin, tmp_path, capsys):
    # vaezoo before --name wrote a run as CARD.toml beside a checkpoint of model, optimizer, rng_cpu and step; its
    # resume with more epochs was told to give "the --name the run was started with", which that user never gave
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    train(_card(), out, name="tiny-blobs", evaluate=False)
    state = torch.load(out / CHECKPOINT, weights_only=True)
    torch.save({key: state[key] for key in ("model", "optimizer", "rng_cpu", "step")}, out / CHECKPOINT)
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume", "--epochs", "3")
    assert code == 1
    assert_one_line_error(stderr, "holds the card tiny-blobs.toml, not this run's tiny-blobs-run.toml",
                          "resume with --name tiny-blobs, the run's name, or choose another --out")
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume", "--epochs", "3",
                          "--name", "tiny-blobs", "--no-eval")
    assert code == 0, stderr
    assert parse_card(out / "tiny-blobs.toml").train.epochs == 3


# --- checkpoints that do not fit ------------------------------------------------------------------------------

@pytest.fixture
def stopped_run(data_plugin, tmp_path):
    """A run of the tiny card stopped at step 5 (2 epochs of 8 steps): its card file and its folder."""
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    train(_card(), out, max_steps=5)
    return card_path, out


def test_resume_refuses_a_checkpoint_a_newer_vaezoo_wrote_with_what_it_holds_more_saying_to_upgrade(stopped_run,
                                                                                                    capsys):
    # a checkpoint holding state this vaezoo does not know (a newer one's scheduler, say) resumed without it, and
    # its next checkpoint dropped it: a resumed run unlike the uninterrupted one, and no word of it
    card_path, out = stopped_run
    state = torch.load(out / CHECKPOINT, weights_only=True)
    assert state["vaezoo_version"] == vaezoo.__version__
    torch.save({**state, "scheduler": {"last_epoch": 5}, "vaezoo_version": "9.0.0"}, out / CHECKPOINT)
    before = (out / CHECKPOINT).read_bytes()
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume")
    assert code == 1
    assert_one_line_error(stderr, f"checkpoint {out / CHECKPOINT} holds 'scheduler', which this vaezoo "
                                  f"{vaezoo.__version__} does not know: vaezoo 9.0.0 wrote it; upgrade vaezoo to "
                                  f"read it")
    assert (out / CHECKPOINT).read_bytes() == before


@pytest.mark.parametrize("version", [vaezoo.__version__, None])
def test_resume_refuses_a_checkpoint_holding_what_no_vaezoo_up_to_this_one_writes_without_saying_to_upgrade(
        stopped_run, capsys, version):
    # a key this vaezoo does not know is a newer vaezoo's only where the checkpoint records a newer one: 'vaezoo
    # 0.1.0 wrote it; upgrade vaezoo' was said to vaezoo 0.1.0 itself, and 'a newer vaezoo' of no version at all
    card_path, out = stopped_run
    state = torch.load(out / CHECKPOINT, weights_only=True)
    del state["vaezoo_version"]
    torch.save({**state, "scheduler": {"last_epoch": 5}, **({} if version is None else {"vaezoo_version": version})},
               out / CHECKPOINT)
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume")
    assert code == 1
    line = assert_one_line_error(stderr, f"{out / CHECKPOINT} is not a checkpoint written by 'vaezoo train' (it holds "
                                         f"'scheduler', which vaezoo {vaezoo.__version__} and earlier never write)")
    assert "upgrade" not in line


@pytest.mark.parametrize(("change", "fragments"), [
    (lambda c: c["model"]["encoder"].update(hidden=[16]),
     ["was made from card 'tiny-blobs' with another recipe than card 'other'",
      "model.encoder.hidden [8] in the checkpoint, [16] in card 'other'"]),
    (lambda c: c["train"]["optimizer"].update(name="SGD"),
     ["train.optimizer.name \"Adam\" in the checkpoint, \"SGD\" in card 'other'"]),
    (lambda c: c["train"]["data"].update(options={"nan": True}),
     ["train.data.options.nan absent in the checkpoint, true in card 'other'"]),
], ids=["model", "optimizer", "data"])
def test_resume_refuses_a_checkpoint_of_another_recipe_naming_both_cards(stopped_run, capsys, change, fragments):
    card_path, out = stopped_run
    before = (out / CHECKPOINT).read_bytes()
    other = make_card("tiny")
    other["name"] = "other"
    change(other)
    other_path = write_toml(card_path.parent / "other.toml", other)
    code, _, stderr = cli(capsys, "train", str(other_path), "--out", str(out), "--resume")
    assert code == 1
    line = assert_one_line_error(stderr, *fragments)
    assert "resume with the card that started the run, or choose another --out" in line
    assert (out / CHECKPOINT).read_bytes() == before


@pytest.mark.parametrize("started_with", [["--seed", "5"], ["--precision", "bf16-mixed"],
                                          ["--seed", "5", "--precision", "bf16-mixed"], ["--precision", "bf16"]])
def test_a_resume_without_the_seed_or_precision_the_run_was_started_with_names_them(data_plugin, tmp_path, capsys,
                                                                                    started_with):
    # the precision by its current name: a run started with bf16-mixed was told to resume with its old name, bf16
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--max-steps", "2", *started_with)[0] == 0
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume")
    named = [PRECISION_NAMES.get(word, word) for word in started_with]
    given = " and ".join(f"{flag} {value}" for flag, value in zip(named[::2], named[1::2]))
    assert code == 1
    assert_one_line_error(stderr, f"checkpoint {out / CHECKPOINT} was made with {given}, where this run asks for ",
                          f"; resume with {given}")
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--resume", *started_with)[0] == 0


def test_resume_may_change_epochs_and_checkpoint_every_and_extends_a_finished_run_exactly(data_plugin, tmp_path,
                                                                                          capsys):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--checkpoint-every", "3")[0] == 0
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume", "--epochs", "3")
    assert code == 0 and "resuming at step 16 of 24" in stderr
    assert parse_card(out / "tiny-blobs-run.toml").train.steps == 24
    reference = tmp_path / "reference"
    train(_card(epochs=3), reference)
    _same_weights(out / "tiny-blobs-run.safetensors", reference / "tiny-blobs-run.safetensors")


def test_extending_a_finished_run_names_what_its_card_held_by_hand_that_the_new_card_drops(data_plugin, tmp_path,
                                                                                           capsys):
    # the card was published anew from the training card without a word: a headline, a note, a metric measured
    # elsewhere and a spread over seeds were gone
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny", eval_metrics=["elbo"]))
    out = tmp_path / "run"
    assert cli(capsys, "train", str(card_path), "--out", str(out))[0] == 0
    elbo = parse_card(out / "tiny-blobs-run.toml").metrics["elbo"]
    spread = SeedSpread(runs=[SeedRun(seed=0, value=elbo.value)], n=1, median=elbo.value, min=elbo.value,
                        max=elbo.value, shipped=0, selection="the only seed", command="vaezoo seeds")
    update_card(out / "tiny-blobs-run.toml", lambda card: card.model_copy(update={"headline": "elbo", "metrics": {
        **card.metrics, "elbo": elbo.model_copy(update={"note": "by hand", "seeds": spread}),
        "mine": elbo.model_copy(update={"value": 1.5})}}))
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume", "--epochs", "3")
    assert code == 0 and "Traceback" not in stderr
    assert (f"warning: {out / 'tiny-blobs-run.toml'} was written anew for the run's new weights, from its training "
            "card: it no longer holds its headline, the note of metric 'elbo', the spread over seeds of metric 'elbo', "
            "metric 'mine', which it held before this resume; copy back by hand what still holds") in stderr
    assert parse_card(out / "tiny-blobs-run.toml").train.steps == 24
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume", "--epochs", "4")
    assert code == 0 and "no longer holds" not in stderr  # a card with nothing of its own: nothing to name


def _edit(edit):
    def apply(state: dict, path: Path) -> None:
        edit(state)
        torch.save(state, path)
    return apply


def _replace(value):
    def apply(state: dict, path: Path) -> None:
        torch.save(value, path)
    return apply


def _write(data: bytes):
    def apply(state: dict, path: Path) -> None:
        path.write_bytes(data)
    return apply


class NotATensor:
    """Pickled into a file, it is something ``weights_only`` loading refuses."""


MALFORMED = {
    "empty-file": (_write(b""), "it is an empty file"),
    "not-torch": (_write(b"PK\x03\x04 not a zip"), "cannot read checkpoint"),
    "text": (_write(b"abcd"), "it is not a file torch.save wrote, or it is damaged"),
    "a-python-object": (_replace({"step": NotATensor()}), "vaezoo never unpickles other Python objects"),
    "a-list": (_replace([1, 2]), "it holds a list, not a dict"),
    "no-step": (_edit(lambda s: s.pop("step")), "it holds no 'step'"),
    "no-model": (_edit(lambda s: s.pop("model")), "it holds no 'model'"),
    "step-negative": (_edit(lambda s: s.update(step=-1)), "its step -1 is not a whole number of at least 0"),
    "step-text": (_edit(lambda s: s.update(step="5")), "its step '5' is not a whole number of at least 0"),
    "step-bool": (_edit(lambda s: s.update(step=True)), "its step True is not a whole number"),
    "step-past-the-end": (_edit(lambda s: s.update(step=100)),
                          "is at step 100, past this run's last step 16 (2 epochs of 8 steps); pass --epochs 13"),
    "model-a-tensor": (_edit(lambda s: s.update(model=torch.zeros(3))), "its 'model' is not a state dict of tensors"),
    "model-missing-key": (_edit(lambda s: s["model"].pop(next(iter(s["model"])))), "does not fit the model"),
    "model-nan": (_edit(lambda s: next(iter(s["model"].values())).fill_(float("nan"))), "NaN"),
    "optimizer-not-a-state": (_edit(lambda s: s.update(optimizer={"lr": 1})),
                              "its 'optimizer' is not an optimiser's state dict"),
    "optimizer-other-groups": (_edit(lambda s: s["optimizer"]["param_groups"].append(
        dict(s["optimizer"]["param_groups"][0]))), "does not fit this card's Adam optimiser"),
    "no-rng": (_edit(lambda s: s.pop("rng_cpu")), "it holds no RNG state"),
    "rng-random-bytes": (_edit(lambda s: s.update(rng_cpu=torch.randint(0, 256, (5056,), dtype=torch.uint8))),
                         "its RNG state rng_cpu is not one torch can restore"),
    "rng-short": (_edit(lambda s: s.update(rng_cpu=torch.zeros(10, dtype=torch.uint8))),
                  "its RNG state rng_cpu is not one torch can restore"),
    "rng-float": (_edit(lambda s: s.update(rng_cpu=torch.zeros(5056))), "must be a torch.ByteTensor"),
    "rng-ranks-not-a-list": (_edit(lambda s: s.update(rng_ranks=3)), "'rng_ranks' is not a list"),
    "recipe-tampered": (_edit(lambda s: s.update(recipe=s["recipe"].replace('"lr":0.01', '"lr":0.1'))),
                        "its card name, recipe and fingerprint do not agree"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_checkpoint_is_one_line_and_stays_as_it_was(stopped_run, capsys, case):
    card_path, out = stopped_run
    damage, fragment = MALFORMED[case]
    checkpoint = out / CHECKPOINT
    damage(torch.load(checkpoint, weights_only=True), checkpoint)
    before = checkpoint.read_bytes()
    code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume")
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, str(checkpoint), fragment)
    assert checkpoint.read_bytes() == before


def test_a_checkpoint_that_is_a_pipe_is_refused_without_reading_it(stopped_run, capsys):
    card_path, out = stopped_run
    pipe = out.parent / "pipe.pt"
    os.mkfifo(pipe)  # reading it would wait for a writer forever
    code, stdout, stderr = cli(capsys, "eval", str(card_path), "--checkpoint", str(pipe))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, f"checkpoint {pipe} is not a regular file (a pipe or a device)")


def test_a_checkpoint_that_is_a_link_loop_is_named_as_one_not_as_missing(tmp_path, capsys):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    code, stdout, stderr = cli(capsys, "eval", str(card_path), "--checkpoint", str(tmp_path / "a"))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, f"cannot read checkpoint {tmp_path / 'a'}: Too many levels of symbolic links; ")


def test_a_foreign_pickle_as_checkpoint_is_one_line_without_torchs_warnings(data_plugin, tmp_path, capsys, recwarn):
    """torch warns of the pickle protocol (4) of a file it then refuses; vaezoo's one line is all the user sees."""
    marker, path = tmp_path / "unpickled", tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(OpensAFile(marker), protocol=4))
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, stdout, stderr = cli(capsys, "eval", str(card_path), "--checkpoint", str(path))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, f"cannot read checkpoint {path}: it is not a file")
    assert [str(w.message) for w in recwarn] == []
    assert not marker.exists()


# --- a full disk --------------------------------------------------------------------------------------------

def test_a_full_disk_while_a_checkpoint_is_written_is_one_line_and_keeps_the_previous_one(data_plugin, tmp_path,
                                                                                          capsys, monkeypatch):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    real_save, saves = torch.save, 0

    def save_on_a_full_disk(obj, f) -> None:
        """The second checkpoint (step 8) fills the disk halfway through, as a file system would report it."""
        nonlocal saves
        saves += 1
        if saves < 2:
            return real_save(obj, f)
        buffer = io.BytesIO()
        real_save(obj, buffer)
        f.write(buffer.getvalue()[: buffer.tell() // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(torch, "save", save_on_a_full_disk)
        code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, f"cannot write {out / CHECKPOINT}: No space left on device",
                          f"make room, then continue with --resume (the last good checkpoint is {out / CHECKPOINT} "
                          f"(step 4))")
    assert entries(out) == [CHECKPOINT], "no temporary file is left"
    assert _step_of(out / CHECKPOINT) == 4

    assert cli(capsys, "train", str(card_path), "--out", str(out), "--resume")[0] == 0
    train(_card(), tmp_path / "reference")
    _same_weights(out / "tiny-blobs-run.safetensors", tmp_path / "reference" / "tiny-blobs-run.safetensors")


def test_a_full_disk_while_the_weights_are_published_says_to_make_room_and_resume(data_plugin, tmp_path, capsys,
                                                                                    monkeypatch):
    import vaezoo.entries.entry as entry_module

    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"

    def full_disk_writer(*_):
        def write(tmp: Path) -> None:
            tmp.write_bytes(b"\0" * 100)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write

    with monkeypatch.context() as patch:
        patch.setattr(entry_module, "safetensors_writer", full_disk_writer)
        code, stdout, stderr = cli(capsys, "train", str(card_path), "--out", str(out))
    assert code == 1 and stdout == ""
    assert_one_line_error(stderr, f"cannot write {out / 'tiny-blobs-run.safetensors'}: No space left on device; "
                                  f"make room, then continue with --resume")
    assert entries(out) == [CHECKPOINT], "no temporary file is left, and the checkpoint is kept"
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--resume")[0] == 0
    train(_card(), tmp_path / "reference")
    _same_weights(out / "tiny-blobs-run.safetensors", tmp_path / "reference" / "tiny-blobs-run.safetensors")


UNDER_A_FILE_SIZE_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
{body}
"""
"""A child process under a file size limit (RLIMIT_FSIZE, as ``ulimit -f``): a write past 4 kB fails with EFBIG
inside whatever writer makes it (Python ignores the SIGXFSZ that comes with it). A child, since a limit on this
process would fail the test runner's own output to a log file."""


def test_a_file_size_limit_met_inside_torch_s_checkpoint_writer_is_one_line(data_plugin, tmp_path):
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))  # the card fits, the checkpoint does not
    out = tmp_path / "run"
    body = "from vaezoo.cli import main\nsys.exit(main(sys.argv[1:]))"
    result = run_python("-c", UNDER_A_FILE_SIZE_LIMIT.format(body=body), "train", str(card_path), "--out", str(out),
                        env=child_env(tmp_path / "home", site=data_plugin))
    assert result.returncode == 1
    assert_one_line_error(result.stderr, f"cannot write {out / CHECKPOINT}: File too large")
    assert not list(out.glob(".*.tmp")), "no temporary file is left"


def test_a_file_size_limit_met_writing_weights_is_an_output_error(tmp_path):
    target = tmp_path / "w.safetensors"
    body = ("import torch\nfrom vaezoo.errors import OutputError\nfrom vaezoo.store.files import atomic_save\n"
            "from vaezoo.store.weights import safetensors_writer\n"
            "try:\n    atomic_save(sys.argv[1], safetensors_writer({'w': torch.zeros(4096)}))\n"
            "except OutputError as exc:\n    print(exc)")
    result = run_python("-c", UNDER_A_FILE_SIZE_LIMIT.format(body=body), str(target),
                        env=child_env(tmp_path / "home"))
    assert result.stdout.startswith(f"cannot write {target}: File too large"), result.stdout + result.stderr
    assert not target.exists() and not list(tmp_path.glob(".*.tmp"))


# --- eval --checkpoint ------------------------------------------------------------------------------------------

def test_eval_checkpoint_says_what_is_wrong_with_a_missing_or_foreign_file(stopped_run, capsys):
    card_path, out = stopped_run
    assert cli(capsys, "eval", str(card_path), "--checkpoint", str(out / CHECKPOINT))[0] == 0

    code, _, stderr = cli(capsys, "eval", str(card_path), "--checkpoint", str(out / "missing.pt"))
    assert code == 1
    assert_one_line_error(stderr, f"checkpoint {out / 'missing.pt'} does not exist",
                          "pass OUT/checkpoint.pt of a 'vaezoo train' run")

    (out / "notes.pt").write_text("not a checkpoint")
    code, _, stderr = cli(capsys, "eval", str(card_path), "--checkpoint", str(out / "notes.pt"))
    assert code == 1
    assert_one_line_error(stderr, f"cannot read checkpoint {out / 'notes.pt'}")

    other = make_card("tiny")
    other["name"] = "wide"
    other["model"]["encoder"]["hidden"] = [16]
    other_path = write_toml(card_path.parent / "wide.toml", other)
    code, _, stderr = cli(capsys, "eval", str(other_path), "--checkpoint", str(out / CHECKPOINT))
    assert code == 1
    assert_one_line_error(stderr, "was made from card 'tiny-blobs', whose model is not that of card 'wide'",
                          "model.encoder.hidden [8] in the checkpoint, [16] in card 'wide'",
                          "give the card the run was started from")


@pytest.mark.parametrize("resumed_with, made, asked", [
    (["--precision", "bf16-mixed"], "--precision tf32-conv", "precision bf16-mixed"),
    (["--seed", "5", "--precision", "fp32"], "--seed 0 and --precision tf32-conv", "seed 5 and precision fp32"),
])
def test_a_resume_with_a_precision_the_run_was_started_without_says_what_it_was_made_with(data_plugin, tmp_path, capsys,
                                                                                          resumed_with, made, asked):
    # it said to resume with the card that started the run, which the user had given, and named bf16-mixed "bf16";
    # then 'was made without --precision: train.precision absent in the checkpoint, "fp32" in card', the flag's value
    # blamed on the card
    card_path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "run"
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--max-steps", "2")[0] == 0
    code, _, stderr = cli(capsys, "train", str(card_path), "--out", str(out), "--resume", *resumed_with)
    assert code == 1
    assert assert_one_line_error(stderr) == (f"error: checkpoint {out / CHECKPOINT} was made with {made}, where this "
                                             f"run asks for {asked}; resume with {made}")
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--resume", "--max-steps", "3",
               *made.replace(" and ", " ").split())[0] == 0
    assert cli(capsys, "train", str(card_path), "--out", str(out), "--resume")[0] == 0
