"""Weights: a tiny zoo entry made here exercises the whole path, locally and from a server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from kit import make_card, read_metadata, serve_entry, weights_entry, write_card, write_entry

import vaezoo
from vaezoo.assemble import build_model
from vaezoo.store.weights import load_weights
from vaezoo.cli import main
from vaezoo.entries.catalog import get_card
from vaezoo.errors import WeightsError
from vaezoo.store.downloads import cache_dir, check_url
from vaezoo.store.weights import read_safetensors, save_weights

WEIGHTS_PATH = "/x.safetensors"


@pytest.fixture
def cards(cards_dir, monkeypatch) -> Path:
    """A card directory of the test's own on ``VAEZOO_CARDS_PATH``, downloads allowed."""
    monkeypatch.delenv("VAEZOO_OFFLINE", raising=False)
    return cards_dir


@pytest.fixture
def remote_entry(cards, server):
    """A tiny entry whose card points at the local server, which alone has its weights; returns them."""
    return serve_entry(server, WEIGHTS_PATH, cards, make_card(name="tiny-remote"))[1]


def assert_same_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    got = model.state_dict()
    assert got.keys() == state.keys()
    assert all(torch.equal(got[k], state[k]) for k in state)


def cache_contents() -> list[str]:
    directory = cache_dir()
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".lock")) if directory.exists() else []


# --- weights beside the card -------------------------------------------------------------------------------------

def test_tiny_entry_loads_pretrained_in_eval_mode(cards):
    _, state, weights = write_entry(cards, make_card(name="tiny-local"))
    model = vaezoo.load("tiny-local")
    assert not model.training and model.card.name == "tiny-local"
    assert_same_state(model, state)
    x = torch.rand(3, 1, 16, 16)
    assert torch.isfinite(model.reconstruct(x)).all()
    assert read_metadata(weights) == {"name": "tiny-local"}

    wide = vaezoo.load("tiny-local", dtype=torch.float64)
    assert {p.dtype for p in wide.parameters()} == {torch.float64}
    fresh = vaezoo.load("tiny-local", pretrained=False)
    assert not all(torch.equal(fresh.state_dict()[k], v) for k, v in state.items())
    assert cache_contents() == []  # a file beside its card loads in place


def test_loading_weights_leaves_torch_random_stream_as_it_was(cards):
    write_entry(cards, make_card(name="tiny-local"))
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    vaezoo.load("tiny-local")
    assert torch.equal(torch.rand(4), expected)

    torch.manual_seed(123)  # a fresh model draws its initial weights from it, reproducibly
    first = vaezoo.load("tiny-local", pretrained=False).state_dict()
    torch.manual_seed(123)
    again = vaezoo.load("tiny-local", pretrained=False).state_dict()
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not torch.equal(torch.rand(4), expected)


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "does not match the card's"),
    (lambda data: data[:-10], "the file is truncated"),
])
def test_damaged_local_weights_are_refused(cards, damage, message):
    _, _, weights = write_entry(cards, make_card(name="tiny-local"))
    weights.write_bytes(damage(weights.read_bytes()))
    with pytest.raises(WeightsError, match=message):
        vaezoo.load("tiny-local")


def test_weights_outside_the_card_directory_or_missing_are_refused(cards, tmp_path):
    outside = tmp_path / "elsewhere.safetensors"
    save_weights({"w": torch.zeros(2)}, outside)
    write_card(cards, make_card(name="tiny-escape", weights=weights_entry(outside, file="../elsewhere.safetensors")))
    with pytest.raises(WeightsError, match="outside the card's directory"):
        vaezoo.load("tiny-escape")
    write_card(cards, make_card(name="tiny-missing", weights=weights_entry(outside, file="gone.safetensors")))
    with pytest.raises(WeightsError, match="does not exist; put the card's safetensors file there, then check it "
                                           "with: vaezoo verify tiny-missing"):
        vaezoo.load("tiny-missing")
    write_card(cards, make_card(name="tiny-none"))
    with pytest.raises(WeightsError,
                       match=r"has no weights; train it with 'vaezoo train' \(in Python, pretrained=False"):
        vaezoo.load("tiny-none")


def test_a_pickle_is_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return Path.touch, (marker,)

    evil = tmp_path / "evil.safetensors"
    evil.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(WeightsError, match="is not a readable safetensors file"):
        read_safetensors(evil)
    assert not marker.exists()


def test_weights_that_do_not_fit_the_model_are_listed(cards):
    write_entry(cards, make_card(name="tiny-local"))
    model = build_model(get_card("tiny-local"))
    state = dict(model.state_dict())
    first = next(iter(state))
    state["stray.weight"] = state.pop(first)
    state["head.bias"] = torch.zeros(99)
    with pytest.raises(WeightsError) as info:
        load_weights(model, state, "test weights")
    text = str(info.value)
    assert f"missing keys ['{first}']" in text and "unexpected keys ['stray.weight']" in text
    assert "head.bias: (99,) !=" in text
    state.update({f"stray.{i:05d}": torch.zeros(1) for i in range(20_000)})  # a 449 kB line before
    with pytest.raises(WeightsError, match=r"unexpected keys \['stray.00000', .* 'stray.00009'\] and 19,991 more"):
        load_weights(model, state, "test weights")


def test_save_weights_is_atomic_and_keeps_metadata(tmp_path):
    path = tmp_path / "w.safetensors"
    save_weights({"a": torch.arange(4.0)}, path, metadata={"step": 12, "note": "hi"})
    assert read_metadata(path) == {"step": "12", "note": "hi"}
    assert torch.equal(read_safetensors(path)["a"], torch.arange(4.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.safetensors"]


# --- weights from a URL ------------------------------------------------------------------------------------------

def test_download_then_load_from_the_cache(remote_entry, server, capsys):
    model = vaezoo.load("tiny-remote")
    assert_same_state(model, remote_entry)
    sha = get_card("tiny-remote").weights.sha256
    assert cache_contents() == [f"{sha}.safetensors"]
    assert server.gets == {WEIGHTS_PATH: 1}

    assert_same_state(vaezoo.load("tiny-remote"), remote_entry)
    assert server.gets == {WEIGHTS_PATH: 1}  # the second load reads the cache

    assert main(["verify", "tiny-remote", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"name": "tiny-remote", "status": "ok", "detail": str(cache_dir() / f"{sha}.safetensors")}]


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_connection_cut_mid_file_leaves_no_partial_file(remote_entry, server, framing):
    server.cut_after = len(server.files[WEIGHTS_PATH]) // 2
    server.framing = framing
    with pytest.raises(WeightsError, match="failed after 3 attempts"):
        vaezoo.load("tiny-remote")
    assert cache_contents() == []
    assert server.gets == {WEIGHTS_PATH: 3}

    server.cut_after = None  # the next attempt starts afresh and succeeds
    assert_same_state(vaezoo.load("tiny-remote"), remote_entry)


@pytest.mark.parametrize("url, allowed", [
    ("https://example.org/w.safetensors", True),
    ("http://127.0.0.1:8000/w.safetensors", True),
    ("http://localhost/w.safetensors", True),
    ("http://example.org/w.safetensors", False),
    ("ftp://example.org/w.safetensors", False),
    ("file:///etc/passwd", False),
])
def test_only_https_or_loopback_urls_are_fetched(url, allowed):
    if allowed:
        check_url(url)
    else:
        with pytest.raises(WeightsError, match="over https only"):
            check_url(url)


def test_a_damaged_weights_file_that_pip_installed_says_to_reinstall_its_distribution(site, tmp_path, capsys):
    from kit import install_package

    from vaezoo.errors import WeightsError

    package = tmp_path / "src" / "vaezoo_shipped"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    write_entry(package / "cards", make_card(name="shipped-mnist"))
    install_package(site, package, "shipped")
    weights = site / "vaezoo_shipped" / "cards" / "shipped-mnist.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    card = site / "vaezoo_shipped" / "cards" / "shipped-mnist.toml"
    remedy = "it is a file of the installed vaezoo_shipped: reinstall it (pip install --force-reinstall --no-deps "
    with pytest.raises(WeightsError, match=r"does not match the card's .*; " + remedy.replace("(", r"\(")):
        vaezoo.load(card)
    assert main(["verify", str(card)]) == 1
    assert remedy in capsys.readouterr().out


def test_verify_of_many_names_reads_the_card_folders_once_not_once_per_name(cards, monkeypatch, capsys):
    import vaezoo.entries.catalog as catalog

    names = [f"tiny-{i}" for i in range(4)]
    for seed, name in enumerate(names):
        write_entry(cards, make_card(name=name), seed=seed)
    looked_at = []
    scan_one = catalog._scan_one
    monkeypatch.setattr(catalog, "_scan_one",
                        lambda path, *rest: looked_at.append(os.path.basename(path)) or scan_one(path, *rest))
    assert main(["verify", *names]) == 0
    assert capsys.readouterr().out.count(": ok ") == len(names)
    assert {f"{name}.toml" for name in names} <= set(looked_at)
    assert len(looked_at) == len(set(looked_at))  # each card file looked at once, not once per name given
