"""Training that uses the hardware, checked on the CPU: the dataset kept on the run's device, bf16 autocast,
torch.compile, and several seeds side by side, each ending as it would trained alone.

The CUDA paths are the same code with another ``device``; what only a GPU shows (no batch crossing the PCIe
bus, the speed) is measured by benchmarks/bench_train.py --device cuda.
"""

from __future__ import annotations

import functools
import signal
from pathlib import Path

import pytest
import torch
from kit import assert_member_checkpoint_is_the_solo_runs, make_card, write_toml
from torch.overrides import TorchFunctionMode
from torch.utils.data.distributed import DistributedSampler

from vaezoo.cli import main
from vaezoo.data import ImageDataset
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.recipe import recipe
from vaezoo.entries.schema import Card
from vaezoo.errors import TrainingError
from vaezoo.training.loop import Run
from vaezoo.training.loop import epoch_order as _epoch_order
from vaezoo.training.train import CHECKPOINT, Interrupted, train, train_seeds


def card(**train) -> Card:
    return Card.model_validate(make_card("toy", train=train))


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize(("size", "world"), [(96, 1), (97, 1), (10, 3), (7, 4)])
def test_the_shuffle_drawn_on_the_device_is_the_distributed_samplers_order(size, world):
    generator = torch.Generator(torch.device("cpu"))
    for epoch in range(3):
        for rank in range(world):
            sampler = DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=True, seed=5)
            sampler.set_epoch(epoch)
            order = _epoch_order(size, 5, epoch, Run(rank, world), generator)
            assert order.device == generator.device and order.tolist() == list(sampler)


class DeviceTransfers(TorchFunctionMode):
    """Records every tensor method call that names a device (``.to(device)``, ``.cuda()``, ``.cpu()``)."""

    def __init__(self):
        super().__init__()
        self.calls: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        named = func in (torch.Tensor.cuda, torch.Tensor.cpu) or func is torch.Tensor.to and (
            kwargs.get("device") is not None or any(isinstance(a, (str, torch.device)) for a in args[1:]))
        if named:
            self.calls.append(args[0])
        return func(*args, **kwargs)


def test_batches_are_cut_on_the_runs_device_from_one_store_moved_there_once(data_plugin, tmp_path, monkeypatch):
    made, batch = [], ImageDataset.batch

    def recording(self, index, *args, **kwargs):
        x = batch(self, index, *args, **kwargs)
        if isinstance(index, slice):  # the input check, once over the dataset in order
            checked.append((index.start, index.stop))
        else:
            made.append((self.images, index.device, x.device, args, kwargs))
        return x

    checked = []
    monkeypatch.setattr(ImageDataset, "batch", recording)
    with DeviceTransfers() as transfers:
        results = train_seeds(card(), tmp_path, [0, 1], max_steps=5)

    assert checked == [(0, 1), (0, 8192)]  # the load's check of one image's shape; then 96 images: one chunk, once
    assert len(made) == 5  # one cut a step holds both seeds' batches
    store = made[0][0]
    device = Run().device
    for images, index, x, args, kwargs in made:
        assert images is store  # one store for every step of both seeds
        assert images.device == index == x == device
        assert args == () and kwargs == {}  # the batch is made where the store is: no device to copy it to
    image_shape = store.shape[1:]
    moved = [t for t in transfers.calls if t.shape[1:] == image_shape]
    # the one transfer of images: the whole uint8 dataset, once; no batch is ever sent to a device
    assert [(tuple(t.shape), t.dtype) for t in moved] == [((96, *image_shape), torch.uint8)]
    assert all(r.step == 5 for r in results)


def test_seeds_side_by_side_end_as_each_seed_trained_alone(data_plugin, tmp_path):
    together = train_seeds(card(), tmp_path / "together", [1, 2])
    alone = {seed: train(card(), tmp_path / f"alone-{seed}", seed=seed) for seed in (1, 2)}
    assert not same_weights(alone[1].model, alone[2].model)
    for result, seed in zip(together, (1, 2)):
        assert result.step == result.total == 12
        assert same_weights(result.model, alone[seed].model)
        assert result.card_path == tmp_path / "together" / f"seed-{seed}" / "toyvae-bars-run.toml"
        # the checkpoint byte for byte, but where each says it ran; the completed card's metrics (measured after
        # training) exactly
        together_folder, alone_folder = tmp_path / "together" / f"seed-{seed}", tmp_path / f"alone-{seed}"
        assert_member_checkpoint_is_the_solo_runs(together_folder / CHECKPOINT, alone_folder / CHECKPOINT, "loop", 2)
        values = [{k: m.value for k, m in parse_card(p).metrics.items()} for p in (result.card_path,
                                                                                  alone[seed].card_path)]
        assert values[0] == values[1] and values[0]


def test_each_seed_folder_resumes_on_its_own(data_plugin, tmp_path, monkeypatch):
    whole = train_seeds(card(), tmp_path / "whole", [1, 2], max_steps=10)

    out = tmp_path / "broken"
    batches, batch = [], ImageDataset.batch

    def dies_at_step_6(self, index, *args, **kwargs):
        batches.append(index)
        if len(batches) == 2 * 6 + 1:
            raise KeyboardInterrupt
        return batch(self, index, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(ImageDataset, "batch", dies_at_step_6)
        train_seeds(card(), out, [1, 2])
    (out / "seed-2" / CHECKPOINT).unlink()  # seed 2 starts over while seed 1 resumes from step 4

    resumed = train_seeds(card(), out, [1, 2], resume=True, max_steps=10)
    assert [r.step for r in resumed] == [10, 10]
    for a, b in zip(whole, resumed):
        assert same_weights(a.model, b.model)


def test_seeds_on_the_command_line(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out), "--seeds", "3,4"]) == 0
    assert capsys.readouterr().out.split() == [str(out / f"seed-{s}" / "toyvae-bars-run.toml") for s in (3, 4)]


def test_a_single_run_into_a_sweeps_folder_is_told_to_give_the_sweep(data_plugin, tmp_path, capsys):
    # it was told to train the ensemble with --seeds: '--seeds 0 --resume' then trained a new seed-0 beside them
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out), "--sweep", "beta=1,2", "--max-steps", "1", "--no-eval"]) == 0
    capsys.readouterr()
    assert main(["train", str(path), "--out", str(out), "--resume"]) == 1
    assert capsys.readouterr().err == (f"error: --out {out} holds the members of an ensemble (beta=1/seed-0, "
                                       "beta=2/seed-0); choose another --out, or train the ensemble with the --sweep "
                                       "(and --seeds) it was started with\n")


def test_a_single_run_and_an_ensemble_do_not_share_a_folder(data_plugin, tmp_path, capsys):
    path = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    ensemble, single = tmp_path / "ensemble", tmp_path / "single"
    assert main(["train", str(path), "--out", str(ensemble), "--seeds", "3,4"]) == 0
    assert main(["train", str(path), "--out", str(single)]) == 0
    capsys.readouterr()
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["train", str(path), "--out", str(ensemble), "--seed", "5"]) == 1
    assert capsys.readouterr().err == (f"error: --out {ensemble} holds the members of an ensemble (seed-3, seed-4); "
                                       "choose another --out, or train the ensemble with --seeds\n")
    assert main(["train", str(path), "--out", str(single), "--seeds", "5,6"]) == 1
    assert capsys.readouterr().err == (f"error: --out {single} holds a single run (checkpoint.pt, "
                                       "toyvae-bars-run.toml), where an ensemble puts its members' folders; choose "
                                       "another --out\n")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(("options", "message"), [
    (["--seeds", "1,1"], "error: --seeds must name each seed once, got 1,1"),
    (["--seeds", "1,x"], "argument --seeds: '1,x' is not a list of seeds"),
    (["--seeds", "0,-1"], "argument --seeds: '0,-1' is not a list of seeds, each a whole number from 0 to 2^63 - 1"),
    (["--seeds", f"0,{2**63}"], "is not a list of seeds, each a whole number from 0 to 2^63 - 1"),
    (["--seed", "-1"], "argument --seed: give a whole number from 0 to 2^63 - 1 as the seed, got '-1'"),
    (["--seed", "1_000"], "argument --seed: give a whole number from 0 to 2^63 - 1 as the seed, got '1_000'"),
    (["--seed", "\u0663"], "argument --seed: give a whole number from 0 to 2^63 - 1 as the seed"),
    (["--seeds", "0 1"], "argument --seeds: '0 1' is not a list of seeds"),  # "0, 1" is 0 and 1
    (["--seed", "1", "--seeds", "1,2"], "argument --seeds: not allowed with argument --seed"),
])
def test_bad_seeds_are_a_one_line_error(data_plugin, tmp_path, capsys, options, message):
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    code = main(["train", str(path), "--out", str(tmp_path / "out"), *options])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and message in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("seed", [-1, 2**63, 1.0])
def test_an_ensemble_refuses_a_seed_out_of_range_before_training(data_plugin, tmp_path, seed):
    with pytest.raises(TrainingError, match=rf"seeds: {seed!r} is not a seed; give whole numbers from 0 to 2\^63 - 1"):
        train_seeds(card(), tmp_path / "out", [0, seed])
    assert not (tmp_path / "out").exists()


def test_a_stopped_seeds_run_names_every_checkpoint_and_the_resume_command(data_plugin, tmp_path, capsys,
                                                                           monkeypatch):
    def stopped(card, out, seeds, sweeps, **options):
        raise Interrupted(signal.SIGINT, 4, out / "seed-1" / CHECKPOINT)

    monkeypatch.setattr("vaezoo.training.train.train_seeds", stopped)
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    out = tmp_path / "out"
    assert main(["train", str(path), "--out", str(out), "--seeds", "1,2", "--precision", "bf16"]) == 130
    err = capsys.readouterr().err
    assert (f"stopped by SIGINT at step 4; the checkpoints {out / 'seed-1' / CHECKPOINT}, "
            f"{out / 'seed-2' / CHECKPOINT} hold it") in err
    assert f"{out} --seeds 1,2 --precision bf16 --resume" in err


def test_bf16_autocast_changes_the_numbers_and_the_recipe(data_plugin, tmp_path):
    float32 = train(card(), tmp_path / "f32", max_steps=3)
    bf16 = train(card(precision="bf16"), tmp_path / "bf16", max_steps=3)
    again = train(card(), tmp_path / "again", max_steps=3, precision="bf16")  # the override, as --precision
    assert same_weights(bf16.model, again.model)
    assert not same_weights(bf16.model, float32.model)
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in bf16.model.parameters())
    with pytest.raises(TrainingError, match=r"was made with precision=bf16-mixed, where this run asks for precision "
                                            r"tf32-conv; resume with precision=bf16-mixed"):
        train(card(), tmp_path / "bf16", resume=True, max_steps=6)


def test_float32_and_compile_leave_the_recipe_of_older_checkpoints():
    # precision at its default and compile are not in the fingerprint: checkpoints written before the
    # fields existed fit, and a run can be resumed with or without torch.compile
    assert recipe(card(precision="float32", compile=True)) == recipe(card())
    assert not {"precision", "compile"} & set(recipe(card())["train"])
    assert recipe(card(precision="bf16"))["train"]["precision"] == "bf16"


def train_refusing_compile(preset: str, tmp_path, monkeypatch, capsys, *options: str) -> Path:
    """``vaezoo train`` (with ``options``) of a ``preset`` card asking for compile, with a backend that raises: one
    line says so and how to train without it. The card's path."""
    def refuses(graph, inputs, **options):
        raise RuntimeError("no compiler for this graph\nsecond line")

    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend=refuses))
    path = write_toml(tmp_path / f"{preset}.toml", make_card(preset, train={"compile": True}))
    assert main(["train", str(path), "--out", str(tmp_path / "out"), *options]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert ("torch.compile cannot compile the model here (refuses raised RuntimeError: no compiler for this graph)"
            in line)
    assert line.endswith("train without it: --no-compile (or compile = false in the card's [train])")
    return path


def test_a_model_torch_compile_cannot_compile_is_a_one_line_error(data_plugin, tmp_path, monkeypatch, capsys):
    path = train_refusing_compile("toy", tmp_path, monkeypatch, capsys)
    assert main(["train", str(path), "--out", str(tmp_path / "out"), "--no-compile", "--max-steps", "2"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("training 12 steps (3 per epoch), this time up to step 2, a checkpoint every"), err[0]
    assert err[-1].endswith(f"--out {tmp_path / 'out'} --no-compile --resume"), err[-1]


@pytest.mark.slow
def test_compile_trains_the_same_model_through_torch_compile(data_plugin, tmp_path):
    import torch._dynamo

    if not torch._dynamo.is_dynamo_supported():
        pytest.skip("torch.compile is not available with this Python and torch")
    torch._dynamo.reset()
    sgd = {"name": "SGD", "lr": 0.01}  # Adam's first steps are the gradients' signs: rounding could flip one
    eager = train(card(optimizer=sgd), tmp_path / "eager", max_steps=2)
    compiled = train(card(optimizer=sgd), tmp_path / "compiled", max_steps=2, compile=True)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # the forward went through torch.compile
    for (name, a), b in zip(eager.model.state_dict().items(), compiled.model.state_dict().values()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6, msg=name)  # the same noise, other rounding
    # compile is not part of the recipe: the compiled run's checkpoint resumes without it
    assert train(card(optimizer=sgd), tmp_path / "compiled", resume=True, max_steps=3).step == 3
