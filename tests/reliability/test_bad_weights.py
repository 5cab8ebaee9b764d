"""Bad weights files: refused with one line naming the file and the problem, never unpickled, never loaded."""

from __future__ import annotations

import json
import pathlib
import pickle
import struct

import pytest
import torch
from kit import assert_one_line_error, cli, make_card, save_model_weights, weights_entry, write_toml

import vaezoo
from vaezoo.errors import WeightsError

pytestmark = pytest.mark.usefixtures("data_plugin")  # building the tiny card's model asks for its dataset


class MarkerBomb:
    """Unpickling this creates the file ``marker``: proof that a file was unpickled."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def _card_for(cards_dir, payload: pathlib.Path, **card_changes) -> None:
    """A tiny card whose weights entry hashes ``payload`` exactly (so only its contents can be refused)."""
    card = make_card("tiny", weights=weights_entry(payload, file=payload.name))
    card["model"].update(card_changes)
    write_toml(cards_dir / "tiny.toml", card)


def _refused(capsys, *fragments: str) -> None:
    """vaezoo.load and ``vaezoo eval`` both refuse the card's weights with one line holding ``fragments``."""
    with pytest.raises(WeightsError) as err:
        vaezoo.load("tiny-blobs")
    assert "\n" not in str(err.value)
    for fragment in fragments:
        assert fragment in str(err.value)
    code, out, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1 and out == ""
    assert_one_line_error(stderr, *fragments)


def test_truncated_file(cards_dir, capsys):
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    _card_for(cards_dir, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _refused(capsys, str(path), "truncated")


def test_truncated_file_whose_card_matches_it(cards_dir, capsys):
    """Even hashed correctly, a cut safetensors file is refused when read."""
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    path.write_bytes(path.read_bytes()[:-7])
    _card_for(cards_dir, path)
    _refused(capsys, str(path), "not a readable safetensors file")


def test_wrong_sha256(cards_dir, capsys):
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    _card_for(cards_dir, path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, one bit pattern changed in the last tensor
    path.write_bytes(bytes(data))
    _refused(capsys, str(path), "does not match the card's", "refusing")


def test_right_hash_wrong_tensor_names(cards_dir, capsys):
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"),
                              edit=lambda state: state.update({"head.weights": state.pop("head.weight")}))
    _card_for(cards_dir, path)
    _refused(capsys, "missing keys ['head.weight']", "unexpected keys ['head.weights']")


def test_right_hash_wrong_shapes(cards_dir, capsys):
    """Weights of a 2-d latent on a card that asks for a 3-d one."""
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    _card_for(cards_dir, path, latent={"type": "gaussian", "dim": 3})
    _refused(capsys, "wrong shapes", "head.weight: (4, 8) != (6, 8)")


@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_pickle_renamed_safetensors_is_never_unpickled(cards_dir, tmp_path, capsys, writer):
    marker = tmp_path / "unpickled-marker"
    probe = tmp_path / "probe-marker"
    pickle.loads(pickle.dumps(MarkerBomb(probe)))
    assert probe.exists(), "the bomb must work for the test to mean anything"

    path = cards_dir / "tiny.safetensors"
    if writer == "pickle":
        path.write_bytes(pickle.dumps({"head.weight": MarkerBomb(marker)}))
    else:
        torch.save({"head.weight": MarkerBomb(marker)}, path)
    _card_for(cards_dir, path)
    _refused(capsys, str(path), "not a readable safetensors file")
    assert not marker.exists()


def _raw_safetensors(header_length: int, header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", header_length) + header + data


@pytest.mark.parametrize("case", ["header length 2**63", "header length past the end", "tensor of 2**50 bytes",
                                  "offsets past the end"])
def test_header_claiming_a_huge_size(cards_dir, capsys, case):
    """Hand-made headers whose sizes do not fit the file are refused before any allocation."""
    tensor = {"dtype": "F32", "shape": [4, 8], "data_offsets": [0, 128]}
    if case == "header length 2**63":
        raw = _raw_safetensors(2**63, b"{}")
    elif case == "header length past the end":
        raw = _raw_safetensors(10**6, b'{"a": 1}')
    elif case == "tensor of 2**50 bytes":
        tensor = {"dtype": "F32", "shape": [2**48], "data_offsets": [0, 2**50]}
        header = json.dumps({"head.weight": tensor}).encode()
        raw = _raw_safetensors(len(header), header, bytes(128))
    else:
        tensor["data_offsets"] = [10**12, 10**12 + 128]
        header = json.dumps({"head.weight": tensor}).encode()
        raw = _raw_safetensors(len(header), header, bytes(128))
    path = cards_dir / "tiny.safetensors"
    path.write_bytes(raw)
    _card_for(cards_dir, path)
    _refused(capsys, str(path), "not a readable safetensors file")


def _set(name: str, value):
    """An ``edit`` for :func:`kit.save_model_weights`: ``value(tensor)`` replaces the tensor ``name``."""
    def edit(state):
        state[name] = value(state[name])
    return edit


def _poison(name: str, number: float):
    """An ``edit`` writing ``number`` (NaN, inf) into one element of the tensor ``name``."""
    def edit(state):
        state[name] = state[name].clone()
        state[name].view(-1)[3] = number
    return edit


@pytest.mark.parametrize("edit, fragments", [
    (_set("head.weight", lambda t: (t * 100).to(torch.int64)),
     ["not floating point ['head.weight: int64 where the model has float32']"]),
    (_set("head.bias", lambda t: t > 0), ["not floating point ['head.bias: bool where the model has float32']"]),
    (_set("head.bias", lambda t: t.to(torch.uint8)), ["head.bias: uint8 where the model has float32"]),
    (_poison("head.weight", float("nan")), ["NaN or inf values in ['head.weight']"]),
    (_poison("head.bias", float("inf")), ["NaN or inf values in ['head.bias']"]),
    (_poison("head.bias", -float("inf")), ["NaN or inf values in ['head.bias']"]),
    (lambda state: [_poison("head.weight", float("nan"))(state), _set("head.bias", lambda t: t > 0)(state)],
     ["not floating point ['head.bias: bool where", "NaN or inf values in ['head.weight']"]),
], ids=["int64", "bool", "uint8", "nan", "inf", "-inf", "nan and bool"])
def test_right_hash_values_that_cannot_be_the_models(cards_dir, capsys, edit, fragments):
    """The card's sha256 matches the file exactly; the tensors' types or values are what is wrong."""
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"), edit=edit)
    _card_for(cards_dir, path)
    _refused(capsys, "weights of 'tiny-blobs' cannot be the model's values", *fragments, "refusing to load them")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_right_hash_other_floating_point_types_load(cards_dir, dtype):
    """Floating-point weights of another precision are values the model can take: they load."""
    path = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"),
                             edit=lambda state: state.update({k: v.to(dtype) for k, v in state.items()}))
    _card_for(cards_dir, path)
    model = vaezoo.load("tiny-blobs")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
