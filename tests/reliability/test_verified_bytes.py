"""The bytes verified are the bytes loaded: a weights file swapped after its sha256 is never what loads."""

from __future__ import annotations

import builtins
import hashlib
import os
import shutil
import threading
import types

import pytest
import torch
from kit import make_card, save_model_weights, weights_entry, write_toml
from safetensors.torch import load_file

import vaezoo
from vaezoo.errors import WeightsError
from vaezoo.store import checksums

pytestmark = pytest.mark.usefixtures("data_plugin")


def _entry(cards_dir, tmp_path):
    """A tiny card with its verified weights, and a file of the same size and names that fails its sha256."""
    card = make_card("tiny")
    good = save_model_weights(cards_dir / "tiny.safetensors", card, seed=0)
    bad = save_model_weights(tmp_path / "bad.safetensors", card, seed=1)
    assert good.stat().st_size == bad.stat().st_size
    write_toml(cards_dir / "tiny.toml", {**card, "weights": weights_entry(good)})
    return good, bad, {k: v.clone() for k, v in load_file(good).items()}


def _same(model, state) -> bool:
    return all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


def test_swap_between_hash_and_load_loads_the_verified_bytes(cards_dir, tmp_path, monkeypatch):
    """The file is replaced the moment its digest is taken: what loads is still the file that was hashed."""
    good, bad, state = _entry(cards_dir, tmp_path)
    swapped = []

    class SwappingDigest:
        def __init__(self, *args):
            self.inner = hashlib.sha256(*args)

        def update(self, data):
            self.inner.update(data)

        def hexdigest(self):
            shutil.copyfile(bad, good)  # another process writes the folder right after the check
            swapped.append(True)
            return self.inner.hexdigest()

    monkeypatch.setattr(checksums, "hashlib", types.SimpleNamespace(sha256=SwappingDigest))
    model = vaezoo.load("tiny-blobs")
    assert swapped and good.read_bytes() == bad.read_bytes()
    assert _same(model, state)


def test_racing_writer_never_gets_unverified_weights_loaded(cards_dir, tmp_path):
    """A thread swaps the verified file and a tampered one as fast as it can while 60 loads run: each load
    returns the verified weights or refuses with a WeightsError, never the tampered ones."""
    good, bad, state = _entry(cards_dir, tmp_path)
    copies = {name: tmp_path / name for name in ("good.copy", "bad.copy")}
    shutil.copyfile(good, copies["good.copy"])
    shutil.copyfile(bad, copies["bad.copy"])
    stop = threading.Event()

    def swap():
        i = 0
        while not stop.is_set():
            source = copies["bad.copy" if i % 2 else "good.copy"]
            tmp = good.with_suffix(".swap")
            shutil.copyfile(source, tmp)
            os.replace(tmp, good)
            i += 1

    writer = threading.Thread(target=swap)
    writer.start()
    outcomes = {"loaded": 0, "refused": 0}
    try:
        for _ in range(60):
            try:
                model = vaezoo.load("tiny-blobs")
            except WeightsError as exc:
                assert "does not match the card's" in str(exc)
                outcomes["refused"] += 1
            else:
                assert _same(model, state), "a load returned weights that failed verification"
                outcomes["loaded"] += 1
    finally:
        stop.set()
        writer.join()
    assert outcomes["loaded"] + outcomes["refused"] == 60


def test_weights_file_is_read_at_most_one_byte_past_the_card_size(tmp_path):
    """A file larger than the card says is refused after reading size + 1 bytes, not all of it."""
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as f:
        f.truncate(1 << 40)  # a 1 TiB sparse file
    entry = types.SimpleNamespace(size=10, sha256="0" * 64)
    with pytest.raises(WeightsError, match="size is more than the card's 10 bytes"):
        checksums.read_verified(path, entry)


@pytest.mark.parametrize("kind", ["fifo", "loop"])
def test_weights_path_that_is_not_a_regular_file(tmp_path, kind):
    """A FIFO is refused without blocking; a symlink loop is one WeightsError line."""
    path = tmp_path / "w.safetensors"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink(path, path)
    entry = types.SimpleNamespace(size=10, sha256="0" * 64)
    with pytest.raises(WeightsError) as err:
        checksums.read_verified(path, entry)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_symlink_loop_as_weights_file_fails_only_its_card(cards_dir, tmp_path, capsys):
    """``vaezoo verify`` reports the card whose weights file is a symlink loop as FAILED and checks the others."""
    from kit import cli

    _entry(cards_dir, tmp_path)
    looped = make_card("tiny", name="looped")
    os.symlink(cards_dir / "looped.safetensors", cards_dir / "looped.safetensors")
    write_toml(cards_dir / "looped.toml", {**looped, "weights": {"file": "looped.safetensors", "sha256": "0" * 64,
                                                                  "size": 10}})
    code, out, err = cli(capsys, "verify", "tiny-blobs", "looped")
    assert code == 1
    assert "tiny-blobs: ok" in out and "looped: FAILED" in out and "Traceback" not in err


@pytest.mark.parametrize("named", [True, False], ids=["by-name", "by-path"])
def test_a_load_reads_its_card_once_and_reads_and_hashes_its_weights_once(cards_dir, tmp_path, monkeypatch, named):
    """The bytes are verified where they enter, once: a load opens the card file once, the weights file once, and
    takes one sha256."""
    good, _, state = _entry(cards_dir, tmp_path)
    card = cards_dir / "tiny.toml"
    digests, opened = [], []

    def counting(opener):
        def opens(path, *args, **kwargs):
            if isinstance(path, (str, os.PathLike)) and os.fspath(path) in (os.fspath(good), os.fspath(card)):
                opened.append(os.path.basename(path))
            return opener(path, *args, **kwargs)
        return opens

    def counting_sha256(*args):
        digests.append(args)
        return hashlib.sha256(*args)

    monkeypatch.setattr(checksums, "hashlib", types.SimpleNamespace(sha256=counting_sha256))
    monkeypatch.setattr(os, "open", counting(os.open))
    monkeypatch.setattr(builtins, "open", counting(builtins.open))
    model = vaezoo.load("tiny-blobs" if named else card)
    assert _same(model, state)
    assert (sorted(opened), len(digests)) == (["tiny.safetensors", "tiny.toml"], 1)
