"""Bad cards: each is refused with one line naming the file and the problem, and no weights are read."""

from __future__ import annotations

import pytest
from faultkit import assert_one_line_error, cli, save_tiny_weights, tiny_card, weights_entry, write_toml

import vaezoo
from vaezoo.errors import CardError, DuplicateNameError, WeightsError
from vaezoo.weights import cache_dir


def test_malformed_toml(cards_dir, capsys):
    path = cards_dir / "broken.toml"
    path.write_text('name = "broken"\nmodel = {image_size = \n', encoding="utf-8")
    with pytest.raises(CardError, match="not valid TOML") as err:
        vaezoo.list_models()
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    code, out, stderr = cli(capsys, "list")
    assert code == 1 and out == ""
    assert_one_line_error(stderr, str(path), "not valid TOML")


def test_card_that_is_not_text(cards_dir, capsys):
    (cards_dir / "binary.toml").write_bytes(b"\xff\xfe\x00garbage")
    code, _, stderr = cli(capsys, "list")
    assert code == 1
    assert_one_line_error(stderr, "binary.toml", "not valid TOML")


@pytest.mark.parametrize("section, key, field", [
    ((), "colour", "colour"),
    (("train", "optimizer"), "momentum_typo", "train.optimizer.momentum_typo"),
    ((), "line\nbreak", "line\\nbreak"),
], ids=["top-level", "nested", "newline-in-key"])
def test_unknown_field(cards_dir, capsys, section, key, field):
    card = tiny_card()
    table = card
    for name in section:
        table = table[name]
    table[key] = "red"
    write_toml(cards_dir / "tiny.toml", card)
    code, _, stderr = cli(capsys, "info", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "tiny.toml", f"field '{field}'", "Extra inputs are not permitted")


@pytest.mark.parametrize("path, value, field", [
    (("train", "epochs"), "ten", "train.epochs"),
    (("train", "batch_size"), -1, "train.batch_size"),
    (("name",), "Not A Name!", "name"),
    (("model",), [1, 2], "model"),
], ids=["epochs-text", "negative-batch", "bad-name", "model-list"])
def test_wrong_type(cards_dir, capsys, path, value, field):
    card = tiny_card()
    table = card
    for name in path[:-1]:
        table = table[name]
    table[path[-1]] = value
    write_toml(cards_dir / "tiny.toml", card)
    code, _, stderr = cli(capsys, "list")
    assert code == 1
    assert_one_line_error(stderr, "tiny.toml", f"field '{field}'")


def test_missing_weights_file(cards_dir, capsys):
    write_toml(cards_dir / "tiny.toml", tiny_card(file="absent.safetensors", sha256="0" * 64, size=10))
    with pytest.raises(WeightsError, match="does not exist"):
        vaezoo.load("tiny-blobs")
    code, out, stderr = cli(capsys, "verify", "tiny-blobs")
    assert code == 1 and "FAILED" in out
    assert_one_line_error(stderr, "failed verification")


def test_two_cards_with_one_name(cards_dir, capsys):
    first = write_toml(cards_dir / "a.toml", tiny_card())
    second = write_toml(cards_dir / "b.toml", tiny_card())
    with pytest.raises(DuplicateNameError) as err:
        vaezoo.get_card("tiny-blobs")
    assert str(first) in str(err.value) and str(second) in str(err.value)
    code, _, stderr = cli(capsys, "list")
    assert code == 1
    assert_one_line_error(stderr, "'tiny-blobs' is defined twice", str(first), str(second))


def _escaping_card(tmp_path, monkeypatch, how: str) -> None:
    """A card in ``tmp_path/zoo/cards`` whose weights entry names a real, correctly hashed file outside it."""
    cards = tmp_path / "zoo" / "cards"
    cards.mkdir(parents=True)
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(cards))
    outside = save_tiny_weights(tmp_path / "x.safetensors", tiny_card())
    file = {"dotdot": "../../x.safetensors", "hidden-dotdot": "sub/../../../x.safetensors",
            "absolute": str(outside), "symlink": "link.safetensors"}[how]
    if how == "symlink":
        (cards / "link.safetensors").symlink_to(outside)
    assert (cards / file).resolve() == outside
    write_toml(cards / "tiny.toml", tiny_card(**weights_entry(outside, file=file)))


@pytest.mark.parametrize("how", ["dotdot", "hidden-dotdot", "absolute", "symlink"])
def test_weights_path_escaping_the_card_directory(tmp_path, monkeypatch, capsys, how):
    _escaping_card(tmp_path, monkeypatch, how)
    with pytest.raises(WeightsError, match="outside the card's directory"):
        vaezoo.load("tiny-blobs")
    code, out, stderr = cli(capsys, "verify", "tiny-blobs")
    assert code == 1 and "outside the card's directory" in out
    assert_one_line_error(stderr, "failed verification")


def test_weights_path_inside_the_card_directory_loads(cards_dir):
    """The control for the escapes above: the same file beside the card loads."""
    weights = save_tiny_weights(cards_dir / "tiny.safetensors", tiny_card())
    write_toml(cards_dir / "tiny.toml", tiny_card(**weights_entry(weights, file="tiny.safetensors")))
    assert vaezoo.load("tiny-blobs").card.name == "tiny-blobs"


@pytest.mark.parametrize("url", [
    "ftp://127.0.0.1/w.safetensors",
    "file:///etc/passwd",
    "http://example.com/w.safetensors",
    "http://127.0.0.1.example.com/w.safetensors",
    "http://127.0.0.1@example.com/w.safetensors",
    "gopher://localhost/w.safetensors",
])
def test_url_scheme_other_than_https_is_refused(cards_dir, capsys, url):
    write_toml(cards_dir / "tiny.toml", tiny_card(url=url, sha256="0" * 64, size=10))
    with pytest.raises(WeightsError, match="https only"):
        vaezoo.load("tiny-blobs")
    assert not cache_dir().exists() or not any(cache_dir().iterdir())


def test_plain_http_needs_the_explicit_setting(cards_dir, monkeypatch):
    """With VAEZOO_ALLOW_HTTP=1 the scheme passes and the next check (here: offline) answers."""
    write_toml(cards_dir / "tiny.toml", tiny_card(url="http://example.com/w.safetensors", sha256="0" * 64, size=10))
    monkeypatch.setenv("VAEZOO_ALLOW_HTTP", "1")
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    with pytest.raises(WeightsError, match="VAEZOO_OFFLINE=1"):
        vaezoo.load("tiny-blobs")
