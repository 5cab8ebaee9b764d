"""Free-form card tables ([model], dataset and optimiser options, seeds) are checked when a card is read or
assembled: one line naming the field, before any value reaches a builder, a dataset or torch.optim."""

from __future__ import annotations

import inspect
from typing import Annotated, Literal

import numpy as np
import pytest
import torch
from annotated_types import Ge, Gt, Interval
from kit import cli, make_card, write_card, write_toml

import vaezoo
from vaezoo import assemble, devices
from vaezoo.context import check_arguments
from vaezoo.entries.catalog import parse_card, scan
from vaezoo.entries.schema import OPTIMIZER_OPTIONS, SEED_LIMIT, Card
from vaezoo.errors import CardError, DataError


def _refused(tmp_path, data, field, *fragments):
    path = write_toml(tmp_path / f"{data['name']}.toml", data)
    with pytest.raises(CardError) as err:
        parse_card(path)
    text = str(err.value)
    assert text.startswith(f"{path}: field '{field}': ") and "\n" not in text
    for fragment in fragments:
        assert fragment in text
    return text


def test_a_type_inside_model_is_refused_so_list_never_shows_it(cards, tmp_path, capsys):
    """``type = "vae"`` in the [model] of a jointvae card would build a plain VAE: the card is skipped."""
    data = make_card("toy", name="stray-type")
    data["model"]["type"] = "vae"
    _refused(tmp_path, data, "model", "[model] holds type = 'vae'", "'jointvae'", "remove 'type'")
    write_card(cards, data)
    code, out, _ = cli(capsys, "list", "--arch", "jointvae")
    assert "stray-type" not in out
    assert [s.name for s in scan().skipped] == ["stray-type"]


@pytest.mark.parametrize("size", [0, -1, "32", 2000, True, 32.0])
def test_dataset_image_size_out_of_range_or_not_a_whole_number(tmp_path, size):
    data = make_card(name="toy-mnist")
    data["train"]["data"]["options"]["image_size"] = size
    _refused(tmp_path, data, "train.data.options", "image_size must be a whole number from 1 to 1024",
             f"got {size!r}")


@pytest.mark.parametrize("options, fragment", [
    ({"betas": "x"}, "Adam option 'betas'"),
    ({"betas": [0.9, 1.5]}, "Adam option 'betas.1'"),
    ({"betas": [0.9]}, "Adam option 'betas'"),
    ({"weight_decay": -0.1}, "Adam option 'weight_decay': Input should be greater than or equal to 0"),
    ({"eps": "tiny"}, "Adam option 'eps'"),
    ({"amsgrad": "yes"}, "Adam option 'amsgrad'"),
    ({"momentum": 0.9}, "Adam takes no option 'momentum'; it takes weight_decay, maximize, betas, eps, amsgrad"),
    ({"foreach": True}, "Adam takes no option 'foreach'"),
])
def test_optimizer_options_are_checked_against_what_torch_optim_takes(tmp_path, options, fragment):
    data = make_card(name="toy-mnist")
    data["train"]["optimizer"]["options"] = options
    _refused(tmp_path, data, "train.optimizer", fragment)


def test_sgd_nesterov_needs_momentum(tmp_path):
    data = make_card(name="toy-mnist")
    data["train"]["optimizer"] = {"name": "SGD", "lr": 0.1, "options": {"nesterov": True}}
    _refused(tmp_path, data, "train.optimizer", "nesterov needs momentum > 0 and dampening 0")


def test_every_optimizer_option_a_card_may_set_is_one_torch_optim_takes():
    """The options table cannot drift from torch: each key is a keyword of the torch.optim class, and each
    default is torch's."""
    for name, options in OPTIMIZER_OPTIONS.items():
        params = inspect.signature(getattr(torch.optim, name)).parameters
        for key, field in options.model_fields.items():
            assert key in params, f"{name} takes no {key}"
            default = params[key].default
            assert (list(default) if isinstance(default, tuple) else default) == field.default, (name, key)


def test_valid_optimizer_options_are_kept_as_written(tmp_path):
    data = make_card(name="toy-mnist")
    data["train"]["optimizer"] = {"name": "AdamW", "lr": 1e-3, "options": {"betas": [0.5, 0.9], "weight_decay": 0}}
    card = parse_card(write_toml(tmp_path / "toy-mnist.toml", data))
    assert card.train.optimizer.options == {"betas": [0.5, 0.9], "weight_decay": 0}


@pytest.mark.parametrize("where, place, value", [
    ("train.seed", lambda c, v: c["train"].update(seed=v), 2**64),
    ("train.seed", lambda c, v: c["train"].update(seed=v), SEED_LIMIT),
    ("train.seed", lambda c, v: c["train"].update(seed=v), -1),
    ("train.seed", lambda c, v: c["train"].update(seed=v), "0"),
    ("train.data.options", lambda c, v: c["train"]["data"]["options"].update(subset_seed=v), 2**64),
    ("model", lambda c, v: c["model"]["latent"].update(seed=v), 2**70),
    ("metrics.mig.parameters", lambda c, v: c.update(metrics={"mig": {
        "value": 0.1, "command": "x", "vaezoo_version": "0.1.0", "parameters": {"seed": v}}}), 2**64),
])
def test_seeds_of_2_64_and_beyond_are_refused_in_every_table(tmp_path, where, place, value):
    data = make_card(name="toy-mnist")
    place(data, value)
    _refused(tmp_path, data, where, f"{value!r} is not a seed: give a whole number from 0 to 2^63 - 1")


def test_largest_seed_is_taken(tmp_path):
    data = make_card(name="toy-mnist", train={"seed": SEED_LIMIT - 1})
    assert parse_card(write_toml(tmp_path / "toy-mnist.toml", data)).train.seed == SEED_LIMIT - 1


@pytest.mark.parametrize("argv", [["show", "tiny-blobs", "sample", "--seed", str(2**64)],
                                  ["show", "tiny-blobs", "sample", "--seed", "-1"],
                                  ["gallery", "out", "--seed", str(2**64)]])
def test_seed_options_of_the_cli_refuse_seeds_of_2_64(capsys, argv):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert "give a whole number from 0 to 2^63 - 1 as the seed" in err and "Traceback" not in err


@pytest.mark.usefixtures("data_plugin")
@pytest.mark.parametrize("change, fragment", [
    (lambda m: m["regularizers"][0].update(beta="high"), "regularizer 'beta': beta = 'high' is not a number (float)"),
    (lambda m: m["encoder"].update(hidden="8"), "net 'mlp_encoder': hidden = '8' is not"),
    (lambda m: m["latent"].update(dim=2.5), "latent family 'gaussian': dim = 2.5 is not a whole number (int)"),
    (lambda m: m["regularizers"][0].update(weight=1), "regularizer 'beta' takes no argument 'weight'"),
    (lambda m: m["regularizers"].__setitem__(0, {"type": "dipvae", "dip_type": "iii"}),
     "regularizer 'dipvae': dip_type = 'iii' must be one of 'i', 'ii'"),
])
def test_part_arguments_are_checked_against_the_signature(cards_dir, capsys, change, fragment):
    data = make_card("tiny")
    change(data["model"])
    write_card(cards_dir, data)
    with pytest.raises(CardError, match=None) as err:
        vaezoo.build_model("tiny-blobs")
    assert fragment in str(err.value) and "\n" not in str(err.value)
    code, out, stderr = cli(capsys, "show", "tiny-blobs", "sample", "-o", str(cards_dir / "x.png"))
    assert code == 1 and fragment in stderr.strip().splitlines()[-1] and "Traceback" not in stderr


def test_dataset_options_are_checked_against_the_dataset_signature():
    card = Card.model_validate(make_card("mnist", name="d", train={"data": {"name": "dsprites",
                                                                           "options": {"source": 3}}}))
    with pytest.raises(DataError, match="source = 3 is not a string"):
        assemble.data_info(card)


def test_a_dataset_bigger_than_memory_is_refused_before_loading(monkeypatch):
    """MNIST at 1024x1024 asks for 59 GiB: refused from its DataInfo, before any file is read."""
    monkeypatch.setattr(devices, "physical_memory", lambda: 8 * 2**30)
    card = Card.model_validate(make_card("mnist", name="d"))
    big = card.model_copy(update={"train": card.train.model_copy(update={"data": card.train.data.model_copy(
        update={"options": {"image_size": 1024}})})})
    with pytest.raises(DataError, match=r"would hold 58\.6 GiB of images, more than this machine's 8\.0 GiB"):
        assemble.data_info(big)
    assert assemble.data_info(card).image_size == 16



def _bounded(count: Annotated[int, Interval(ge=1, le=100)] = 1, rate: Annotated[float, Gt(0)] = 1.0,
             floor: Annotated[float, Ge(-1), "unrelated metadata"] = 0.0) -> None:
    """A part with bounded arguments (at module level: the annotations are resolved in its globals)."""


def _flagged(on: bool = False, off: bool = True) -> None:
    """A part with flags."""


def _chosen(kind: Literal["i", "ii"] = "i", size: Literal[1, 2] | None = None) -> None:
    """A part with settings that take one of a few values."""


def test_a_setting_that_takes_one_of_a_few_values_names_them():
    # refused as "kind = 'iii' is not of type Literal['i', 'ii']", the annotation's spelling
    assert check_arguments(_chosen, {"kind": "ii", "size": None}, "part 'p'") == {"kind": "ii", "size": None}
    with pytest.raises(ValueError, match=r"^part 'p': kind = 'iii' must be one of 'i', 'ii'$"):
        check_arguments(_chosen, {"kind": "iii"}, "part 'p'")
    with pytest.raises(ValueError, match=r"^part 'p': size = 3 is not one of 1, 2 or None$"):
        check_arguments(_chosen, {"size": 3}, "part 'p'")


def test_bounds_an_annotation_states_are_checked_with_the_type():
    check_arguments(_bounded, {"count": 100, "rate": 1e-9, "floor": -1}, "part 'p'")
    refusals = []
    for arguments in ({"count": 0}, {"count": 101}, {"rate": 0.0}, {"floor": -1.5}, {"count": 2.0}):
        with pytest.raises(ValueError) as refusal:
            check_arguments(_bounded, arguments, "part 'p'")
        refusals.append(str(refusal.value))
    assert refusals == [
        "part 'p': count = 0 is not a whole number (int), at least 1 and at most 100",
        "part 'p': count = 101 is not a whole number (int), at least 1 and at most 100",
        "part 'p': rate = 0.0 is not a number (float), greater than 0",
        "part 'p': floor = -1.5 is not a number (float), at least -1",
        "part 'p': count = 2.0 is not a whole number (int), at least 1 and at most 100"]


def test_numpy_and_torch_numbers_are_taken_as_the_python_numbers_they_are_and_bools_are_not():
    """np.float32(0.05) and torch.tensor(0.05) were refused as no number (float) where 0.05 is taken (FactorVAE's
    prune_std); np.int64(2) as no whole number, np.True_ as no bool (train's resume); a card written from them holds
    plain values."""
    given = {"count": np.int64(7), "rate": np.float32(0.5), "floor": torch.tensor(-1.0, dtype=torch.float64)}
    checked = check_arguments(_bounded, given, "part 'p'")
    assert checked == {"count": 7, "rate": 0.5, "floor": -1.0}
    assert [type(v) for v in checked.values()] == [int, float, float]
    assert type(check_arguments(_bounded, {"rate": np.float64(2.0)}, "part 'p'")["rate"]) is float
    assert check_arguments(_bounded, {"rate": torch.tensor(3)}, "part 'p'") == {"rate": 3}  # an int, as 3 is taken
    flags = check_arguments(_flagged, {"on": np.True_, "off": torch.tensor(False)}, "part 'p'")
    assert flags == {"on": True, "off": False} and [type(v) for v in flags.values()] == [bool, bool]
    for arguments in ({"on": 1}, {"on": np.int64(1)}, {"on": torch.tensor([True])}, {"on": "true"}):
        with pytest.raises(ValueError, match=r"^part 'p': on = .* is not true or false \(bool\)$"):
            check_arguments(_flagged, arguments, "part 'p'")
    for arguments in ({"rate": np.True_}, {"rate": torch.tensor([0.5])}, {"rate": np.float32(0.0)},
                      {"count": torch.tensor(True)}, {"count": np.float32(2.0)}):
        with pytest.raises(ValueError, match=r"^part 'p': \w+ = .* is not a (whole )?number"):
            check_arguments(_bounded, arguments, "part 'p'")
