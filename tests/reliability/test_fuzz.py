"""Fuzzing with hypothesis: random cards and random command lines get clear errors, never a traceback.

"Clear" means a :class:`~vaezoo.errors.VaezooError` (one line) in the API, and in the CLI an exit code with an
``error: ...`` last line on stderr (argparse's usage errors exit 2). Anything else fails the test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat

import pytest
import tomli_w
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st
from kit import cli, install_plugin, make_card, save_model_weights, weights_entry, write_toml

import vaezoo
from vaezoo.cli import build_parser
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, VaezooError, WeightsError
from vaezoo.store.downloads import check_url

FUZZ = settings(max_examples=150, deadline=None, database=None,
                phases=[Phase.explicit, Phase.generate, Phase.shrink],
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PARSE_EXAMPLES = 300

SMALL_INTS = st.integers(-3, 40)  # sizes stay small: a fuzzed card must not allocate gigabytes
KEYS = st.text(st.characters(max_codepoint=0x3FF, exclude_categories=["Cs"]), max_size=10)
SCALARS = (st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
           | st.dates() | st.datetimes())
TOML_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(KEYS, inner, max_size=4), max_leaves=10)


@pytest.fixture
def home(tmp_path, monkeypatch, cards_dir, data_plugin):
    """A working directory and a zoo of the tiny card only, with valid weights beside it."""
    monkeypatch.chdir(tmp_path)
    # the core, the tiny card and its dataset only: every command stays fast
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "testdata")
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")  # a fuzzed https URL must never reach for the network
    monkeypatch.setenv("VAEZOO_DATA", str(tmp_path / "no-data"))
    weights = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights=weights_entry(weights, file="tiny.safetensors")))
    return tmp_path


def _parse_or_card_error(path) -> Card | None:
    """The card at ``path``, or None when it is refused with a one-line CardError naming the file."""
    try:
        return parse_card(path)
    except CardError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        event("card refused")
        return None


@pytest.mark.slow
@settings(FUZZ, max_examples=PARSE_EXAMPLES)
@given(data=st.dictionaries(KEYS, TOML_VALUES, max_size=8))
def test_random_toml_tables(tmp_path, data):
    path = tmp_path / "random.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    assert _parse_or_card_error(path) is None or set(data) >= {"name", "architecture", "model", "train"}


@settings(FUZZ, max_examples=PARSE_EXAMPLES)
@given(text=st.text(max_size=300) | st.binary(max_size=300))
def test_random_bytes_as_a_card(tmp_path, text):
    path = tmp_path / "random.toml"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    _parse_or_card_error(path)


LOOPBACK = ["127.0.0.1", "localhost"]
ELSEWHERE = ["example.com", "127.0.0.1.example.com", "localhost.example.com", "10.0.0.1", "127.0.0.2"]


@settings(FUZZ, max_examples=PARSE_EXAMPLES)
@given(scheme=st.sampled_from(["https", "http", "ftp", "file", "gopher", "HTTP", "HTTPS", "ws"]),
       host=st.sampled_from(LOOPBACK + ELSEWHERE), user=st.sampled_from(["", "127.0.0.1@", "localhost:pw@"]),
       port=st.sampled_from(["", ":8000"]), path=st.text(st.characters(categories=["L", "N"]), max_size=10))
def test_random_urls_only_https_or_plain_http_to_loopback(monkeypatch, scheme, host, user, port, path):
    """The rule of the brief, from the URL's parts: https anywhere, http only to this machine."""
    monkeypatch.delenv("VAEZOO_ALLOW_HTTP", raising=False)
    url = f"{scheme}://{user}{host}{port}/{path}.safetensors"
    allowed = scheme.lower() == "https" or scheme.lower() == "http" and host in LOOPBACK
    try:
        check_url(url)
        event("allowed")
        assert allowed, url
    except WeightsError as exc:
        event("refused")
        assert not allowed and url in str(exc), url


def _leaf_paths(table, prefix=()):
    """Every path to a value inside nested dicts and lists, tables included."""
    items = table.items() if isinstance(table, dict) else enumerate(table)
    for key, value in items:
        yield (*prefix, key)
        if isinstance(value, dict | list):
            yield from _leaf_paths(value, (*prefix, key))


MUTANT_VALUES = (SMALL_INTS | st.floats(-1e3, 1e3) | st.sampled_from([math.nan, math.inf, -0.0]) | st.booleans()
                 | st.text(max_size=12) | st.sampled_from(["gaussian", "joint", "beta", "capacity", "mlp_encoder",
                                                           "conv_encoder", "bernoulli", "vae", "../x.safetensors"])
                 | st.lists(SMALL_INTS, max_size=3) | st.dictionaries(KEYS, SMALL_INTS, max_size=2))


def mutate(draw, card: dict) -> dict:
    """``card`` with one to three fields replaced, deleted or added (``draw`` is hypothesis's)."""
    for _ in range(draw(st.integers(1, 3))):
        paths = sorted(_leaf_paths(card), key=str)
        in_model = [p for p in paths if p[0] == "model"]
        # most mutants keep a valid schema and change the model, so that they reach the model's builder
        *parents, last = draw(st.sampled_from(in_model) if in_model and draw(st.integers(0, 3)) else
                              st.sampled_from(paths))
        table = card
        for key in parents:
            table = table[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "delete" and isinstance(table, dict):
            del table[last]
        elif action == "add" and isinstance(table, dict):
            table[draw(KEYS)] = draw(MUTANT_VALUES)
        else:
            table[last] = draw(MUTANT_VALUES)
    return card


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors:UserWarning")  # a mutant's 0-wide layer
@FUZZ
@given(data=st.data())
def test_mutated_cards_load_or_fail_clearly(home, cards_dir, data):
    """A mutant of the valid card, beside valid weights, loaded as a user would: a model, or one clear error."""
    weights = weights_entry(cards_dir / "tiny.safetensors", file="tiny.safetensors")
    card = mutate(data.draw, make_card("tiny", weights=weights))
    path = cards_dir / "tiny.toml"
    path.write_text(tomli_w.dumps(card), encoding="utf-8")
    parsed = _parse_or_card_error(path)
    if parsed is None:
        return
    try:
        vaezoo.load(parsed.name)
        event("model loaded")
    except VaezooError as exc:
        assert "\n" not in str(exc), str(exc)
        event(f"load refused: {type(exc).__name__}")


def _options(subparser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A command's arguments, read from argparse's (private but long-stable) action list."""
    return [a for a in subparser._actions if not isinstance(a, argparse._HelpAction)]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


# push uploads to the Hugging Face Hub: tests/test_hf_hub.py runs it against a stand-in, never the real Hub
COMMANDS = {name: parser for name, parser in _subparsers().items() if name != "push"}
# paths are relative: commands run in a temporary directory and must not write outside it
WORDS = st.sampled_from(["tiny-blobs", "cards/tiny.toml", "cards/tiny.safetensors", "jointvae-mnist", "out",
                         "out/x.png", "missing/x", "", "-", "*", "cpu", "cuda", "meta", "cuda:7", "mps",
                         "bogus-device", "beta=1", "=", "tiny_blobs", "vae", "jointvae-original"])
NUMBERS = SMALL_INTS.map(str) | st.sampled_from(["nan", "inf", "-inf", "1e309", "0.5", "-0", "x"])
NOISE = (st.text(st.characters(exclude_characters="/\\~", exclude_categories=["Cs"]), max_size=8)
         | st.sampled_from(["--", "--help", "-h", "--json", "--bogus"]))


def _values(draw, action: argparse.Action) -> list[str]:
    """Values for one argparse action: mostly well-typed, sometimes noise."""
    if action.nargs == 0:
        return []
    count = {None: 1, "?": draw(st.integers(0, 1)), "*": draw(st.integers(0, 2)), "+": draw(st.integers(1, 2))}
    count = count.get(action.nargs, action.nargs if isinstance(action.nargs, int) else 1)
    if action.choices:
        value = st.sampled_from([str(c) for c in action.choices])
    elif action.type in (int, float):
        value = NUMBERS
    else:
        value = WORDS
    return [draw(value if draw(st.integers(0, 7)) else NOISE) for _ in range(count)]


@st.composite
def argvs(draw):
    """A command line of a real command: its positionals, a random subset of its options, and a little noise."""
    name = draw(st.sampled_from(sorted(COMMANDS)))
    tokens = [name]
    options = []
    for action in _options(COMMANDS[name]):
        if not action.option_strings:
            tokens += _values(draw, action)
        elif action.required or draw(st.booleans()):
            options.append([draw(st.sampled_from(action.option_strings)), *_values(draw, action)])
    for option in draw(st.permutations(options)):
        tokens += option
    if not draw(st.integers(0, 4)):
        tokens.insert(draw(st.integers(0, len(tokens))), draw(NOISE))
    return tokens


@pytest.mark.slow
@FUZZ
@given(argv=argvs())
def test_random_command_lines(home, capsys, argv):
    """In-process ``vaezoo ARGV``: any exception, argparse's SystemExit too, escapes ``cli`` and fails the test."""
    code, _, stderr = cli(capsys, *argv)
    event(f"exit {code}")
    assert "Traceback" not in stderr
    if code == 2 and "usage:" in stderr:  # argparse's: its usage line, then its error
        assert "error:" in stderr, stderr
    elif code != 0:  # vaezoo's own, a value the command line alone shows wrong (2) among them: one line
        assert stderr.strip().splitlines()[-1].startswith("error: "), (argv, stderr)


@pytest.mark.parametrize("argv", [
    ["eval", "tiny-blobs", "--device", "cuda:99"],  # no machine has 100 GPUs; on this one plain cuda failed too
    ["eval", "tiny-blobs", "--device", "bogus-device"],
    ["show", "tiny-blobs", "sample", "-o", "x.png", "--device", "cuda:99"],
    ["gallery", "out", "--no-data", "--device", "meta"],
    ["train", "tiny-blobs", "--out", "out", "--device", "cuda:99"],
], ids=" ".join)
def test_unusable_devices_found_by_the_fuzzer(home, capsys, argv):
    """Regression cases: torch raised RuntimeError (a traceback) before ``--device`` was checked by argparse."""
    code, _, stderr = cli(capsys, *argv)
    assert code == 2 and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("vaezoo ") and "argument --device" in stderr
    assert not (home / "out").exists()


def test_a_batch_that_fails_a_run_ends_with_its_error_found_by_the_fuzzer(home, capsys):
    """Regression case: a batch printed its summary after the runs' errors, so the command failed on a last line
    that named no error."""
    code, _, stderr = cli(capsys, "eval", "", "tiny-blobs")
    lines = stderr.strip().splitlines()
    assert code == 1 and "Traceback" not in stderr, stderr
    assert lines[-2] == "1 of 2 runs measured" and lines[-1].startswith("error: : no zoo card named ''"), stderr


@pytest.mark.parametrize("argv", [
    ["gallery", "cards/tiny.toml", "--no-data"],
    ["show", "tiny-blobs", "sample", "-o", "cards/tiny.toml/x.png"],
], ids=" ".join)
def test_outputs_under_a_file_found_by_the_fuzzer(home, capsys, argv):
    """Regression cases: an output folder whose path runs through a file raised FileExistsError (a traceback)."""
    card = (home / "cards" / "tiny.toml").read_bytes()
    code, _, stderr = cli(capsys, *argv)
    assert code == 1 and "Traceback" not in stderr, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(("error: cannot write cards/tiny.toml/",
                            "error: cannot write in output path cards/tiny.toml")), stderr
    assert last.endswith(": cards/tiny.toml is a file, not a folder; choose another output path"), stderr
    assert (home / "cards" / "tiny.toml").read_bytes() == card


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_an_output_that_is_no_file_is_left_standing(home, capsys, kind):
    """An atomic write renames over its target: a FIFO or a folder there is refused, not replaced by a file."""
    target = home / "x.png"
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    code, _, stderr = cli(capsys, "show", "tiny-blobs", "sample", "-o", "x.png")
    assert code == 1 and "Traceback" not in stderr
    what = {"fifo": "a FIFO", "folder": "a folder"}[kind]
    assert stderr.strip().splitlines()[-1] == f"error: cannot write x.png: it is {what}, not a file; choose another " \
                                              f"output path"
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISDIR)(os.lstat(target).st_mode)


@pytest.mark.parametrize("name", ["\r", "a\nb", "tab\there"], ids=repr)
def test_control_characters_in_a_name_stay_on_one_line(home, capsys, name):
    """Regression case: ``vaezoo info $'\\r'`` printed an error broken over two lines."""
    code, _, stderr = cli(capsys, "info", name)
    assert code == 1
    assert len(stderr.strip("\n").split("\n")) == 1 and "\r" not in stderr, repr(stderr)
    assert stderr.startswith("error: no zoo card named") and repr(name)[1:-1] in stderr


# Text that acts on a terminal or on rich: markup, emoji codes, escape sequences (an OSC retitles the terminal),
# C0 and C1 controls, line separators, a right-to-left override; mixed with random text.
HOSTILE_PIECES = st.sampled_from(["[/]", "[red]", "[/red]", "[bold red]x[/]", "[link=https://x]y[/link]", ":smile:",
                                  "\\[", "\x1b]0;pwned\x07", "\x1b[2J", "\x1b[31m", "\r", "\b", "\x07", "\x00",
                                  "\x7f", "\x9b", "\u202e", "\u2028", "\n", "\t"])
HOSTILE_TEXT = st.lists(HOSTILE_PIECES | st.text(max_size=6), min_size=1, max_size=6).map("".join)
# A latent layout whose part's name (free text: a joint latent's part may be named anything) is hostile.
LATENT = HOSTILE_TEXT.map(lambda name: [{"family": "gaussian", "size": 2, "name": name}])
FREE_TEXT_FIELDS = ("summary", "paper", "license", "dataset", "architecture", "headline")


def _shown_as_text(output: str) -> bool:
    """No character that acts on a terminal: every one printable, or a line break."""
    return all(c.isprintable() or c == "\n" for c in output)


@pytest.fixture
def text_home(tmp_path, monkeypatch, cards_dir):
    """The tiny card's directory with a weights file beside it (``verify`` only hashes it); no plugin loads."""
    import torch

    from vaezoo.store.weights import save_weights

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    save_weights({"w": torch.zeros(2)}, cards_dir / "tiny.safetensors")
    return tmp_path


@pytest.mark.slow
@FUZZ
@given(fields=st.fixed_dictionaries({}, optional={**{name: HOSTILE_TEXT for name in FREE_TEXT_FIELDS},
                                                   "latent": LATENT}),
       metric_name=HOSTILE_TEXT, command=HOSTILE_TEXT, note=HOSTILE_TEXT)
def test_card_text_with_markup_and_control_characters(text_home, cards_dir, capsys, fields, metric_name, command,
                                                      note):
    """Every free-text field of a card (the name is pattern-restricted; a latent part's name is free text) and its
    metric's name, command and note hold markup and control characters: list, info and verify print them as text,
    and their JSON is exact."""
    card = make_card("tiny", weights=weights_entry(cards_dir / "tiny.safetensors", file="tiny.safetensors"))
    card.update(fields)
    card["metrics"] = {metric_name: {"value": 0.5, "command": command, "note": note, "vaezoo_version": "0.1.0"}}
    write_toml(cards_dir / "tiny.toml", card)
    for argv in (["list"], ["info", "tiny-blobs"], ["verify"], ["list", "--json"], ["info", "tiny-blobs", "--json"]):
        code, out, err = cli(capsys, *argv)
        assert code == 0 and "Traceback" not in err, (argv, err)
        assert _shown_as_text(out + err), (argv, out, err)
    shown = json.loads(out)
    assert {k: shown[k] for k in fields} == fields
    assert shown["metrics"] == card["metrics"]


MESSAGE_PLUGIN = """
from pathlib import Path
raise RuntimeError(Path(__file__).with_suffix(".txt").read_text(encoding="utf-8"))
"""


@pytest.mark.slow
@FUZZ
@given(message=HOSTILE_TEXT)
def test_plugin_errors_with_markup_and_control_characters(text_home, site, monkeypatch, capsys, message):
    """A plugin fails at import with a message of markup and control characters: ``vaezoo plugins`` shows it as
    text (``--json`` keeps it, joined into one line, as the plugin manager reports it)."""
    from vaezoo import plugins

    if not list(site.glob("*.py")):  # installed once: hypothesis runs every example in this test's fixtures
        install_plugin(site, "hostile", MESSAGE_PLUGIN)
    (module,) = site.glob("*.py")
    module.with_suffix(".txt").write_text(message, encoding="utf-8")
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "hostile")
    plugins.reset()
    code, out, err = cli(capsys, "plugins")
    assert code == 0 and "Traceback" not in err, err
    assert _shown_as_text(out + err), (out, err)
    code, out, _ = cli(capsys, "plugins", "--json")
    (row,) = [r for r in json.loads(out) if r["name"] == "hostile"]
    assert row["status"] != "ok" and "RuntimeError" in row["error"]


@pytest.mark.parametrize("argv", [
    ["show", "tiny-blobs", "sample", "-o", "x.png", "--scale", "100000"],
    ["show", "tiny-blobs", "sample", "-o", "x.png", "--n", "100000000"],
    ["show", "tiny-blobs", "traverse", "--no-data", "-o", "x.png", "--n", "100000000"],
], ids=" ".join)
def test_pictures_too_large_to_draw(home, capsys, argv):
    """Regression cases: torch failed to allocate the picture (a traceback), or the process was killed for memory."""
    code, _, stderr = cli(capsys, *argv)
    assert code == 1 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("error: the picture would "), stderr
    assert not (home / "x.png").exists()
