"""A checkpoint's optimiser state is checked as its weights are: shapes, dtypes, layout (stride-0 views included)
and finiteness of every tensor, before the first step, in one line naming the checkpoint
(``vaezoo.entries.checkpoints.check_optimizer_state``). ``torch.optim.Optimizer.load_state_dict`` checks none of
these: a wrong shape printed "resuming at step N" and then ended in a RuntimeError traceback in the first step."""

from __future__ import annotations

import pytest
import torch
from kit import assert_one_line_error, cli, make_card, write_toml

from vaezoo.entries.schema import Card
from vaezoo.errors import TrainingError
from vaezoo.training.train import CHECKPOINT, train


def _exp_avg_of_first(state: dict) -> tuple[int, torch.Tensor]:
    index = sorted(state["optimizer"]["state"])[0]
    return index, state["optimizer"]["state"][index]["exp_avg"]


def _wrong_shape(t):
    return torch.zeros(t.numel() + 1)


def _stride_zero(t):
    return torch.zeros(1).expand(t.shape)


HOSTILE = {
    "wrong shape": (_wrong_shape, "has shape"),
    "stride-0 view": (_stride_zero, "spans more bytes than it stores (a stride-0 or overlapping view)"),
    "int64": (lambda t: torch.zeros(t.shape, dtype=torch.int64), "is torch.int64, not floating point"),
    "complex": (lambda t: torch.zeros(t.shape, dtype=torch.complex64), "is torch.complex64, not floating point"),
    "NaN": (lambda t: torch.full(t.shape, float("nan")), "holds NaN or infinite values"),
    "inf": (lambda t: torch.full(t.shape, float("inf")), "holds NaN or infinite values"),
    "sparse": (lambda t: torch.zeros(t.shape).to_sparse(), "is not a dense tensor in CPU memory"),
    "meta": (lambda t: torch.zeros(t.shape, device="meta"), "is not a dense tensor in CPU memory"),
}


@pytest.fixture
def finished_run(data_plugin, tmp_path):
    """A finished run of the tiny card (2 epochs), whose checkpoint a longer run resumes."""
    data = make_card("tiny")
    out = tmp_path / "run"
    train(Card.model_validate(data), out)
    return data, out


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE)
def test_a_hostile_adam_state_is_one_line_before_the_first_step(finished_run, hostile):
    data, out = finished_run
    make, said = hostile
    state = torch.load(out / CHECKPOINT, weights_only=True)
    index, exp_avg = _exp_avg_of_first(state)
    state["optimizer"]["state"][index]["exp_avg"] = make(exp_avg)
    torch.save(state, out / CHECKPOINT)
    longer = Card.model_validate({**data, "train": {**data["train"], "epochs": 3}})
    with pytest.raises(TrainingError) as err:
        train(longer, out, resume=True)
    text = str(err.value)
    assert "\n" not in text and f"the optimiser state in checkpoint {out / CHECKPOINT} cannot be resumed" in text
    assert f"parameter {index} " in text and "'exp_avg'" in text and said in text


def test_a_wrong_shape_through_the_cli_is_one_line_and_no_traceback(finished_run, tmp_path, capsys):
    data, out = finished_run
    state = torch.load(out / CHECKPOINT, weights_only=True)
    index, exp_avg = _exp_avg_of_first(state)
    state["optimizer"]["state"][index]["exp_avg_sq"] = _stride_zero(exp_avg)
    torch.save(state, out / CHECKPOINT)
    card = write_toml(tmp_path / "longer.toml", {**data, "train": {**data["train"], "epochs": 3}})
    code, _, err = cli(capsys, "train", str(card), "--out", str(out), "--resume")
    assert code == 1 and "Traceback" not in err and "RuntimeError" not in err
    assert_one_line_error(err, str(out / CHECKPOINT), "'exp_avg_sq' spans more bytes than it stores")


def test_a_good_state_and_a_step_count_resume(finished_run):
    """Control: the state as written (its step a scalar tensor) resumes, also as float64 moments (cast by torch)."""
    data, out = finished_run
    state = torch.load(out / CHECKPOINT, weights_only=True)
    index, exp_avg = _exp_avg_of_first(state)
    state["optimizer"]["state"][index]["exp_avg"] = exp_avg.double()
    torch.save(state, out / CHECKPOINT)
    longer = Card.model_validate({**data, "train": {**data["train"], "epochs": 3}})
    train(longer, out, resume=True)
