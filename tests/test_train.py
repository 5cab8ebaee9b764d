"""The training engine on a tiny synthetic dataset: reproducibility, exact resume, faults, progress, outputs."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal

import numpy as np
import pytest
import torch
from kit import entries, make_card, write_toml
from rich.console import Console
from rich.text import Text
from safetensors import safe_open

import vaezoo
from vaezoo.cli import main
from vaezoo.data import ImageDataset
from vaezoo.entries.catalog import get_card, parse_card, scan
from vaezoo.entries.recipe import RECORDS, canonical, recipe
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, TrainingError
from vaezoo.model import VAE
from vaezoo.store.checksums import sha256_of
from vaezoo.training.progress import Reporter
from vaezoo.training.train import CHECKPOINT, Interrupted, run_recipe, train


def card(**train) -> Card:
    return Card.model_validate(make_card("toy", train=train))


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        assert torch.equal(value, b[key]), key


def checkpoint_step(out) -> int:
    return torch.load(out / CHECKPOINT, weights_only=True)["step"]


class Interrupt(KeyboardInterrupt):
    """Stands for a kill: raised from inside the training loop."""


def interrupt_at_batch(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Make the ``n``-th training batch (counting from 1) raise :class:`Interrupt`."""
    batch, calls = ImageDataset.batch, []

    def counting(self, index, *args, **kwargs):
        calls.append(index)
        if len(calls) == n:
            raise Interrupt
        return batch(self, index, *args, **kwargs)

    monkeypatch.setattr(ImageDataset, "batch", counting)


@pytest.mark.parametrize(("option", "value", "wanted"), [
    ("resume", "no", "true or false (bool)"), ("evaluate", "no", "true or false (bool)"),
    ("compile", "yes", "true or false (bool) or None"), ("max_steps", "5", "a whole number (int) or None"),
    ("max_steps", 2.5, "a whole number (int) or None"), ("max_steps", True, "a whole number (int) or None"),
    ("epochs", "3", "a whole number (int) or None"), ("epochs", np.True_, "a whole number (int) or None"),
    ("epochs", np.float64(2.0), "a whole number (int) or None"),
    ("max_steps", torch.tensor(True), "a whole number (int) or None"),
    ("name", 5, "a string (str) or None"),
    ("data_root", 5, "a string (str) or a path (os.PathLike) or None")])
def test_an_option_of_the_wrong_type_is_named_before_anything_is_written(tmp_path, option, value, wanted):
    """resume="no" resumed, epochs="3" trained three epochs, name=5 failed inside re."""
    from vaezoo.training.train import train_seeds

    card = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    with pytest.raises(TypeError) as caught:
        train(card, tmp_path / "out", **{option: value})
    assert str(caught.value) == f"train: {option} = {value!r} is not {wanted}"
    with pytest.raises(TypeError, match=re.escape(f"train: {option} = {value!r} is not {wanted}")):
        train_seeds(card, tmp_path / "out", [0, 1], **{option: value})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("seeds", "sweeps", "message"), [
    (3, (), "seeds takes a list of seeds, e.g. [0, 1], got 3"), ("0,1", (), "seeds takes a list of seeds"),
    ([0], "beta=1,2", "sweeps takes a list of sweeps, e.g. [parse_sweep('beta=1,4')]")])
def test_seeds_and_sweeps_of_the_wrong_type_are_named(tmp_path, seeds, sweeps, message):
    from vaezoo.training.train import train_seeds

    with pytest.raises(TypeError) as caught:
        train_seeds(write_toml(tmp_path / "tiny.toml", make_card("tiny")), tmp_path / "out", seeds, sweeps,
                    compile=False)
    assert str(caught.value).startswith(message) and not (tmp_path / "out").exists()


def test_numpy_integers_are_taken_as_the_whole_numbers_they_are_and_written_as_plain_ints(data_plugin, tmp_path):
    """np.int64(2) epochs were refused as no whole number, where a Python int and vaezoo.context.whole_number
    take it; the card and the checkpoint's recipe written from it hold a plain int."""
    from vaezoo.training.train import run_recipe

    given = {"epochs": np.int64(1), "checkpoint_every": np.int32(2), "evaluate": False}
    result = train(card(), tmp_path / "one", seed=np.int64(3), max_steps=np.uint8(2), **given)
    written = parse_card(result.card_path)
    assert (result.step, written.train.epochs, written.train.seed, written.train.checkpoint_every) == (2, 1, 3, 2)
    state = torch.load(tmp_path / "one" / CHECKPOINT, weights_only=True)
    assert json.loads(state["recipe"])["train"]["seed"] == 3  # default=str wrote a numpy integer as "3"
    [member] = run_recipe(card(), tmp_path / "many", seeds=[np.int64(4)], max_steps=np.int64(1), **given)
    assert member.folder.name == "seed-4" and parse_card(member.card_path).train.seed == 4


def test_numpy_and_torch_values_of_a_sweep_and_of_train_s_flags_are_taken_as_python_s():
    """A swept beta of np.float32(2.0) reached the card (which TOML cannot hold) and the recipe's JSON as "2.0", a
    torch one named its folder beta=tensor(2.); resume=np.False_ was refused as no bool."""
    from vaezoo.training.sweeps import Sweep, members
    from vaezoo.training.train import TrainOptions

    swept = members(card(), [0], [Sweep("batch_size", (np.int64(16), torch.tensor(8)))])
    assert [(str(m.folder), type(m.card.train.batch_size)) for m in swept] == [("batch_size=16/seed-0", int),
                                                                            ("batch_size=8/seed-0", int)]
    [member] = members(card(), [0], [Sweep("lr", (np.float32(0.5),))])
    assert str(member.folder) == "lr=0.5/seed-0" and type(member.card.train.optimizer.lr) is float
    options = TrainOptions(resume=np.False_, evaluate=np.True_, compile=torch.tensor(False))
    assert (options.resume, options.evaluate, options.compile) == (False, True, False)
    assert all(type(v) is bool for v in (options.resume, options.evaluate, options.compile))


def test_a_fixed_seed_gives_identical_weights(data_plugin, tmp_path):
    first = train(card(), tmp_path / "a", max_steps=5).model.state_dict()
    second = train(card(), tmp_path / "b", max_steps=5).model.state_dict()
    other = train(card(seed=1), tmp_path / "c", max_steps=5).model.state_dict()
    assert_same_weights(first, second)
    assert not all(torch.equal(first[k], other[k]) for k in first)


@pytest.mark.parametrize("mode", [torch.no_grad, lambda: torch.set_grad_enabled(False), torch.inference_mode],
                         ids=["no_grad", "set_grad_enabled", "inference_mode"])
def test_a_caller_without_gradients_trains_as_any_other_and_keeps_its_mode(data_plugin, tmp_path, mode):
    from vaezoo.training.train import train_seeds

    alone = train(card(), tmp_path / "a", max_steps=3).model.state_dict()
    together = train_seeds(card(), tmp_path / "b", [0, 1], max_steps=3)[0].model.state_dict()
    with mode():
        assert_same_weights(alone, train(card(), tmp_path / "c", max_steps=3).model.state_dict())
        assert_same_weights(together, train_seeds(card(), tmp_path / "d", [0, 1], max_steps=3)[0].model.state_dict())
        assert not torch.is_grad_enabled()


def test_training_leaves_the_callers_random_stream_as_it_found_it(data_plugin, tmp_path):
    from vaezoo.assemble import build_model, load_dataset
    from vaezoo.training.train import fit, train_seeds

    toy = card()
    model, images = build_model(toy), load_dataset(toy.train.data.name, split="train")
    runs = {"train": lambda: train(toy, tmp_path / "a", max_steps=3),
            "train_seeds": lambda: train_seeds(toy, tmp_path / "b", [0, 1], max_steps=3),
            "fit": lambda: fit(model, images, toy, tmp_path / "c", max_steps=3)}
    for name, run in runs.items():
        torch.manual_seed(123)
        expected = torch.rand(4)
        torch.manual_seed(123)
        run()
        assert torch.equal(torch.rand(4), expected), name

    torch.manual_seed(123)
    with pytest.MonkeyPatch.context() as patch, pytest.raises(Interrupt):
        interrupt_at_batch(patch, 2)
        train(toy, tmp_path / "d")
    assert torch.equal(torch.rand(4), expected)


def test_a_caller_s_float64_default_trains_the_recipe_in_float32_and_stays_the_default(data_plugin, tmp_path):
    from vaezoo.training.train import train_seeds

    alone = train(card(), tmp_path / "a", max_steps=3)
    together = train_seeds(card(), tmp_path / "b", [0, 1], max_steps=3)[0]
    torch.set_default_dtype(torch.float64)
    try:
        wide_alone = train(card(), tmp_path / "c", max_steps=3)
        wide_together = train_seeds(card(), tmp_path / "d", [0, 1], max_steps=3)[0]
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
    assert_same_weights(alone.model.state_dict(), wide_alone.model.state_dict())
    assert_same_weights(together.model.state_dict(), wide_together.model.state_dict())
    with safe_open(next((tmp_path / "c").glob("*.safetensors")), "pt") as weights:
        assert {weights.get_tensor(k).dtype for k in weights.keys()} == {torch.float32}


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGINT], ids=["SIGHUP under nohup", "SIGINT of a job"])
def test_a_stop_signal_the_process_ignores_stays_ignored_and_the_run_goes_on(data_plugin, tmp_path, monkeypatch,
                                                                               signum):
    batch, calls = ImageDataset.batch, []

    def signalled(self, index, *args, **kwargs):
        calls.append(index)
        if len(calls) == 2:
            os.kill(os.getpid(), signum)
        return batch(self, index, *args, **kwargs)

    monkeypatch.setattr(ImageDataset, "batch", signalled)
    before = signal.signal(signum, signal.SIG_IGN)
    try:
        assert train(card(), tmp_path / "a", max_steps=5).step == 5
        assert signal.getsignal(signum) is signal.SIG_IGN
    except Interrupted as stop:  # a KeyboardInterrupt, which would end the whole test session
        pytest.fail(f"the ignored {stop} stopped the run")
    finally:
        signal.signal(signum, before)


def test_a_run_interrupted_in_python_says_where_it_stopped_and_what_holds_it(data_plugin, tmp_path, monkeypatch):
    """train() stopped by Ctrl-C in a notebook's cell ended it with 'Interrupted: SIGINT', where the command line says
    the step reached and the checkpoint holding it."""
    batch, steps = ImageDataset.batch, []

    def signalled(self, index, *args, **kwargs):
        if not isinstance(index, slice):  # a step's batch, not the data check's
            steps.append(index)
            if len(steps) == 3:
                os.kill(os.getpid(), signal.SIGINT)
        return batch(self, index, *args, **kwargs)

    monkeypatch.setattr(ImageDataset, "batch", signalled)
    out = tmp_path / "run"
    with pytest.raises(Interrupted) as stopped:
        train(card(), out)
    assert stopped.value.step == checkpoint_step(out)
    assert str(stopped.value) == (f"stopped by SIGINT at step {checkpoint_step(out)}; the checkpoint {out / CHECKPOINT}"
                                  f" holds it; train again with resume=True to continue")


def test_resume_after_an_interruption_matches_an_uninterrupted_run(data_plugin, tmp_path):
    uninterrupted = train(card(), tmp_path / "whole", max_steps=10).model.state_dict()

    out = tmp_path / "broken"
    with pytest.MonkeyPatch.context() as patch, pytest.raises(Interrupt):
        interrupt_at_batch(patch, 8)  # dies during step 7; the last checkpoint is at step 4
        train(card(), out)
    assert 7 - checkpoint_step(out) <= make_card("toy")["train"]["checkpoint_every"]

    resumed = train(card(), out, resume=True, max_steps=10)
    assert resumed.step == 10 and checkpoint_step(out) == 10
    assert_same_weights(uninterrupted, resumed.model.state_dict())


@pytest.mark.parametrize("seeds", [None, [0, 1]])
def test_a_resume_reads_each_checkpoint_once(data_plugin, tmp_path, monkeypatch, seeds):
    """The check that the dataset is read as the checkpoint's run read it, then the resume, each read the checkpoint:
    a large model's was unpickled twice."""
    from vaezoo.training.train import train_seeds

    def run(**options):
        return train(card(), tmp_path, **options) if seeds is None else train_seeds(card(), tmp_path, seeds, **options)

    run(max_steps=2, evaluate=False)
    load, read = torch.load, []

    def counting(f, *args, **kwargs):
        read.append(os.fspath(f))
        return load(f, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counting)
    run(resume=True, max_steps=3, evaluate=False)
    checkpoints = sorted(os.fspath(p) for p in tmp_path.rglob(CHECKPOINT))
    assert len(checkpoints) == len(seeds or [0]) and sorted(read) == checkpoints


def test_resuming_a_finished_run_keeps_its_card_and_what_was_recorded_on_it_since(data_plugin, tmp_path, capsys):
    tiny = Card.model_validate(make_card("tiny", train={"epochs": 1}))
    finished = train(tiny, tmp_path)
    assert main(["eval", str(tmp_path), "--metrics", "elbo", "--write"]) == 0
    recorded = finished.card_path.read_bytes()
    assert "elbo" in parse_card(finished.card_path).metrics
    capsys.readouterr()

    again = train(tiny, tmp_path, resume=True)
    assert again.card_path == finished.card_path and finished.card_path.read_bytes() == recorded
    assert f"the run had finished at step {finished.step}; its card {finished.card_path} is kept" in \
        capsys.readouterr().err


@pytest.mark.parametrize("stop", [3, 2])
def test_resuming_a_stopped_run_with_no_step_to_make_keeps_its_card_and_what_was_recorded_on_it(
        data_plugin, tmp_path, capsys, stop):
    """Resumed with --max-steps at or below the step it stopped at, a run rewrote its card: metrics that
    'vaezoo eval --write' had recorded on it were lost."""
    tiny = Card.model_validate(make_card("tiny", train={"epochs": 1}))
    stopped = train(tiny, tmp_path, max_steps=3)
    assert main(["eval", str(tmp_path), "--metrics", "elbo", "--write"]) == 0
    recorded = stopped.card_path.read_bytes()
    capsys.readouterr()

    again = train(tiny, tmp_path, resume=True, max_steps=stop)
    assert again.step == 3 and again.card_path == stopped.card_path and stopped.card_path.read_bytes() == recorded
    err = capsys.readouterr().err
    assert f"stopping at step {stop}: at step 3 already, it has no step to make" in err
    assert f"the run was stopped at step 3; its card {stopped.card_path} is kept as it is" in err


def test_resuming_a_run_whose_publishing_was_cut_short_publishes_it(data_plugin, tmp_path):
    finished = train(card(epochs=1), tmp_path)
    whole = parse_card(finished.card_path)
    finished.card_path.write_text(whole.model_copy(update={"metrics": {}}).toml())  # as publish writes it first

    again = train(card(epochs=1), tmp_path, resume=True)
    assert parse_card(again.card_path).metrics.keys() == whole.metrics.keys()


def test_an_existing_checkpoint_is_not_overwritten_without_resume(data_plugin, tmp_path):
    train(card(), tmp_path, max_steps=2)
    before = (tmp_path / CHECKPOINT).read_bytes()
    with pytest.raises(TrainingError, match="already holds a checkpoint.*pass resume=True.*another out") as caught:
        train(card(), tmp_path, max_steps=4)
    assert (tmp_path / CHECKPOINT).read_bytes() == before
    assert caught.value.option == "resume"


def test_errors_name_keywords_to_a_python_caller_and_flags_to_a_cli_user(data_plugin, tmp_path, capsys):
    from vaezoo.training.sweeps import parse_sweep

    with pytest.raises(TrainingError) as caught:
        train(card(), tmp_path / "zero", max_steps=0)
    assert (str(caught.value), caught.value.option) == ("max_steps must be at least 1, got 0", "max_steps")
    with pytest.raises(TrainingError) as caught:
        parse_sweep("max")
    assert (str(caught.value), caught.value.option) == ("sweep takes KEY=V1,V2,..., got 'max'", "sweep")
    out = tmp_path / "out"
    train(card(), out, max_steps=2)
    with pytest.raises(TrainingError) as caught:
        train(card(), out, max_steps=4)
    assert str(caught.value).endswith("; pass resume=True to continue it, or choose another out to start afresh")

    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    capsys.readouterr()
    for args, said, code in [
            (["--out", str(tmp_path / "zero"), "--max-steps", "0"], "--max-steps must be at least 1, got 0", 2),
            (["--out", str(tmp_path / "sweep"), "--sweep", "max"], "--sweep takes KEY=V1,V2,..., got 'max'", 2),
            (["--out", str(out), "--max-steps", "4"],
             "; pass --resume to continue it, or choose another --out to start afresh", 1)]:
        assert main(["train", str(path), *args]) == code
        [line] = capsys.readouterr().err.splitlines()[-1:]
        assert line.startswith("error: ") and line.endswith(said), line


def test_a_nan_loss_names_the_step_and_the_last_good_checkpoint(data_plugin, tmp_path):
    forward = VAE.forward

    def nan_at_step_8(self, x, step=0, checked=False):
        out = forward(self, x, step, checked)
        if step == 8:
            out.loss = out.loss * float("nan")
        return out

    with pytest.MonkeyPatch.context() as patch, pytest.raises(TrainingError) as info:
        patch.setattr(VAE, "forward", nan_at_step_8)
        train(card(), tmp_path)
    message = str(info.value)
    # step 8 is also a checkpoint step: its weights gave a NaN, so the checkpoint of step 4 stays the last
    assert "loss became nan at step 8 (epoch 3)" in message
    assert f"the last good checkpoint is {tmp_path / CHECKPOINT} (step 4)" in message
    assert checkpoint_step(tmp_path) == 4
    assert train(card(), tmp_path, resume=True, max_steps=6).step == 6


def test_a_nan_between_checkpoints_is_read_at_the_next_one_and_named_by_its_own_step(data_plugin, tmp_path):
    forward = VAE.forward
    reads = []

    def nan_from_step_9(self, x, step=0, checked=False):
        out = forward(self, x, step, checked)
        if step >= 9:
            out.loss = out.loss * float("nan")
        return out

    def counting_read(self):  # the loop waits for the device only here
        reads.append(self.step)
        return read(self)

    from vaezoo.training.single import SingleRun
    read = SingleRun.check
    with pytest.MonkeyPatch.context() as patch, pytest.raises(TrainingError) as info:
        patch.setattr(VAE, "forward", nan_from_step_9)
        patch.setattr(SingleRun, "check", counting_read)
        train(card(), tmp_path)
    assert reads == [4, 8, 12]  # at the checkpoints (every 4 steps): no read in between
    assert "loss became nan at step 9 (epoch 4)" in str(info.value)
    assert f"the last good checkpoint is {tmp_path / CHECKPOINT} (step 8)" in str(info.value)
    assert checkpoint_step(tmp_path) == 8


def test_a_nan_loss_names_the_terms_that_were_not_finite(data_plugin, tmp_path, capsys):
    """A part that breaks is named by its term: the advice on learning rates and data is not all there is."""
    model = {"image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
             "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]},
             "regularizers": [{"type": "beta"}, {"type": "nan_after", "at": 3}]}
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny", model=model))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "loss became nan at step 3 (epoch 1), in its term nan_after; " in line


def test_a_term_not_finite_at_step_0_names_its_regularizer_not_the_learning_rate(data_plugin, tmp_path, capsys):
    # beta 1e308 made the loss inf at step 0, and the run said "in its term kl; lower the learning rate or check the
    # data": neither the regularizer nor its setting was named, and no learning rate had acted
    model = {"image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
             "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]},
             "regularizers": [{"type": "beta", "beta": 1e308}]}
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny", model=model))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "before any step, the loss term kl = inf from regularizer Beta (regularizers.0, vaezoo.regularizers.beta)" \
        in line and "no learning rate has acted yet" in line and "lower the learning rate" not in line


@pytest.mark.parametrize("beta, options, member", [
    (1.0, ["--sweep", "beta=1e308,1"], "beta=1e+308 seed 0"),
    (1.0, ["--sweep", "beta=1,1e308"], "beta=1e+308 seed 0"),
    (1e308, ["--seeds", "0,1"], "seed 0"),
])
def test_a_member_whose_term_is_not_finite_at_step_0_is_named_with_the_regularizer_making_it(
        data_plugin, tmp_path, capsys, beta, options, member):
    # a first member's beta of 1e308 stopped the ensemble naming the card ("card 'tiny-blobs': on the first batch"),
    # and a later member's stopped that member at its step 0 naming neither the regularizer nor its plugin
    model = {"image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
             "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]},
             "regularizers": [{"type": "beta", "beta": beta}]}
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny", model=model))
    assert main(["train", str(path), "--out", str(tmp_path / "out"), *options]) == 1
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert line == (f"error: {member}: on the first batch, before any step, the loss term kl = inf from regularizer "
                    f"Beta (regularizers.0, vaezoo.regularizers.beta); check this run's settings of that part (the "
                    f"card's, or a swept value) (too large a weight?), as no learning rate has acted yet")
    assert not (tmp_path / "out").exists()


def test_a_nan_from_the_start_is_a_one_line_cli_error(data_plugin, tmp_path, capsys, monkeypatch):
    forward = VAE.forward

    def nan_loss(self, x, step=0, checked=False):
        out = forward(self, x, step, checked)
        out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(VAE, "forward", nan_loss)
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    code = main(["train", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "loss became nan at step 0 (epoch 1); no checkpoint has been written yet" in line
    assert not (tmp_path / "out").exists()  # the folder the run made is removed when nothing was written in it


def test_a_finished_run_writes_weights_that_describe_what_made_them(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    card_path = out / "toyvae-bars-run.toml"
    assert captured.out.strip() == str(card_path)
    assert "epoch 4/4 step 12/12" in captured.err and "C_continuous" in captured.err
    assert entries(out) == [CHECKPOINT, "toyvae-bars-run.safetensors", card_path.name]

    written = parse_card(card_path)
    assert written.name == "toyvae-bars-run"
    weights = out / written.weights.file
    assert written.weights.sha256 == sha256_of(weights) and written.weights.size == weights.stat().st_size
    assert written.train.steps == 12 and set(written.metrics) >= {"reconstruction", "objective", "cluster_accuracy"}
    with safe_open(str(weights), framework="pt") as f:
        header = f.metadata()
    assert header == {"trained": canonical({"recipe": recipe(written, RECORDS), "steps": 12})}  # nothing measured

    # The weights file is the tensors and what made them: the same run in another folder is the same file.
    assert main(["train", str(path), "--out", str(tmp_path / "again")]) == 0
    assert sha256_of(tmp_path / "again" / weights.name) == written.weights.sha256


def test_the_run_folder_loads_like_a_zoo_entry_with_the_trained_model(data_plugin, tmp_path):
    result = train(card(epochs=1), tmp_path / "run")  # 3 steps
    loaded = vaezoo.load(tmp_path / "run")
    assert loaded.card.name == "toyvae-bars-run" and loaded.card.train.steps == result.step == 3
    trained = result.model.eval()
    x = ImageDataset(torch.rand(8, 1, 16, 16), scale=1.0).batch(slice(0, 8))
    with torch.no_grad():
        assert torch.equal(loaded.encode(x).mode, trained.encode(x).mode)
        assert torch.equal(loaded.reconstruct(x), trained.reconstruct(x))
    assert_same_weights(loaded.state_dict(), trained.state_dict())


def test_the_run_folder_on_the_cards_path_lists_beside_the_whole_zoo(data_plugin, tmp_path, monkeypatch, capsys):
    zoo = set(scan().cards)
    train(card(epochs=1), tmp_path / "run")
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(tmp_path / "run"))
    capsys.readouterr()
    assert main(["list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert {c["name"] for c in json.loads(out)} == zoo | {"toyvae-bars-run"}
    assert err == ""  # nothing skipped: the run's card takes no zoo entry's name
    assert main(["info", str(tmp_path / "run")]) == 0 and "toyvae-bars-run" in capsys.readouterr().out


def test_name_names_the_completed_card(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    assert main(["train", str(path), "--out", str(tmp_path / "out"), "--name", "my-bars"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "out" / "my-bars.toml")
    assert parse_card(tmp_path / "out" / "my-bars.toml").name == "my-bars"


def test_the_runs_of_a_sweep_left_unmeasured_are_named_after_one_read_of_the_zoo(data_plugin, tmp_path, capsys,
                                                                                 monkeypatch):
    """Each run's line gives the command that measures it, which names the run as the zoo finds it: the card
    folders were read twice for each run, beside thousands of cards a cost that grew as the runs times the cards."""
    from vaezoo.entries import catalog

    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    scans = []
    scan_now = catalog._scan
    monkeypatch.setattr(catalog, "_scan", lambda: scans.append(1) or scan_now())
    assert main(["train", str(path), "--out", str(out), "--seeds", "0-3", "--no-eval"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "not evaluated" in line]
    assert said == [f"{out / f'seed-{seed}'}: not evaluated; measure it with: vaezoo eval {out / f'seed-{seed}'} "
                    f"--write" for seed in range(4)]
    assert len(scans) == 2  # the run's new card name checked, then every run's line: not two reads per run

def test_a_result_names_no_measure_command_once_its_card_holds_metrics(data_plugin, tmp_path):
    """The command that measures a run is named once, but whether the run still needs it is read from its card: a
    run measured after train returned names none, as its card says."""
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    [result] = run_recipe(path, out, evaluate=False)
    assert result.measure_command == f"vaezoo eval {out} --write"
    assert main(shlex.split(result.measure_command)[1:]) == 0
    assert result.card.metrics
    assert result.measure_command is None


def test_no_eval_leaves_the_metrics_to_the_command_it_prints(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out), "--no-eval"]) == 0
    card_path = out / "toyvae-bars-run.toml"
    assert parse_card(card_path).metrics == {}
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"{out}: not evaluated; measure it with: vaezoo eval {out} --write"
    assert main(shlex.split(last.partition("measure it with: ")[2])[1:]) == 0
    evaluated = parse_card(card_path)
    assert set(evaluated.metrics) >= {"reconstruction", *parse_card(path).eval_metrics}
    # the card a finished run writes: JointVAE's [labels] too, which predict_label needs
    assert evaluated.sections.keys() == {"labels"}
    assert main(["train", str(path), "--out", str(tmp_path / "whole")]) == 0
    whole = parse_card(tmp_path / "whole" / "toyvae-bars-run.toml").sections["labels"].root["discrete0"]
    matching = evaluated.sections["labels"].root["discrete0"]
    assert matching.category_to_label == whole.category_to_label
    named = shlex.split(matching.command)[3]  # the card as it was named: its file, or the run folder holding it
    assert matching.command.startswith("python -m vaezoo_jointvae.labels ")
    assert get_card(named).path.resolve() == card_path.resolve()


@pytest.mark.parametrize(("name", "message", "exit_code"), [
    ("jointvae-mnist", "--name 'jointvae-mnist' is the name of a built-in zoo entry", 1),
    ("My Run", "--name 'My Run' is not a card name", 2),
    ("", "--name '' is not a card name", 2),
    ("a" * 201, "--name has 201 characters, more than the 200 a card name may have", 2),
])
def test_name_of_a_zoo_entry_or_not_a_card_name_is_refused_before_anything_runs(data_plugin, tmp_path, capsys, name,
                                                                                 message, exit_code):
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    code = main(["train", str(path), "--out", str(tmp_path / "out"), "--name", name])
    err = capsys.readouterr().err
    assert code == exit_code and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert message in line and not (tmp_path / "out").exists()
    with pytest.raises(CardError, match=message.removeprefix("--name ")):
        train(card(), tmp_path / "out", name=name)


def values(shown: list) -> dict[str, float]:
    shown.append(True)
    return {"loss": 1.5, "reconstruction": 1.25, "kl_continuous": 0.25, "C_continuous": 0.5}


def test_progress_in_logs_shows_every_field_every_n_steps(monkeypatch):
    clock = iter(range(100))
    monkeypatch.setattr("vaezoo.training.progress.time.perf_counter", lambda: float(next(clock)))
    stream, shown = io.StringIO(), []
    reporter = Reporter(total=6, start=0, per_epoch=3, every=2, console=Console(file=stream, width=200), interval=0)
    for step in range(1, 7):
        reporter.update(step, 32, lambda: values(shown))
    reporter.close()
    lines = stream.getvalue().splitlines()
    assert len(shown) == len(lines) == 3  # values are read only for the lines shown
    # the fake clock makes each step take one second: 64 images in 2 s, 4 steps left
    assert lines[0] == ("epoch 1/2 step 2/6 | loss 1.5  reconstruction 1.25  kl_continuous 0.25  C_continuous 0.5 "
                        "| 32 img/s | eta 0:00:04")
    assert lines[2].startswith("epoch 2/2 step 6/6 |") and lines[2].endswith("| eta 0:00:00")


def test_progress_in_logs_of_a_fast_run_is_a_line_every_interval_not_every_n_steps(monkeypatch):
    clock = iter(range(100))  # one second a step, as perf_counter is read once a step
    monkeypatch.setattr("vaezoo.training.progress.time.perf_counter", lambda: float(next(clock)))
    stream = io.StringIO()
    reporter = Reporter(total=40, start=0, per_epoch=40, every=2, console=Console(file=stream, width=200),
                        interval=10)
    for step in range(1, 41):
        reporter.update(step, 32, lambda: {"loss": 1.0})
    shown = [int(line.split()[3].split("/")[0]) for line in stream.getvalue().splitlines()]
    assert shown == [10, 20, 30, 40]


def test_progress_in_logs_of_a_slow_run_is_a_line_a_minute_not_every_n_steps(monkeypatch):
    # 30 s a step: a line every 200 steps was one every 100 minutes, and CI services stop a job silent for ten
    clock = iter(range(0, 10_000, 30))
    monkeypatch.setattr("vaezoo.training.progress.time.perf_counter", lambda: float(next(clock)))
    stream = io.StringIO()
    reporter = Reporter(total=9, start=0, per_epoch=9, console=Console(file=stream, width=200))
    for step in range(1, 10):
        reporter.update(step, 32, lambda: {"loss": 1.0})
    shown = [int(line.split()[3].split("/")[0]) for line in stream.getvalue().splitlines()]
    assert shown == [2, 4, 6, 8, 9]


@pytest.mark.parametrize("terminal", [False, True])
def test_progress_shows_the_names_of_terms_as_text(terminal):
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=terminal, width=200)
    reporter = Reporter(total=1, start=0, per_epoch=1, every=1, refresh=0, console=console)
    reporter.update(1, 32, lambda: {"[red]tc[/red]": 1.0, "kl\x1b[2J": 2.0})
    reporter.close()
    screen = Text.from_ansi(stream.getvalue()).plain if terminal else stream.getvalue()
    assert "[red]tc[/red] 1" in screen and "kl\\x1b[2J 2" in screen


def test_progress_on_a_terminal_shows_every_field():
    stream, shown = io.StringIO(), []
    console = Console(file=stream, force_terminal=True, width=200)
    reporter = Reporter(total=6, start=0, per_epoch=3, refresh=3600, console=console)
    for step in range(1, 7):
        reporter.update(step, 32, lambda: values(shown))
    reporter.close()
    screen = Text.from_ansi(stream.getvalue()).plain
    assert len(shown) == 1  # within the refresh interval only the last step is read
    for field in ("epoch 2/2", "step", "6/6", "img/s", "eta", "loss 1.5", "reconstruction 1.25",
                  "kl_continuous 0.25", "C_continuous 0.5"):
        assert field in screen, field


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--checkpoint-every", "0", "error: --checkpoint-every must be greater than 0, got 0"),
    ("--epochs", "-1", "error: --epochs must be greater than 0, got -1"),
    ("--max-steps", "0", "error: --max-steps must be at least 1, got 0"),
])
def test_a_bad_override_is_a_one_line_cli_error(tmp_path, capsys, option, value, said):
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    code = main(["train", str(path), "--out", str(tmp_path / "out"), option, value])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert line == said and not (tmp_path / "out").exists()


def test_a_metric_the_model_cannot_serve_is_refused_at_step_0(data_plugin, tmp_path):
    from vaezoo.errors import MetricError

    bad = Card.model_validate(make_card("toy", eval_metrics=["mig_dlib"]))  # toy_bars has labels, no factors
    with pytest.raises(MetricError, match="mig_dlib"):
        train(bad, tmp_path / "out")
    assert not (tmp_path / "out" / CHECKPOINT).exists()


def test_the_cli_shows_training_and_publish_warnings_as_one_line_each(tmp_path, capsys, monkeypatch):
    import warnings

    import vaezoo.training.train
    from vaezoo.errors import PublishWarning, TrainingWarning

    def warns(*args, **kwargs):
        warnings.warn("the step runs eagerly", TrainingWarning, stacklevel=2)
        warnings.warn("mig failed (ValueError: boom); the card is written without it", PublishWarning, stacklevel=2)
        raise TrainingError.about("{max_steps} must be at least 1, got {got}", got=0)

    monkeypatch.setattr(vaezoo.training.train, "train", warns)
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "warning: the step runs eagerly", "warning: mig failed (ValueError: boom); the card is written without it",
        "error: --max-steps must be at least 1, got 0"]


def test_a_run_of_other_epochs_drops_the_budget_that_told_the_cards_own_run():
    from vaezoo.training.train import TrainOptions

    card = Card.model_validate(make_card("toy", train={"epochs": 4, "budget": "4 epochs: 3 minutes on a CPU"}))
    assert TrainOptions(epochs=1).recipe(card).train.budget is None
    assert TrainOptions(epochs=4, seed=3).recipe(card).train.budget == "4 epochs: 3 minutes on a CPU"


def test_a_batch_size_the_objective_refuses_names_the_cards_batch_size(data_plugin, tmp_path):
    # batch_size 1 with minibatch-stratified sampling told the user to "pass 2 or more (encode() and reconstruct()
    # take one)", the advice of a Python call, not of a card
    data = make_card("tiny", train={"batch_size": 1})
    data["model"]["regularizers"] = [{"type": "total_correlation", "dataset_size": 64, "sampling": "mss"}]
    with pytest.raises(TrainingError, match=r"card 'tiny-blobs': the model refuses a batch of 1 image\(s\), the "
                                            r"recipe's batch_size \(.*needs batches of at least 2 images.*\); give "
                                            r"the card a larger batch_size"):
        train(Card.model_validate(data), tmp_path / "run")


def test_an_epochs_last_batch_the_objective_refuses_stops_the_run_before_its_first_step(data_plugin, tmp_path):
    """64 images in batches of 7 end each epoch in a batch of 1, which minibatch-stratified sampling cannot use."""
    data = make_card("tiny", train={"batch_size": 7})
    data["model"]["regularizers"] = [{"type": "total_correlation", "dataset_size": 64, "sampling": "mss"}]
    with pytest.raises(TrainingError, match=r"each epoch ends in a batch of 1 image\(s\) where the others hold 7"):
        train(Card.model_validate(data), tmp_path / "run")
    assert not (tmp_path / "run" / CHECKPOINT).exists()
    data["train"]["batch_size"] = 6  # a last batch of 4
    assert train(Card.model_validate(data), tmp_path / "run6", evaluate=False).step == 2 * 11


@pytest.mark.parametrize("out, problem", [("", "out needs a folder, not an empty path"), (" ", "not an empty path"),
                                          (None, "out takes the run's folder, a path, got NoneType")])
def test_a_run_folder_that_is_no_path_is_refused_and_nothing_is_written(tmp_path, monkeypatch, out, problem):
    from vaezoo.errors import OutputError
    from vaezoo.training.train import train_seeds

    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputError, match=problem):
        train(card(), out)
    with pytest.raises(OutputError, match=problem):
        train_seeds(card(), out, [0, 1])
    assert list(tmp_path.iterdir()) == []


def test_the_resume_command_names_the_program_run_where_vaezoo_on_the_path_is_another_or_none(monkeypatch, tmp_path):
    import shutil
    import sys

    from vaezoo.cli import build_parser
    from vaezoo.cli.train import resume_command

    args = build_parser().parse_args(["train", "card.toml", "--out", "run"])
    program = str(tmp_path / "venv" / "bin" / "vaezoo")  # a virtual environment not activated
    monkeypatch.setattr(sys, "argv", [program])
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert resume_command(args) == f"{program} train card.toml --out run --resume"
    monkeypatch.setattr(shutil, "which", lambda name: program)
    assert resume_command(args) == "vaezoo train card.toml --out run --resume"


def test_the_resume_command_of_a_run_stopped_in_a_notebook_names_this_python(monkeypatch):
    """main(["train", ...]) called in a Jupyter kernel said 'resume with: .../ipykernel_launcher.py train ...': the
    kernel's launcher, which runs no vaezoo command."""
    import shlex
    import shutil
    import sys

    from vaezoo.cli import build_parser
    from vaezoo.cli.train import resume_command

    args = build_parser().parse_args(["train", "card.toml", "--out", "run"])
    launcher = "/venv/lib/python3.11/site-packages/ipykernel_launcher.py"
    monkeypatch.setattr(sys, "argv", [launcher, "-f", "/home/u/.local/share/jupyter/runtime/kernel-1.json"])
    monkeypatch.setattr(shutil, "which", lambda name: "/venv/bin/vaezoo")
    assert shlex.split(resume_command(args)) == [sys.executable, "-m", "vaezoo", "train", "card.toml", "--out", "run",
                                                 "--resume"]


def test_the_resume_command_of_an_output_folder_holding_control_characters_is_plain_text(monkeypatch):
    """A folder named with ESC and a newline was quoted raw: the printed line cleared the screen and broke in two."""
    import shutil
    import subprocess
    import sys

    from vaezoo.cli import build_parser
    from vaezoo.cli.train import resume_command

    out = "runs/\x1b[2J\nx"
    args = build_parser().parse_args(["train", "card.toml", "--out", out])
    monkeypatch.setattr(sys, "argv", ["vaezoo"])
    monkeypatch.setattr(shutil, "which", lambda name: None)
    command = resume_command(args)
    assert command.isprintable()
    said = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, check=True).stdout
    assert said.split(b"\0")[:-1] == [b"vaezoo", b"train", b"card.toml", b"--out", out.encode(), b"--resume"]


def test_progress_in_logs_of_a_run_longer_than_a_timedelta_says_so(monkeypatch):
    """'vaezoo train --epochs 99999999999999999999' stopped at its first log line with an OverflowError traceback
    from the time left (datetime.timedelta takes at most 999,999,999 days)."""
    clock = iter(range(100))
    monkeypatch.setattr("vaezoo.training.progress.time.perf_counter", lambda: float(next(clock)))
    stream = io.StringIO()
    reporter = Reporter(total=5 * 10**20, start=0, per_epoch=5, every=1, console=Console(file=stream, width=200),
                        interval=0)
    reporter.update(1, 8, lambda: {"loss": 1.0})
    assert stream.getvalue().rstrip().endswith("| eta over 999,999,999 days")


def test_fit_on_no_image_is_one_line_before_any_file(data_plugin, tmp_path):
    """fit(model, dataset, card, out) of a dataset of 0 images stopped with ZeroDivisionError: division by zero."""
    from vaezoo.assemble import build_model
    from vaezoo.training.train import fit

    card = Card.model_validate(make_card("tiny"))
    with pytest.raises(TrainingError, match=r"^dataset 'tiny_blobs' gave 0 training images: nothing to train on; "):
        fit(build_model(card), ImageDataset(torch.zeros(0, 1, 4, 4, dtype=torch.uint8), scale=1.0), card,
            tmp_path / "run")
    assert not (tmp_path / "run" / CHECKPOINT).exists()


@pytest.mark.parametrize("seeds", [None, [0, 1]])
def test_a_run_whose_folder_is_removed_while_it_trains_stops_at_its_next_checkpoint(data_plugin, tmp_path,
                                                                                    monkeypatch, seeds):
    """A run folder removed between two checkpoints was made again by the next one, without its lock, and the run
    went on there (where a second run may have started meanwhile); removed during a write, the run said 'No such
    file or directory; make room' and named the removed checkpoint as the last good one."""
    import shutil

    from vaezoo.errors import OutputError
    from vaezoo.training.train import train_seeds

    out = tmp_path / "run"
    gone = out if seeds is None else out / "seed-1"
    update = Reporter.update

    def remove_at_step_2(self, step, images, values):
        if step == 2:
            shutil.rmtree(gone)
        update(self, step, images, values)

    monkeypatch.setattr(Reporter, "update", remove_at_step_2)
    card = Card.model_validate(make_card("tiny"))  # a checkpoint every 4 steps
    with pytest.raises(OutputError, match=re.escape(
            f"the run's folder {gone} is gone (removed or moved while the run trained), so the checkpoint of step 4 is "
            f"not written; where the folder was moved, continue with resume=True")):
        train(card, out) if seeds is None else train_seeds(card, out, seeds)
    assert not gone.exists()


def test_an_optimiser_option_whose_step_overflows_the_floats_is_named_not_the_learning_rate(data_plugin, tmp_path,
                                                                                            capsys):
    # a weight_decay of 1e39 overflowed the step and the error said "learning rate 0.01 is too large; lower it"
    data = make_card("tiny")
    data["train"]["optimizer"]["options"] = {"weight_decay": 1e39}
    path = write_toml(tmp_path / "card.toml", data)
    assert main(["train", str(path), "--out", str(tmp_path / "run"), "--no-eval"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: the recipe's optimiser (train.optimizer): option weight_decay 1e+39 is too large, its step overflows "
        "the parameters' floating-point range; lower it")


def test_a_card_whose_dataset_no_plugin_registers_is_said_as_a_plugin_it_needs(tmp_path, capsys):
    """The run reads its dataset's options as it starts (Dataset.record): a dataset no plugin registers was said
    "unknown dataset 'clock'. Known: ...", naming neither the card nor the plugin it needs, as loading it says."""
    from kit import cli

    path = write_toml(tmp_path / "gone.toml", make_card(name="gone", train={"data": {"name": "clock", "options": {}}}))
    code, out, err = cli(capsys, "train", str(path), "-o", str(tmp_path / "run"))
    assert (code, out) == (1, "")
    assert err.strip().splitlines()[-1].startswith("error: card 'gone' needs the dataset 'clock', which no installed "
                                                   "plugin registers; install the plugin that registers it")
    assert not (tmp_path / "run").exists()


def test_an_option_image_folder_does_not_take_is_one_line_before_anything_is_read(tmp_path, capsys):
    """image_folder's record() counts the images with the card's options: one it does not take was a TypeError's
    traceback, where the options are the card's, said as data_info says them."""
    from kit import cli

    card = make_card(name="mine", train={"data": {"name": "image_folder", "options": {
        "folder": str(tmp_path / "imgs"), "image_size": 16, "channels": 1, "colour": "red"}}})
    path = write_toml(tmp_path / "mine.toml", {**card, "dataset": "image_folder"})
    code, out, err = cli(capsys, "train", str(path), "-o", str(tmp_path / "run"))
    assert (code, out, "Traceback" in err) == (1, "", False), err
    assert err.strip().splitlines()[-1].startswith("error: dataset 'image_folder' does not take the options ")
    assert "takes no argument 'colour'" in err and not (tmp_path / "run").exists()
