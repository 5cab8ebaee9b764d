"""Bad cards: each is skipped or refused with one line naming the file and the problem, no weights are read,
and every other card keeps working."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import pytest
from kit import (assert_one_line_error, child_env, cli, install_plugin, make_card, run_vaezoo, save_model_weights,
                 weights_entry, write_toml)

import vaezoo
from vaezoo.entries.catalog import CardWarning, card_dirs, discover, scan
from vaezoo.errors import WeightsError
from vaezoo.store.downloads import cache_dir


@pytest.fixture(autouse=True)
def _tiny_dataset(data_plugin):
    """The tiny card's dataset is installed: building its model asks the dataset for the input geometry."""


def write_good_entry(cards_dir, file: str = "tiny.toml") -> Path:
    """The tiny card with its weights beside it: what must keep working beside a bad card."""
    weights = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    return write_toml(cards_dir / file, make_card("tiny", weights=weights_entry(weights, file="tiny.safetensors")))


def assert_the_rest_works(capsys, skipped: list[str]) -> None:
    """The zoo and the good card list and load; ``vaezoo list`` counts the skipped cards on stderr and
    ``vaezoo list --skipped`` gives one line per skipped card, starting with the given fragments."""
    code, out, err = cli(capsys, "list", "--json")
    names = {r["name"] for r in json.loads(out)}
    assert code == 0 and "Traceback" not in err
    assert scan().builtin and names >= scan().builtin | {"tiny-blobs"}
    count = "1 card" if len(skipped) == 1 else f"{len(skipped)} cards"
    assert f"{count} skipped; run 'vaezoo list --skipped' to see why" in err
    code, out, _ = cli(capsys, "list", "--skipped")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(skipped)
    assert all(line.startswith(fragment) for line, fragment in zip(lines, skipped)), lines
    code, out, _ = cli(capsys, "list", "--skipped", "--json")
    assert code == 0 and [f"{r['file']}: {r['error']}" for r in json.loads(out)] == lines
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CardWarning)
        assert vaezoo.load("tiny-blobs").card.name == "tiny-blobs"


def test_malformed_toml(cards_dir, capsys):
    write_good_entry(cards_dir)
    path = cards_dir / "broken.toml"
    path.write_text('name = "broken"\nmodel = {image_size = \n', encoding="utf-8")
    with pytest.warns(CardWarning, match=re.escape(f"card {path} skipped: not valid TOML")) as caught:
        assert "tiny-blobs" in vaezoo.list_models()
    assert "\n" not in str(caught[0].message)
    assert_the_rest_works(capsys, [f"{path}: not valid TOML"])
    code, out, stderr = cli(capsys, "info", "broken")
    assert code == 1 and out == ""
    assert_one_line_error(stderr, f"card 'broken' in {path} was skipped: not valid TOML")


def test_card_that_is_not_text(cards_dir, capsys):
    write_good_entry(cards_dir)
    (cards_dir / "binary.toml").write_bytes(b"\xff\xfe\x00garbage")
    assert_the_rest_works(capsys, [f"{cards_dir / 'binary.toml'}: is not text (its byte 0 is no UTF-8), not a card "
                                   f"(TOML)"])


@pytest.mark.parametrize("section, key, field", [
    ((), "colour", "colour"),
    (("train", "optimizer"), "momentum_typo", "train.optimizer.momentum_typo"),
    ((), "line\nbreak", "line\\nbreak"),
], ids=["top-level", "nested", "newline-in-key"])
def test_unknown_field(cards_dir, capsys, section, key, field):
    card = make_card("tiny")
    table = card
    for name in section:
        table = table[name]
    table[key] = "red"
    write_toml(cards_dir / "tiny.toml", card)
    code, _, stderr = cli(capsys, "info", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "tiny.toml", f"'{field}' is no field of", "remove it or correct its name")


@pytest.mark.parametrize("section, key, near", [
    ((), "licence", "license"),
    (("train",), "epoch", "epochs"),
    (("train", "optimizer"), "Lr", "lr"),
    (("metrics", "mig"), "valu", "value"),
    (("latent", 0), "sise", "size"),
    (("labels", "part"), "splitt", "split"),
], ids=["top-level", "table", "nested-table", "named-table", "list-item", "plugin-section"])
def test_a_misspelt_field_is_said_first_with_the_field_meant(cards_dir, capsys, section, key, near):
    """A misspelt key was pydantic's "Extra inputs are not permitted", after the "Field required" of the key meant
    where that one is required: the misspelling comes first now, with the name it is close to."""
    card = make_card("tiny")
    card["metrics"] = {"mig": {"value": 0.5, "command": "vaezoo eval tiny"}}
    card["latent"] = [{"family": "gaussian", "size": 4}]
    card["labels"] = {"part": {"category_to_label": [0], "split": "test", "command": "c", "vaezoo_version": "0.1.0"}}
    table = card
    for name in section:
        table = table[name]
    if near in table:
        table[key] = table.pop(near)
    else:
        table[key] = 1
    write_toml(cards_dir / "tiny.toml", card)
    code, _, stderr = cli(capsys, "info", "tiny-blobs")
    assert code == 1
    where = ".".join(str(part) for part in (*section, key))
    assert_one_line_error(stderr, f"'{where}' is no field of", f"(did you mean '{near}'?)")


@pytest.mark.parametrize("path, value, field", [
    (("train", "epochs"), "ten", "train.epochs"),
    (("train", "batch_size"), -1, "train.batch_size"),
    (("name",), "Not A Name!", "name"),
    (("model",), [1, 2], "model"),
    (("sections",), True, "sections"),  # found by the fuzzer: a TypeError before
    (("train", "epochs"), 2**63, "train.epochs"),  # no TOML integer: other readers of the card refuse it
    (("train", "checkpoint_every"), 2**64, "train.checkpoint_every"),
], ids=["epochs-text", "negative-batch", "bad-name", "model-list", "sections-bool", "epochs-past-toml",
        "checkpoint-every-past-toml"])
def test_wrong_type(cards_dir, capsys, path, value, field):
    card = make_card("tiny")
    table = card
    for name in path[:-1]:
        table = table[name]
    table[path[-1]] = value
    write_toml(cards_dir / "tiny.toml", card)
    code, out, _ = cli(capsys, "list", "--skipped")
    assert code == 0 and out.startswith(f"{cards_dir / 'tiny.toml'}: field '{field}': ")
    assert out.count("\n") == 1


def test_missing_weights_file(cards_dir, capsys):
    missing = {"file": "absent.safetensors", "sha256": "0" * 64, "size": 10}
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights=missing))
    with pytest.raises(WeightsError, match="does not exist"):
        vaezoo.load("tiny-blobs")
    code, out, stderr = cli(capsys, "verify", "tiny-blobs")
    assert code == 1 and "FAILED" in out
    assert_one_line_error(stderr, "failed verification")


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_weights_file_that_is_a_folder_or_a_fifo_is_named_as_such(tmp_path, cards_dir, capsys, kind):
    """The file is there but is no file; the advice names the card as ``vaezoo verify`` takes it: its zoo name,
    or the path of a card outside the zoo (unopened, as a FIFO would block)."""
    stated = {"file": "tiny.safetensors", "sha256": "0" * 64, "size": 10}
    problem = {"folder": "is a folder, not a file", "fifo": "is not a regular file (a FIFO or a device)"}[kind]
    outside = tmp_path / "elsewhere" / "my card.toml"
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights=stated))
    write_toml(outside, make_card("tiny", "tiny-outside", weights=stated))
    for folder in (cards_dir, outside.parent):
        if kind == "folder":
            (folder / "tiny.safetensors").mkdir()
        else:
            os.mkfifo(folder / "tiny.safetensors")
    with pytest.raises(WeightsError, match=re.escape(f"tiny.safetensors {problem}; put the card's safetensors file "
                                                     f"there, then check it with: vaezoo verify tiny-blobs")):
        vaezoo.load("tiny-blobs")
    code, out, stderr = cli(capsys, "eval", str(outside))
    assert code == 1 and out == ""
    assert_one_line_error(stderr, f"{outside.parent / 'tiny.safetensors'} {problem}",
                          f"check it with: vaezoo verify '{outside}'")


def test_a_regularizer_weight_that_is_not_finite_is_refused_before_training(tmp_path, capsys):
    card = make_card("tiny")
    card["model"]["regularizers"] = [{"type": "beta", "beta": float("nan")}]
    path = write_toml(tmp_path / "tiny.toml", card)
    code, out, stderr = cli(capsys, "train", str(path), "--out", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 1 and out == ""
    assert_one_line_error(stderr, "regularizer 'beta': beta must be a finite number of at least 0, got nan")
    assert not (tmp_path / "run").exists()


def test_two_cards_with_one_name(cards_dir, capsys):
    first = write_good_entry(cards_dir, "a.toml")
    second = write_toml(cards_dir / "b.toml", make_card("tiny"))
    with pytest.warns(CardWarning, match=re.escape(f"card {second} skipped: name 'tiny-blobs' is already taken "
                                                   f"by {first}; the card found first is kept")):
        assert vaezoo.get_card("tiny-blobs").path == first
    assert_the_rest_works(capsys, [f"{second}: name 'tiny-blobs' is already taken by {first}"])


def test_a_third_party_card_never_shadows_a_built_in_one(cards_dir, site, tmp_path, capsys):
    """A plugin that loads before the zoo ('aaa' < 'zoo') and the cards path both bring a card named like a
    zoo entry: the zoo's entry is kept, both others are reported naming the zoo's file."""
    from vaezoo import plugins

    zoo = discover()
    name = sorted(scan().builtin)[0]
    theirs = write_toml(tmp_path / "theirs" / "impostor.toml", make_card("tiny", name))
    install_plugin(site, "aaa", f"""
        import vaezoo

        @vaezoo.hookimpl
        def vaezoo_card_dirs():
            return [{str(theirs.parent)!r}]
    """)
    ours = write_toml(cards_dir / "mine.toml", make_card("tiny", name))
    plugins.reset()
    with pytest.warns(CardWarning) as caught:
        card = vaezoo.get_card(name)
    assert card.path == zoo[name].path and card.architecture == zoo[name].architecture
    kept = f"name '{name}' is already taken by {zoo[name].path}; the built-in zoo entry is kept"
    assert [str(w.message) for w in caught] == [f"card {theirs} skipped: {kept}", f"card {ours} skipped: {kept}"]
    code, out, _ = cli(capsys, "list", "--skipped")
    assert code == 0 and out == f"{theirs}: {kept}\n{ours}: {kept}\n"
    assert vaezoo.get_card(ours).path == ours.resolve()  # asked for by its path, the file is read


def test_a_folder_listed_twice_is_not_a_duplicate(cards_dir, tmp_path, monkeypatch, capsys):
    write_toml(cards_dir / "tiny.toml", make_card("tiny"))
    (tmp_path / "link").symlink_to(cards_dir, target_is_directory=True)
    spellings = [cards_dir, f"{cards_dir}{os.sep}", tmp_path / "link", cards_dir / ".." / "cards", cards_dir]
    monkeypatch.setenv("VAEZOO_CARDS_PATH", os.pathsep.join(map(str, spellings)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", CardWarning)
        assert "tiny-blobs" in discover()
    assert card_dirs().count(cards_dir) == 1 and tmp_path / "link" not in card_dirs()
    code, out, err = cli(capsys, "list", "--skipped")
    assert (code, out) == (0, "") and err.startswith("no card was skipped: ")  # the one folder, no warning


def test_entries_that_are_not_regular_files_are_never_opened(tmp_path):
    """A FIFO (opening it would block), a symlink to one, and a symlink to /dev/zero (reading it never
    ends) among the cards: each is skipped unread, in a child process that must answer promptly."""
    cards = tmp_path / "cards"
    write_toml(cards / "tiny.toml", make_card("tiny"))
    os.mkfifo(cards / "x.toml")
    os.mkfifo(tmp_path / "elsewhere")
    (cards / "link.toml").symlink_to(tmp_path / "elsewhere")
    (cards / "zero.toml").symlink_to("/dev/zero")
    env = child_env(tmp_path / "home", cards)
    done = run_vaezoo("list", "--json", env=env, timeout=60)
    assert done.returncode == 0 and "tiny-blobs" in {r["name"] for r in json.loads(done.stdout)}
    assert "3 cards skipped" in done.stderr and "Traceback" not in done.stderr
    done = run_vaezoo("list", "--skipped", env=env, timeout=60)
    assert done.stdout.splitlines() == [f"{cards / 'link.toml'}: is a FIFO, not a card file",
                                        f"{cards / 'x.toml'}: is a FIFO, not a card file",
                                        f"{cards / 'zero.toml'}: is a character device, not a card file"]
    done = run_vaezoo("info", str(cards / "x.toml"), env=env, timeout=60)
    assert done.returncode == 1
    assert_one_line_error(done.stderr, f"{cards / 'x.toml'}: is a FIFO, not a card file")


@pytest.mark.parametrize("where", [" =x", "\t=x", "   =", "=x"])
def test_where_without_a_key_is_refused(cards_dir, capsys, where):
    write_toml(cards_dir / "tiny.toml", make_card("tiny"))
    code, out, err = cli(capsys, "list", "--where", where)
    assert (code, out) == (2, "")
    assert_one_line_error(err, "--where")


def _escaping_card(tmp_path, monkeypatch, how: str) -> None:
    """A card in ``tmp_path/zoo/cards`` whose weights entry names a real, correctly hashed file outside it."""
    cards = tmp_path / "zoo" / "cards"
    cards.mkdir(parents=True)
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(cards))
    outside = save_model_weights(tmp_path / "x.safetensors", make_card("tiny"))
    file = {"dotdot": "../../x.safetensors", "hidden-dotdot": "sub/../../../x.safetensors",
            "absolute": str(outside), "symlink": "link.safetensors"}[how]
    if how == "symlink":
        (cards / "link.safetensors").symlink_to(outside)
    assert (cards / file).resolve() == outside
    write_toml(cards / "tiny.toml", make_card("tiny", weights=weights_entry(outside, file=file)))


@pytest.mark.parametrize("how", ["dotdot", "hidden-dotdot", "absolute", "symlink"])
def test_weights_path_escaping_the_card_directory(tmp_path, monkeypatch, capsys, how):
    _escaping_card(tmp_path, monkeypatch, how)
    # a link beside the card was said to be "outside the card's directory; put the weights beside the card"
    said = "is a link to .*, outside the card's directory" if how == "symlink" else "is outside the card's directory"
    with pytest.raises(WeightsError, match=said):
        vaezoo.load("tiny-blobs")
    code, out, stderr = cli(capsys, "verify", "tiny-blobs")
    assert code == 1 and re.search(said, out)
    assert_one_line_error(stderr, "failed verification")


def test_weights_path_inside_the_card_directory_loads(cards_dir):
    """The control for the escapes above: the same file beside the card loads."""
    weights = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights=weights_entry(weights, file="tiny.safetensors")))
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
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights={"url": url, "sha256": "0" * 64, "size": 10}))
    with pytest.raises(WeightsError, match="https only"):
        vaezoo.load("tiny-blobs")
    assert not cache_dir().exists() or not any(cache_dir().iterdir())


def test_plain_http_needs_the_explicit_setting(cards_dir, monkeypatch):
    """With VAEZOO_ALLOW_HTTP=1 the scheme passes and the next check (here: offline) answers."""
    elsewhere = {"url": "http://example.com/w.safetensors", "sha256": "0" * 64, "size": 10}
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights=elsewhere))
    monkeypatch.setenv("VAEZOO_ALLOW_HTTP", "1")
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    with pytest.raises(WeightsError, match="VAEZOO_OFFLINE=1"):
        vaezoo.load("tiny-blobs")


@pytest.mark.parametrize("url, problem", [
    ("http://[::1/w.safetensors", "is malformed"),
    ("https:///w.safetensors", "names no host"),
    ("https://" + "a" * 70 + ".com/w.safetensors", "a host name no DNS server can resolve"),
])
def test_a_weights_url_no_download_could_reach_skips_the_card_in_one_line(cards_dir, capsys, url, problem):
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights={"url": url, "sha256": "0" * 64, "size": 10}))
    code, out, err = cli(capsys, "info", "tiny-blobs")
    assert (code, out) == (1, "")
    assert_one_line_error(err, "card 'tiny-blobs' in", problem)
