"""Where a run trained: the machine its card and checkpoints record (``train.machine``), a resume on another one,
and what ``info``, ``seeds`` and ``study`` make of it."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from kit import cli, make_card, write_toml

from vaezoo.entries.catalog import parse_card
from vaezoo.entries.checkpoints import read_checkpoint
from vaezoo.entries.schema import Card, Machine
from vaezoo.errors import CardError, TrainingError, TrainingWarning
from vaezoo.evaluation.seeds import collect_runs
from vaezoo.training.train import CHECKPOINT, train, train_seeds


def here(step: int = 0, **ensemble) -> Machine:
    """The machine these tests train on, from ``step``."""
    return Machine(step=step, device="cpu", torch=torch.__version__, threads=torch.get_num_threads(), **ensemble)


@pytest.fixture
def threads():
    """Sets torch's CPU threads for the test (``threads(n)``), put back after it."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def tiny(tmp_path, **train_fields):
    return write_toml(tmp_path / "tiny.toml", make_card("tiny", train=train_fields))


def test_a_run_records_its_machine_on_its_card_and_in_its_checkpoints(data_plugin, tmp_path):
    result = train(tiny(tmp_path), tmp_path / "out", evaluate=False)
    assert result.card.train.machine == [here()]
    assert read_checkpoint(tmp_path / "out" / CHECKPOINT, fix="").machine == [here()]
    assert f'machine = [\n    {{ step = 0, device = "cpu", torch = "{torch.__version__}", threads = ' \
           f'{torch.get_num_threads()} }},\n]' in result.card_path.read_text()


def test_a_resume_on_the_same_machine_records_one_machine_and_warns_of_none(data_plugin, tmp_path):
    train(tiny(tmp_path), tmp_path / "out", max_steps=6, evaluate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TrainingWarning)
        resumed = train(tiny(tmp_path), tmp_path / "out", resume=True, evaluate=False)
    assert resumed.card.train.machine == [here()]


def test_a_resume_on_another_thread_count_warns_in_one_line_and_records_both_machines(data_plugin, tmp_path,
                                                                                       threads):
    """A resume on another MKL thread count said nothing, and the card recorded no machine at all."""
    threads(1)
    train(tiny(tmp_path), tmp_path / "out", max_steps=6, evaluate=False)
    first = here()
    threads(2)
    with pytest.warns(TrainingWarning) as caught:
        resumed = train(tiny(tmp_path), tmp_path / "out", resume=True, evaluate=False)
    [said] = [str(w.message) for w in caught if "another machine" in str(w.message)]
    assert "\n" not in said and "threads 1 -> 2" in said and "the run continues" in said
    assert resumed.step == 16  # it went on
    assert resumed.card.train.machine == [first, here(6)]
    assert read_checkpoint(tmp_path / "out" / CHECKPOINT, fix="").machine == [first, here(6)]


def test_a_checkpoint_of_no_machine_resumes_recording_the_machine_from_its_step(data_plugin, tmp_path):
    train(tiny(tmp_path), tmp_path / "out", max_steps=6, evaluate=False)
    checkpoint = tmp_path / "out" / CHECKPOINT
    state = torch.load(checkpoint, weights_only=True)
    del state["machine"]  # as a vaezoo that recorded none wrote it
    torch.save(state, checkpoint)
    resumed = train(tiny(tmp_path), tmp_path / "out", resume=True, evaluate=False)
    assert resumed.card.train.machine == [here(6)]  # the steps before 6: not recorded, and not claimed


def test_a_checkpoint_holding_a_malformed_machine_is_refused_in_one_line(data_plugin, tmp_path):
    train(tiny(tmp_path), tmp_path / "out", max_steps=6, evaluate=False)
    checkpoint = tmp_path / "out" / CHECKPOINT
    state = torch.load(checkpoint, weights_only=True)
    state["machine"] = [{"step": 0, "device": "cpu"}]
    torch.save(state, checkpoint)
    with pytest.raises(TrainingError, match="its 'machine' is not a list of the machines the run trained on"):
        train(tiny(tmp_path), tmp_path / "out", resume=True, evaluate=False)


@pytest.mark.parametrize("formulation", ["loop", "vmap"])
def test_an_ensemble_member_records_its_ensemble_its_size_and_its_path(data_plugin, tmp_path, formulation):
    members = train_seeds(tiny(tmp_path), tmp_path / "runs", [0, 1, 2], max_steps=4, formulation=formulation,
                          evaluate=False)
    for member in members:
        assert member.card.train.machine == [here(ensemble=formulation, members=3)]
        assert read_checkpoint(member.folder / CHECKPOINT, fix="").machine == [here(ensemble=formulation, members=3)]


def test_an_ensemble_resumed_by_another_path_records_it_from_the_step_it_resumed_at(data_plugin, tmp_path):
    train_seeds(tiny(tmp_path), tmp_path / "runs", [0, 1], max_steps=4, formulation="loop", evaluate=False)
    members = train_seeds(tiny(tmp_path), tmp_path / "runs", [0, 1], resume=True, formulation="vmap", evaluate=False)
    for member in members:
        assert member.card.train.machine == [here(ensemble="loop", members=2), here(4, ensemble="vmap", members=2)]


def test_machines_are_checked_as_a_card_field():
    base = make_card("tiny")
    for wrong, said in [({"ensemble": "vmap"}, "ensemble and members go together"),
                        ({"threads": 0}, "greater than 0"), ({"gpu": "A\x1b[2J"}, "should match pattern")]:
        machine = {"step": 0, "device": "cpu", "torch": "2.5.0", "threads": 1, **wrong}
        with pytest.raises(ValueError, match=said):
            Card.model_validate({**base, "train": {**base["train"], "machine": [machine]}})
    later, earlier = ({"step": s, "device": "cpu", "torch": "2.5.0", "threads": 1} for s in (4, 2))
    with pytest.raises(ValueError, match="do not rise"):
        Card.model_validate({**base, "train": {**base["train"], "machine": [later, earlier]}})


def test_info_shows_the_machine_as_text_and_json_holds_it(tmp_path, capsys):
    machine = {"step": 0, "device": "cuda", "gpu": "[bold red]NVIDIA H200[/]", "torch": "2.14.1", "threads": 16}
    base = make_card("tiny")
    path = write_toml(tmp_path / "tiny.toml", {**base, "train": {**base["train"], "machine": [machine]}})
    code, out, _ = cli(capsys, "info", str(path))
    assert code == 0
    assert '{ step = 0, device = "cuda", gpu = "[bold red]NVIDIA H200[/]", torch = "2.14.1", threads = 16 }' in out
    code, out, _ = cli(capsys, "info", str(path), "--json")
    assert code == 0 and json.loads(out)["train"]["machine"] == [machine]


def seed_run(tmp_path, seed: int, *devices: str, threads: int = 1) -> str:
    """A run folder's card of the tiny recipe with ``seed``, trained on ``devices`` in turn (none: unrecorded)."""
    base = make_card("tiny", metrics={"elbo": {"value": float(seed), "command": "vaezoo eval", "vaezoo_version": "1"}})
    machines = [{"step": 4 * i, "device": d, "torch": "2.14.1", "threads": threads} for i, d in enumerate(devices)]
    train_fields = {**base["train"], "seed": seed, "steps": 16, **({"machine": machines} if machines else {})}
    folder = tmp_path / f"seed-{seed}"
    folder.mkdir()
    write_toml(folder / "tiny-run.toml", {**base, "name": "tiny-run", "train": train_fields})
    return str(folder)


def test_seeds_refuses_runs_of_one_recipe_trained_on_different_kinds_of_device(data_plugin, tmp_path):
    card = parse_card(tiny(tmp_path, steps=16, machine=[{"step": 0, "device": "cpu", "torch": "2.14.1",
                                                         "threads": 1}]))
    gpu = seed_run(tmp_path, 1, "cuda")
    with pytest.raises(CardError, match=f"run {gpu} trained on cuda, card tiny-blobs on cpu: the runs of one recipe "
                                        f"train on one kind of device"):
        collect_runs(card, [gpu])
    moved = seed_run(tmp_path, 2, "cpu", "cuda")
    with pytest.raises(CardError, match="trained on cpu then cuda, card tiny-blobs on cpu"):
        collect_runs(card, [moved])


def test_seeds_gathers_runs_on_other_thread_counts_and_runs_that_record_no_machine(data_plugin, tmp_path):
    card = parse_card(tiny(tmp_path, steps=16, machine=[{"step": 0, "device": "cpu", "torch": "2.14.1",
                                                         "threads": 1}]))
    runs = collect_runs(card, [seed_run(tmp_path, 1, "cpu", threads=8), seed_run(tmp_path, 2)])
    assert [run.seed for run in runs] == [0, 1, 2]


ELSEWHERE = {"step": 0, "device": "cuda", "gpu": "NVIDIA H200", "torch": "2.9.0", "threads": 16}
"""A machine these tests do not train on."""


def test_a_run_from_a_card_that_records_a_machine_records_its_own(data_plugin, tmp_path):
    # a run's card trained again (vaezoo train runs/x/NAME.toml) records where this run trained, not where that one did
    result = train(tiny(tmp_path, machine=[ELSEWHERE]), tmp_path / "out", max_steps=4, evaluate=False)
    assert result.card.train.machine == [here()]


def test_a_sweep_of_the_machine_is_refused_as_a_record_of_the_run(data_plugin, tmp_path, capsys):
    code, _, err = cli(capsys, "train", str(tiny(tmp_path, machine=[ELSEWHERE])), "--out", str(tmp_path / "out"),
                       "--sweep", "threads=1,2")
    assert code == 2 and "Traceback" not in err and not (tmp_path / "out").exists()
    assert "--sweep threads: train.machine.0.threads records how a run went" in err


def test_a_gpu_run_records_the_gpu_by_name_as_plain_text(monkeypatch):
    # no GPU here: torch's name of one, as a driver could give it, holding a terminal's escape sequence
    from vaezoo.training.loop import Run, this_machine

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200\x1b[2J\u00e9 ")
    machine = this_machine(Run(rank=0, world=2, device=torch.device("cuda:1")), 8, "vmap", 4)
    assert machine == Machine(step=8, device="cuda", gpu="NVIDIA H200[2J", torch=torch.__version__,
                              threads=torch.get_num_threads(), processes=2, ensemble="vmap", members=4)


def test_members_resumed_from_other_machines_still_share_one_step(data_plugin, tmp_path):
    # the machines a member trained on before are no part of what stacks it with the others
    train_seeds(tiny(tmp_path), tmp_path / "runs", [0, 1], max_steps=4, formulation="loop", evaluate=False)
    checkpoint = tmp_path / "runs" / "seed-1" / CHECKPOINT
    state = torch.load(checkpoint, weights_only=True)
    state["machine"] = [{**state["machine"][0], "threads": 99}]
    torch.save(state, checkpoint)
    with pytest.warns(TrainingWarning, match="threads 99 -> "):
        members = train_seeds(tiny(tmp_path), tmp_path / "runs", [0, 1], resume=True, formulation="loop",
                              evaluate=False)
    assert [m.card.train.machine[-1] for m in members] == [here(ensemble="loop", members=2),
                                                           here(4, ensemble="loop", members=2)]
