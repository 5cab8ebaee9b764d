"""Distributed training on CPU with gloo: two processes end with identical weights, and only rank 0 writes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from kit import child_env, cli, entries, install_plugin, make_card, run_ranks, write_toml

from vaezoo.errors import TrainingError
from vaezoo.training import launch
from vaezoo.training.train import CHECKPOINT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_as_rank(rank: int, world: int, port: int, card: dict, tmp) -> None:
    """One process of a DDP run (what torchrun sets up), each rank with its own --out to see who writes; the
    names of the threads the process is left with in ``threads{rank}.txt``."""
    from vaezoo.entries.schema import Card
    from vaezoo.training.train import train

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    result = train(Card.model_validate(card), tmp / f"out{rank}")
    torch.save(result.model.state_dict(), tmp / f"weights{rank}.pt")
    tasks = Path("/proc/self/task")
    (tmp / f"threads{rank}.txt").write_text("\n".join((t / "comm").read_text().strip() for t in tasks.iterdir()))


def resume_as_rank(rank: int, world: int, port: int, card: dict, tmp) -> None:
    """One process of a resumed DDP run, in a folder of its own (``out{rank}``); what it raised is written to
    ``said{rank}.txt``, and the process ends without raising, so that mp.spawn leaves the others to say theirs."""
    from vaezoo.entries.schema import Card
    from vaezoo.training.train import train

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                      LOCAL_RANK=str(rank))
    try:
        train(Card.model_validate(card), tmp / f"out{rank}", resume=True, evaluate=False)
    except Exception as exc:  # noqa: BLE001 - each process's word is what the test reads
        (tmp / f"said{rank}.txt").write_text(str(exc))


@pytest.mark.slow
def test_two_processes_end_with_identical_weights_only_rank_0_writing_and_their_process_group_gone(data_plugin,
                                                                                                     tmp_path):
    """Their process group gone with its threads: gloo's, left alive (torch kept the group past
    ``destroy_process_group``), aborted a process at exit one run in tens when one let go of a tensor once Python
    had begun to shut down ("terminate called without an active exception")."""
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
    for rank in range(2):
        assert "gloo" not in (tmp_path / f"threads{rank}.txt").read_text()


@pytest.mark.slow
def test_a_process_that_cannot_resume_tells_the_others_why_rather_than_leave_them_waiting(data_plugin, tmp_path):
    (tmp_path / "out0").mkdir()
    (tmp_path / "out0" / CHECKPOINT).write_bytes(b"not a checkpoint")  # rank 0's alone, and unreadable
    mp.spawn(resume_as_rank, args=(2, free_port(), make_card("toy"), tmp_path), nprocs=2)
    own = (tmp_path / "said0.txt").read_text()
    assert str(tmp_path / "out0" / CHECKPOINT) in own
    assert (tmp_path / "said1.txt").read_text() == (f"process 0 of this run could not resume from "
                                                    f"{tmp_path / 'out1'}: {own}")


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


def whole_batch_terms_as_rank(rank: int, world: int, port: int, tmp) -> None:
    """The TC and capacity terms and their gradients in one process of ``world``, which holds its share of a
    batch of 8: written to ``tmp/terms{rank}.pt``."""
    from vaezoo.latents import Gaussian
    from vaezoo.regularizers import Capacity, TotalCorrelation

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if world > 1:
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    params, noise = torch.load(tmp / "batch.pt", weights_only=True)
    rows = slice(rank * len(params) // world, (rank + 1) * len(params) // world)
    params = params[rows].clone().requires_grad_()
    posterior = Gaussian(3).posterior(params)
    z = posterior.mean + posterior.logvar.mul(0.5).exp() * noise[rows]
    terms = TotalCorrelation(1000, sampling="mss")(posterior, z, 0)
    terms |= Capacity([{"name": "z", "parts": ["z"], "max": 5.0, "iterations": 10, "gamma": 30.0}])(posterior, z, 0)
    sum(terms.values()).backward()
    torch.save(({k: v.detach() for k, v in terms.items()}, params.grad), tmp / f"terms{rank}.pt")
    if world > 1:
        torch.distributed.destroy_process_group()


def test_whole_batch_terms_under_ddp_are_those_of_the_recipe_batch(tmp_path):
    """Each of 2 processes holds 4 of a batch of 8: the TC estimate and the capacity's |KL - C| are still those
    of the 8, and DDP's average of the two processes' gradients is the gradient of one process given all 8."""
    torch.manual_seed(0)
    torch.save((torch.randn(8, 6), torch.randn(8, 3)), tmp_path / "batch.pt")
    whole_batch_terms_as_rank(0, 1, 0, tmp_path)
    alone, alone_grad = torch.load(tmp_path / "terms0.pt", weights_only=True)
    mp.spawn(whole_batch_terms_as_rank, args=(2, free_port(), tmp_path), nprocs=2)
    shares = [torch.load(tmp_path / f"terms{rank}.pt", weights_only=True) for rank in range(2)]
    for terms, _ in shares:
        assert {k: v.item() for k, v in terms.items()} == pytest.approx({k: v.item() for k, v in alone.items()})
    averaged = torch.cat([grad for _, grad in shares]) / 2  # each process's own rows, as DDP averages them
    torch.testing.assert_close(averaged, alone_grad)


def averaged_as_rank(rank: int, world: int, port: int, tmp) -> None:
    """Process ``rank`` of ``world`` averaging gradients of its own (``rank + 1`` times a float32, a float64 and a
    bfloat16 parameter's; a fourth without one): the gradients in ``tmp/grads{rank}.pt``."""
    from vaezoo.regularizers.collectives import average_gradients

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    params = [torch.nn.Parameter(torch.ones(shape, dtype=dtype)) for shape, dtype in
              (((2, 3), torch.float32), ((4,), torch.float64), ((3,), torch.bfloat16), ((2,), torch.float32))]
    for i, p in enumerate(params[:3]):
        p.grad = torch.arange(p.numel(), dtype=p.dtype).view_as(p) * (rank + 1) + i
    average_gradients(params)
    torch.distributed.destroy_process_group()
    torch.save([p.grad for p in params], tmp / f"grads{rank}.pt")


def test_gradients_are_averaged_over_the_processes_dtype_by_dtype_as_ddp_averages_them(tmp_path):
    """Each of 3 processes gets the mean of the three's gradients, in each parameter's dtype; a parameter without a
    gradient keeps none (DistributedDataParallel averaged them; a sum trained at 3 times the rate)."""
    mp.spawn(averaged_as_rank, args=(3, free_port(), tmp_path), nprocs=3)
    for rank in range(3):
        grads = torch.load(tmp_path / f"grads{rank}.pt", weights_only=True)
        assert grads[3] is None
        for i, (grad, dtype) in enumerate(zip(grads[:3], (torch.float32, torch.float64, torch.bfloat16))):
            assert grad.dtype == dtype
            torch.testing.assert_close(grad, torch.arange(grad.numel(), dtype=dtype).view_as(grad) * 2 + i)


def test_no_parameters_to_average_make_no_collective(monkeypatch):
    """A regularizer's training parts that no optimiser steps give every process an empty list: its agreement on
    which gradients there are was an all_reduce of a CPU tensor, which NCCL refuses, at every step."""
    from vaezoo.regularizers.collectives import average_gradients

    reduced = []
    torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    try:
        monkeypatch.setattr(torch.distributed, "all_reduce", lambda tensor, *args, **kwargs: reduced.append(tensor))
        average_gradients([])
    finally:
        torch.distributed.destroy_process_group()
    assert reduced == []


def partly_averaged_as_rank(rank: int, world: int, port: int, tmp) -> None:
    """Process ``rank`` of 2 averaging the gradients of 4 parameters: the first has one in both processes
    (``rank + 1``), the second in process 0 only (2), the third in process 1 only (4), the fourth in none; the
    gradients in ``tmp/grads{rank}.pt``."""
    from vaezoo.regularizers.collectives import average_gradients

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    params = [torch.nn.Parameter(torch.ones(2)) for _ in range(4)]
    params[0].grad = torch.full((2,), rank + 1.0)
    params[1 + rank].grad = torch.full((2,), 2.0 * (rank + 1))
    average_gradients(params)
    torch.distributed.destroy_process_group()
    torch.save([p.grad for p in params], tmp / f"grads{rank}.pt")


def test_a_gradient_only_some_processes_have_is_averaged_with_zeros_for_the_others(tmp_path):
    """As DDP averages a parameter one process's step left unused: each process reduced the gradients it had, so
    that process 0's gradient of the second parameter was averaged with process 1's of the third."""
    mp.spawn(partly_averaged_as_rank, args=(2, free_port(), tmp_path), nprocs=2)
    for rank in range(2):
        grads = torch.load(tmp_path / f"grads{rank}.pt", weights_only=True)
        assert [g.tolist() for g in grads[:3]] == [[1.5, 1.5], [1.0, 1.0], [2.0, 2.0]] and grads[3] is None


def same_weights_as_rank(rank: int, world: int, port: int, tmp) -> None:
    """Process ``rank`` of ``world`` making a net process 1 builds wider its weights as process 0's: what it said,
    or its weights, in ``tmp/said{rank}.pt``."""
    from vaezoo.regularizers.collectives import same_weights

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4 + rank), torch.nn.Linear(4 + rank, 2))
    try:
        same_weights(net)
        said = net.state_dict()
    except TrainingError as exc:
        said = str(exc)
    torch.distributed.destroy_process_group()
    torch.save(said, tmp / f"said{rank}.pt")


def test_processes_building_other_models_are_refused_by_every_process(tmp_path):
    """A process whose model is not process 0's (another plugin's version on another machine) is refused in one
    line, as DDP refused it: process 0's weights broadcast into tensors of other sizes aborted a process with
    gloo's "Received data size doesn't match expected size"."""
    mp.spawn(same_weights_as_rank, args=(2, free_port(), tmp_path), nprocs=2)
    for rank in range(2):
        assert torch.load(tmp_path / f"said{rank}.pt", weights_only=True) == (
            "process 1 of this run builds another model than process 0 (0.weight (5, 3) float32 where process 0 has "
            "0.weight (4, 3) float32); install the same versions of vaezoo and its plugins for every process")


RUNNING = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_regularizers(register):
    import os

    import torch
    from vaezoo.regularizers import Regularizer

    class Running(Regularizer):
        """Weighs its term by a mean of the codes it saw last, kept in a buffer; writes the weight it uses at each
        step to ``$USED_BY.RANK``."""

        def __init__(self):
            super().__init__()
            self.register_buffer("level", torch.ones(()))

        def forward(self, posterior, z, step):
            used = self.level.clone()
            if self.training:
                with open(f"{os.environ['USED_BY']}.{torch.distributed.get_rank()}", "a") as f:
                    f.write(f"{step} {used.item()!r}\\n")
                self.level.copy_(z.detach().abs().mean())
            return {"running": used * z.square().mean()}

    register("running", Running)
'''


@pytest.mark.slow
def test_every_process_of_a_run_uses_process_0s_buffers_as_ddp_did(data_plugin, tmp_path):
    """A regularizer's state kept in a buffer from the codes it sees (its docs say to keep state in buffers) is
    process 0's in every process at each step, as DistributedDataParallel broadcast it: each process went on with
    its own, so the processes' averaged gradients were of different objectives."""
    install_plugin(data_plugin, "running", RUNNING)
    model = make_card("tiny")["model"]
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny", model={
        **model, "regularizers": [*model["regularizers"], {"type": "running"}]}))
    port, used = free_port(), tmp_path / "used"
    env = {**child_env(tmp_path / "home", site=data_plugin), **STALE, "MASTER_PORT": str(port), "USED_BY": str(used)}
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    command = [sys.executable, "-m", "vaezoo", "train", str(path), "--out", str(tmp_path / "out"), "--no-eval",
               "--max-steps", "5"]
    said = run_ranks(command, env, 120)
    assert [code for code, _, _ in said] == [0, 0], said
    by_rank = [used.with_name(f"used.{rank}").read_text().splitlines() for rank in range(2)]
    assert len(by_rank[0]) >= 5 and len({line.split()[1] for line in by_rank[0]}) > 1  # the weight changes
    assert by_rank[1] == by_rank[0]


INTERRUPTS = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_regularizers(register):
    import os
    import signal

    import torch
    from vaezoo.regularizers import Regularizer

    class InterruptsAt(Regularizer):
        """Sends its own process SIGINT at step ``at`` of training, as a Ctrl-C reaches every process torchrun
        started."""

        def __init__(self, at: int):
            super().__init__()
            self.at = at

        def forward(self, posterior, z, step):
            if self.training and step == self.at:
                os.kill(os.getpid(), signal.SIGINT)
            return {"interrupts_at": torch.zeros(())}

    register("interrupts_at", InterruptsAt)
'''


def reports_as_rank(rank: int, world: int, ports: list[int], cards: list[dict], tmp) -> None:
    """One process of two DDP runs, the first stopped by ``--max-steps``, the second by SIGINT: whether this
    process is the one to report each (the result's, the Interrupted's) in ``tmp/reports{rank}.pt``."""
    from vaezoo.entries.schema import Card
    from vaezoo.signals import Interrupted
    from vaezoo.training.train import run_recipe

    os.environ.update(MASTER_ADDR="127.0.0.1", WORLD_SIZE=str(world), RANK=str(rank), LOCAL_RANK=str(rank))
    os.environ["MASTER_PORT"] = str(ports[0])
    [result] = run_recipe(Card.model_validate(cards[0]), tmp / "stopped", max_steps=2, evaluate=False)
    os.environ["MASTER_PORT"] = str(ports[1])
    try:
        run_recipe(Card.model_validate(cards[1]), tmp / "interrupted", evaluate=False)
        interrupted = None
    except Interrupted as stop:
        interrupted = (stop.step, stop.reports)
    torch.save([(result.step, result.reports), interrupted], tmp / f"reports{rank}.pt")


@pytest.mark.slow
def test_the_training_result_and_its_interruption_say_that_process_0_alone_reports(data_plugin, tmp_path):
    """vaezoo train prints what the library says of the process (it read RANK and WORLD_SIZE itself)."""
    install_plugin(data_plugin, "interrupts", INTERRUPTS)
    model = make_card("tiny")["model"]
    interrupting = make_card("tiny", model={**model, "regularizers": [*model["regularizers"],
                                                                      {"type": "interrupts_at", "at": 3}]})
    mp.spawn(reports_as_rank, args=(2, [free_port(), free_port()], [make_card("tiny"), interrupting], tmp_path),
             nprocs=2)
    said = [torch.load(tmp_path / f"reports{rank}.pt", weights_only=True) for rank in range(2)]
    assert said == [[(2, True), (4, True)], [(2, False), (4, False)]]


STALE = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
"""What torchrun sets in rank 0 of two: left in a shell, a lone ``vaezoo train`` reads it."""


@pytest.mark.parametrize("rank", [0, 1])
def test_a_stop_while_the_processes_meet_is_said_by_process_0_alone(data_plugin, tmp_path, monkeypatch, capsys, rank):
    """Ctrl-C reaches every process torchrun started while they wait for each other: each said where it stopped."""
    from vaezoo.signals import Interrupted
    from vaezoo.training import train

    def interrupted(device):
        raise Interrupted(signal.SIGINT)

    for name, value in {**STALE, "RANK": str(rank), "LOCAL_RANK": str(rank)}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(train, "start_run", interrupted)
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), "--no-eval")
    assert (code, out) == (130, "")
    assert err == ("stopped by SIGINT before the first checkpoint; nothing to resume\n" if rank == 0 else ""), err


@pytest.mark.parametrize(("changed", "said"), [
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' in the environment is not a whole number of at least 1"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0' in the environment is not a whole number of at least 1"),
    ({"RANK": None}, "WORLD_SIZE=2 in the environment makes this one of several processes, but RANK is not set"),
    ({"RANK": "5"}, "RANK='5' in the environment is not a whole number from 0 to 1"),
    ({"RANK": "x"}, "RANK='x' in the environment is not a whole number from 0 to 1"),
    ({"LOCAL_RANK": "q"}, "LOCAL_RANK='q' in the environment is not a whole number of at least 0"),
    ({"MASTER_ADDR": None}, "WORLD_SIZE=2 in the environment makes this one of 2 processes, but MASTER_ADDR (where "
                            "they meet) is not set"),
    ({"MASTER_PORT": "abc"}, "MASTER_PORT='abc' in the environment is not a whole number from 1 to 65535"),
])
def test_unusable_torchrun_variables_are_one_line_naming_the_variable(data_plugin, tmp_path, monkeypatch, capsys,
                                                                        changed, said):
    for name, value in {**STALE, **changed}.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), "--no-eval")
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {said}") and err.count("\n") == 1, err
    assert "unset WORLD_SIZE, RANK and the other variables torchrun sets" in err
    assert not (tmp_path / "out").exists()


def test_a_rank_left_with_a_world_of_one_still_speaks_for_its_run(data_plugin, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "3")  # a stale rank beside WORLD_SIZE=1: one process, the run's only one
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, _, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), "--no-eval", "--max-steps", "2")
    assert code == 0
    assert "stopped at step 2 of 16; continue with: " in err


def test_a_lone_process_of_a_launch_waits_for_its_peers_saying_so_and_gives_up(monkeypatch, capsys):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    monkeypatch.setattr(launch, "PEERS_TIMEOUT", 1.0)
    monkeypatch.setattr(launch, "SAY_AFTER", 0.0)
    for rank in (0, 1):  # rank 0 hosts the meeting point; rank 1 finds nobody there
        with pytest.raises(TrainingError, match=f"process {rank} of 2 waited 0.0166667 minutes at 127.0.0.1:"):
            launch.meet(launch.Launch(rank, 2, rank))
        said = capsys.readouterr().err
        assert said.count("\n") == 1 and said.startswith(f"process {rank} of 2 (RANK={rank}, WORLD_SIZE=2 in the "
                                                          f"environment) waits at 127.0.0.1:"), said


def test_a_taken_master_port_is_one_line(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
        monkeypatch.setenv("MASTER_PORT", str(taken.getsockname()[1]))
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
        with pytest.raises(TrainingError, match=r"process 0 of 2 cannot open the processes' meeting point at "
                                                r"127\.0\.0\.1:\d+ \(MASTER_ADDR, MASTER_PORT\): .*; choose a free "
                                                r"MASTER_PORT$"):
            launch.meet(launch.Launch(0, 2, 0))


@pytest.mark.slow
@pytest.mark.parametrize("torchrun", [False, True])
def test_a_stop_signal_ends_a_process_waiting_for_peers_that_never_come(data_plugin, tmp_path, torchrun):
    """torch's own meeting waits in C (half an hour; under torchrun, until torchrun kills 30 s after its SIGTERM),
    where SIGTERM and Ctrl-C do not reach Python. With ``torchrun`` the test hosts the store as torchrun's agent
    does, and the process's peer never comes (killed as it started)."""
    port = free_port()
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    env = {**child_env(tmp_path / "home", site=data_plugin), **STALE, "MASTER_PORT": str(port)}
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    agent = None
    if torchrun:
        agent = torch.distributed.TCPStore("127.0.0.1", port, 3, is_master=True, wait_for_workers=False)
        env.update(TORCHELASTIC_USE_AGENT_STORE="True")
    child = subprocess.Popen([sys.executable, "-m", "vaezoo", "train", str(path), "--out", str(tmp_path / "out")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, keys = time.monotonic() + 120, agent.num_keys() if agent else 0
        while child.poll() is None and time.monotonic() < deadline:  # until it waits for its peer
            if agent is not None:
                if agent.num_keys() > keys:  # its mark in the agent's store
                    break
            else:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
            time.sleep(0.1)
        time.sleep(0.5)
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=20)
    finally:
        child.kill()
    assert (child.returncode, out) == (128 + signal.SIGTERM, "")
    assert err.endswith("stopped by SIGTERM before the first checkpoint; nothing to resume\n"), err
    assert "Traceback" not in err and "waits at" not in err  # under torchrun a slow peer is no news
    assert not (tmp_path / "out").exists()


DIES = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_regularizers(register):
    import os
    import signal

    import torch
    from vaezoo.regularizers import Regularizer

    class DiesAt(Regularizer):
        """Kills its process (rank 1 of a DDP run) at step ``at``: a process of a run gone without a word."""

        def __init__(self, at: int):
            super().__init__()
            self.at = at

        def forward(self, posterior, z, step):
            if step == self.at and torch.distributed.is_initialized() and torch.distributed.get_rank() == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return {"dies_at": torch.zeros(())}

    register("dies_at", DiesAt)
'''


@pytest.mark.slow
def test_a_process_whose_peer_is_killed_stops_with_one_line_and_keeps_the_checkpoint(data_plugin, tmp_path):
    install_plugin(data_plugin, "dies", DIES)
    model = make_card("tiny")["model"]
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny", model={
        **model, "regularizers": [*model["regularizers"], {"type": "dies_at", "at": 6}]}))
    port, out = free_port(), tmp_path / "out"
    env = {**child_env(tmp_path / "home", site=data_plugin), **STALE, "MASTER_PORT": str(port)}
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    said = run_ranks([sys.executable, "-m", "vaezoo", "train", str(path), "--out", str(out), "--no-eval"], env, 120)
    assert [code for code, _, _ in said] == [1, -signal.SIGKILL]
    last = said[0][2].splitlines()[-1]
    assert last.startswith("error: process 0 of 2 lost touch with the other processes of this run ("), said[0][2]
    assert last.endswith(f"): one of them stopped first (its own lines say why, or it was killed); the last "
                         f"checkpoint ({out / CHECKPOINT}) is kept, to continue with --resume")
    assert "Traceback" not in said[0][2]
    assert torch.load(out / CHECKPOINT, weights_only=True)["step"] == 4


@pytest.mark.parametrize("local", ["0", "1", "2"])
@pytest.mark.parametrize(("argv", "said"), [
    (["--seeds", "0,1"], "error: torchrun starts 3 processes for 2 runs, so some would have none; run at most 2 "
                         "processes (--nproc-per-node)\n"),
    ([], "error: the recipe's batch size 8 does not split evenly over 3 processes; run a number of processes that "
         "divides it\n"),
    (["--max-steps", "x"], "vaezoo train: error: argument --max-steps: give a whole number, e.g. 10, got 'x'\n"),
])
def test_under_torchrun_an_error_every_process_meets_alike_is_said_once(data_plugin, tmp_path, monkeypatch, capsys,
                                                                       local, argv, said):
    """torchrun runs one command line in one environment in each process: the first process of the machine says
    what all of them find before they part ways, and the others stay quiet."""
    monkeypatch.setattr(launch, "_ALIKE", [True])
    for name, value in {**STALE, "WORLD_SIZE": "3", "RANK": local, "LOCAL_RANK": local,
                        "TORCHELASTIC_RUN_ID": "none"}.items():
        monkeypatch.setenv(name, value)
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), *argv)
    assert code in (1, 2) and out == ""
    assert err.endswith(said) if local == "0" else err == ""
    assert not (tmp_path / "out").exists()


def test_a_command_after_one_that_set_apart_is_said_once_again(data_plugin, tmp_path, monkeypatch, capsys):
    """An earlier command of this process (a run, in a notebook or a test) set it apart: the next command's error
    that every process meets alike is still the first process's alone to say."""
    launch.set_apart()
    for name, value in {**STALE, "WORLD_SIZE": "3", "RANK": "1", "LOCAL_RANK": "1",
                        "TORCHELASTIC_RUN_ID": "none"}.items():
        monkeypatch.setenv(name, value)
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), "--seeds", "0,1")
    assert (code, out, err) == (1, "", "")


def test_torchrun_variables_left_in_a_shell_do_not_silence_a_lone_process(data_plugin, tmp_path, monkeypatch,
                                                                          capsys):
    """LOCAL_RANK and TORCHELASTIC_RUN_ID from an earlier job, no WORLD_SIZE: the one process says its error."""
    monkeypatch.setattr(launch, "_ALIKE", [True])
    for name in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "train", str(path), "--out", str(tmp_path / "out"), "--max-steps", "x")
    assert code == 2 and out == ""
    assert err.endswith("argument --max-steps: give a whole number, e.g. 10, got 'x'\n")


@pytest.mark.slow
def test_processes_given_different_options_are_refused_by_every_process(data_plugin, tmp_path):
    path = write_toml(tmp_path / "tiny.toml", make_card("tiny"))
    env = {**child_env(tmp_path / "home", site=data_plugin), **STALE, "MASTER_PORT": str(free_port())}
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    ranks = [subprocess.Popen([sys.executable, "-m", "vaezoo", "train", str(path), "--out", str(tmp_path / "out"),
                               "--no-eval", "--max-steps", steps], env={**env, "RANK": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for rank, steps in enumerate(["4", "8"])]
    try:
        said = [rank.communicate(timeout=120) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
    assert [rank.returncode for rank in ranks] == [1, 1]
    for _, err in said:
        assert err == ("error: process 1 of this run was given another max_steps than process 0 (8, not 4); start "
                       "every process with the same command line and card\n")
    assert not (tmp_path / "out").exists()


WAITS = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    from vaezoo.data import DataInfo, Dataset

    class WaitsForPeer(Dataset):
        """tiny_blobs, whose test split (read by the finished run's evaluation) is given once the process
        PEER_PID has ended, or after a minute: an evaluation that takes as long as the other process lives."""

        def info(self, split="train"):
            return DataInfo(size=64, image_size=4, channels=1)

        def load(self, root=None, split="train"):
            import os
            import time

            import torch
            from vaezoo.data import ImageDataset

            if split == "test":
                status, deadline = f"/proc/{os.environ['PEER_PID']}/status", time.monotonic() + 60
                while time.monotonic() < deadline:
                    try:
                        with open(status) as lines:
                            if any(line.split()[:2] == ["State:", "Z"] for line in lines):
                                break  # ended, not yet reaped
                    except FileNotFoundError:
                        break
                    time.sleep(0.1)
                else:
                    raise RuntimeError("the other process waited for this one's evaluation")
            g = torch.Generator().manual_seed(0 if split == "train" else 1)
            return ImageDataset((torch.rand(64, 1, 4, 4, generator=g) > 0.5).to(torch.uint8), scale=1.0)

    register("waits_for_peer", WaitsForPeer())
'''


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="the plugin reads whether a process ended in /proc")
def test_the_other_processes_leave_once_trained_while_process_0_evaluates(data_plugin, tmp_path):
    """Process 0 alone publishes and evaluates the run, which may take longer than a collective waits (30 minutes
    with gloo, 10 with nccl): the others do not wait for it at a barrier, which would time out and have torchrun
    kill process 0 in mid-evaluation."""
    install_plugin(data_plugin, "waits", WAITS)
    card = make_card("tiny", dataset="waits_for_peer")
    card["train"]["data"] = {"name": "waits_for_peer"}
    path, out = write_toml(tmp_path / "tiny.toml", card), tmp_path / "out"
    env = {**child_env(tmp_path / "home", site=data_plugin), **STALE, "MASTER_PORT": str(free_port())}
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    command = [sys.executable, "-m", "vaezoo", "train", str(path), "--out", str(out)]
    other = subprocess.Popen(command, env={**env, "RANK": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    first = subprocess.Popen(command, env={**env, "PEER_PID": str(other.pid)}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        said = [rank.communicate(timeout=180) for rank in (first, other)]
    finally:
        for rank in (first, other):
            rank.kill()
    assert (first.returncode, other.returncode) == (0, 0), said
    assert said[0][0] == f"{out / 'tiny-blobs-run.toml'}\n"
    assert "warning" not in said[0][1] and "measured reconstruction" in said[0][1], said[0][1]
