"""What reaches the terminal: card and plugin text shown as text, tables at any width, a reader that stops early,
over-long names, and progress on stderr."""

from __future__ import annotations

import fcntl
import io
import json
import math
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
import textwrap
import tomllib

import pytest
from kit import child_env, cli, install_plugin, make_card, write_card, write_toml

from vaezoo import terminal as progress_module
from vaezoo.cli import main
from vaezoo.cli.common import print_table
from vaezoo.entries.catalog import get_card
from vaezoo.terminal import counted, printable, progress, shell_quote
from vaezoo.training.progress import Reporter

# rich markup, an emoji code, an OSC that retitles the terminal, a screen clear, a carriage return, a backspace,
# an 8-bit CSI and a right-to-left override
HOSTILE = "[/] [red]x[/red] :smile: \x1b]0;pwned\x07\x1b[2J\r\b\x9b\u202e end"
SHOWN = r"[/] [red]x[/red] :smile: \x1b]0;pwned\x07\x1b[2J\r\x08\x9b\u202e end"
LONG_NAME = "toy-a-long-name-joint-tc-capacity-seed-10"
LATENT = [{"family": "gaussian", "size": 3, "name": "cont"}, {"family": "categorical", "size": 4, "name": "cat"}]
LATENT_SHOWN = "gaussian(3) + categorical(4)"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def only_printable(text: str) -> bool:
    return all(c.isprintable() or c == "\n" for c in text)


@pytest.fixture
def hostile(cards):
    """A card whose every free-text field (a latent part's name too) holds markup and control characters."""
    metric = {"value": 0.5, "command": f"vaezoo eval {HOSTILE}", "vaezoo_version": "0.1.0", "note": HOSTILE}
    write_card(cards, make_card(name="hostile-mnist", architecture=HOSTILE, summary=HOSTILE, paper=HOSTILE,
                                license=HOSTILE, dataset=HOSTILE, metrics={HOSTILE: metric},
                                latent=[{"family": "gaussian", "size": 3, "name": HOSTILE}],
                                headline=HOSTILE))
    return cards


def test_a_count_names_one_thing_in_the_singular_and_any_other_count_in_the_plural():
    # 'vaezoo eval --write' said "wrote 1 metrics", 'vaezoo list' "1 card(s) skipped"
    assert [counted(n, "metric") for n in (0, 1, 2, 1200)] == ["0 metrics", "1 metric", "2 metrics", "1,200 metrics"]
    assert counted(1, "weights file") == "1 weights file" and counted(3, "index", "indices") == "3 indices"


def test_printable_escapes_what_would_act_on_the_terminal():
    assert printable("jointvae-mnist: ü ⊕ [x] 'q' \\") == "jointvae-mnist: ü ⊕ [x] 'q' \\"
    assert printable(HOSTILE) == SHOWN
    assert printable("a\nb\tc\x00d\x7fe\u2028f") == r"a\nb\tc\x00d\x7fe\u2028f"


# a screen clear and a line break in a folder's name: printed raw inside '...', they cleared the screen and broke
# the suggested command in two
CONTROL_PATH = "runs/it's \x1b[2J\nx\r\a\t\\ \x7f é\u202e\udcff"


def bash_words(command: str) -> list[bytes]:
    """The words bash reads in ``command``, as the bytes a program run by it would get."""
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {command}"], capture_output=True, check=True)
    return done.stdout.split(b"\0")[:-1]


@pytest.mark.parametrize("word", [CONTROL_PATH, "\x1b]0;pwned\x07", "a\nb", "\\'", "\x1bc", "runs/a b", "it's", "",
                                  "é ⊕"])
def test_a_word_is_quoted_as_plain_text_that_bash_reads_back_exactly(word):
    quoted = shell_quote(word)
    assert quoted.isprintable()
    assert bash_words(quoted) == [os.fsencode(word)]
    if word.isprintable():
        assert quoted == shlex.quote(word)


def test_a_word_the_terminals_encoding_cannot_hold_is_quoted_as_its_bytes(cards, tmp_path):
    """Under PYTHONIOENCODING=ascii the command read 'd\\xe9/...': pasted, bash gave a path with a backslash."""
    card = write_card(tmp_path / "d\u00e9", make_card(weights={"file": "gone.safetensors", "sha256": "0" * 64,
                                                                "size": 1}))
    result = subprocess.run([sys.executable, "-m", "vaezoo", "eval", str(card.parent)], capture_output=True,
                            text=True, timeout=300, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    command = result.stderr.strip().partition("check it with: ")[2]
    assert command.startswith("vaezoo verify $'"), result.stderr
    assert bash_words(command) == [b"vaezoo", b"verify", os.fsencode(card)]


def test_a_command_recorded_in_a_file_does_not_depend_on_the_terminals_encoding(monkeypatch, tmp_path):
    """Under PYTHONIOENCODING=ascii a card recorded 'vaezoo eval $'d\\xc3\\xa9'': its text followed the terminal it
    was written from; a command printed there is still escaped."""
    import io

    from vaezoo.entries.schema import Card
    from vaezoo.evaluation.report import as_metrics
    from vaezoo_jointvae.labels import labels_command

    for stream in ("stdout", "stderr"):
        monkeypatch.setattr(sys, stream, io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    path = str(tmp_path / "d\u00e9")
    command = as_metrics(Card.model_validate(make_card()), {"loss": 1.0}, data_root=path, ref=path)["loss"].command
    assert command == f"vaezoo eval {shlex.quote(path)} --data-root {shlex.quote(path)}"
    assert labels_command(path, data_root=path) == shlex.join(["python", "-m", "vaezoo_jointvae.labels", path,
                                                               "--data-root", path])
    assert shell_quote(path).startswith("$'") and bash_words(shell_quote(path)) == [os.fsencode(path)]


def test_a_lone_surrogate_no_path_holds_is_quoted_as_its_bytes_not_an_error():
    assert shell_quote("a\ud800") == r"$'a\xed\xa0\x80'"


def test_the_commands_vaezoo_suggests_for_a_path_with_control_characters_paste_back_to_the_path(tmp_path):
    from vaezoo.entries.entry import local_path
    from vaezoo.entries.schema import Card
    from vaezoo.errors import WeightsError
    from vaezoo.evaluation.report import eval_command
    from vaezoo.extras.hub_push import on_hub
    from vaezoo_jointvae.labels import labels_command

    path, wanted = CONTROL_PATH, os.fsencode(CONTROL_PATH)
    measured = eval_command(path, data_root=path, metrics=["a", "b"])
    recorded = Card.model_validate(make_card(metrics={"a": {"value": 1.0, "command": measured,
                                                            "vaezoo_version": "0.1.0"}}))
    commands = {"eval": measured, "labels": labels_command(path, data_root=path),
                "on the Hub": on_hub(recorded, "me/jvae").metrics["a"].command}
    folder = tmp_path / "\x1b[2J\nrun"
    card = write_card(folder, make_card(weights={"file": "gone.safetensors", "sha256": "0" * 64, "size": 1}))
    with pytest.raises(WeightsError, match="check it with: ") as missing:
        local_path(get_card(card))
    commands["verify"] = str(missing.value).partition("check it with: ")[2]
    assert {name: command.isprintable() for name, command in commands.items()} == dict.fromkeys(commands, True)
    assert bash_words(commands["eval"]) == [b"vaezoo", b"eval", wanted, b"--data-root", wanted, b"--metrics", b"a,b"]
    assert bash_words(commands["labels"]) == [b"python", b"-m", b"vaezoo_jointvae.labels", wanted, b"--data-root",
                                              wanted]
    # the Hub's card leaves out the data folder of the machine that measured it, quoted as it is
    assert bash_words(commands["on the Hub"]) == [b"vaezoo", b"eval", b"hf-hub:me/jvae", b"--metrics", b"a,b"]
    assert bash_words(commands["verify"]) == [b"vaezoo", b"verify", os.fsencode(card)]


def test_list_shows_card_text_as_text(hostile, capsys):
    code, out, err = cli(capsys, "list")
    assert code == 0, err
    assert only_printable(out + err)
    assert out.count(SHOWN) == 3  # architecture, dataset and the headline metric's name (a part's name is not shown)


def test_info_escapes_what_tomli_w_leaves_and_reads_back_the_same_card(hostile, capsys):
    code, out, _ = cli(capsys, "info", "hostile-mnist")
    assert code == 0 and only_printable(out)
    _, _, body = out.partition("\n")
    assert tomllib.loads(body) == get_card("hostile-mnist").model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("command", ["list", "info"])
def test_json_keeps_card_text_exact(hostile, capsys, command):
    code, out, _ = cli(capsys, *[command] + (["hostile-mnist"] if command == "info" else []) + ["--json"])
    assert code == 0 and only_printable(out)
    data = json.loads(out)
    card = data[0] if command == "list" else data
    assert card["dataset"] == HOSTILE and card["latent"] == [{"family": "gaussian", "size": 3, "name": HOSTILE}]


def test_a_card_folder_path_with_markup_and_escapes_is_shown_as_text(tmp_path, monkeypatch, capsys):
    directory = tmp_path / "[/]\x1b[31m\rcards"
    write_card(directory, make_card(name="plain-mnist",
                                    weights={"file": "missing.safetensors", "sha256": "0" * 64, "size": 1}))
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(directory))
    code, out, err = cli(capsys, "verify")
    assert code == 1 and only_printable(out + err)
    assert out.startswith("plain-mnist: FAILED ") and r"[/]\x1b[31m\rcards" in out
    code, out, _ = cli(capsys, "info", "plain-mnist")
    assert code == 0 and out.startswith(r"# " + str(tmp_path) + r"/[/]\x1b[31m\rcards/plain-mnist.toml")


def test_a_plugin_error_with_markup_and_escapes_is_shown_as_text(cards, site, monkeypatch, capsys):
    install_plugin(site, "hostile", f"raise RuntimeError({HOSTILE!r})\n")
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "hostile")
    code, out, err = cli(capsys, "plugins")
    assert code == 0, err
    assert only_printable(out + err)
    # the plugin manager joins the error's lines (the carriage return becomes a space); the rest shows as written
    assert SHOWN.replace(r"\r", " ") in out


def test_a_plugins_own_warning_is_shown_as_text_on_its_lines(cards, site, tmp_path):
    # a warning of a category vaezoo does not own keeps Python's layout (where, what, the source line), escaped
    install_plugin(site, "hostile", f"import warnings\nwarnings.warn({HOSTILE + chr(10) + 'second'!r})\n")
    env = {**child_env(tmp_path / "home", cards, site), "VAEZOO_LOAD_PLUGINS": "hostile"}
    result = subprocess.run([sys.executable, "-m", "vaezoo", "plugins"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert only_printable(result.stdout + result.stderr)
    assert f"UserWarning: {SHOWN}\nsecond\n" in result.stderr


def test_a_usage_error_shows_the_words_given_as_text(capsys):
    code, out, err = cli(capsys, "info", "jointvae-mnist", HOSTILE)
    assert (code, out) == (2, "") and only_printable(err)
    assert err.splitlines()[-1] == f"vaezoo info: error: unrecognized arguments: {SHOWN}"


def test_the_card_path_train_prints_is_shown_as_text(data_plugin, tmp_path, capsys):
    out_dir = tmp_path / "runs\x1b]0;pwned\x07\x1b[31m"
    card = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
    code, out, err = cli(capsys, "train", str(card), "--out", str(out_dir))
    assert code == 0, err
    assert only_printable(out) and out == printable(out_dir / "toyvae-bars-run.toml") + "\n"


def test_info_shows_a_cards_nan_and_infinite_values(cards, capsys):
    metric = {"command": "vaezoo eval x", "vaezoo_version": "0.1.0"}
    write_card(cards, make_card(name="odd-mnist", metrics={"nll": {**metric, "value": float("nan")},
                                                          "tc": {**metric, "value": float("inf")}}))
    code, out, err = cli(capsys, "info", "odd-mnist")
    assert code == 0, err
    metrics = tomllib.loads(out.partition("\n")[2])["metrics"]
    assert math.isnan(metrics["nll"]["value"]) and metrics["tc"]["value"] == math.inf


def test_an_error_line_shows_markup_and_escapes_as_text(cards, capsys):
    code, out, err = cli(capsys, "info", HOSTILE)
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and SHOWN in err and only_printable(err) and err.count("\n") == 1


# --- tables at any width ----------------------------------------------------------------------------------

@pytest.fixture
def listed(cards):
    write_card(cards, make_card(name="toy-mnist-2"))
    write_card(cards, make_card(name=LONG_NAME, latent=LATENT, parameters=1234567, headline="accuracy",
                                metrics={"accuracy": {"value": 0.8873, "command": "vaezoo eval x",
                                                      "vaezoo_version": "0.1.0"}}))
    return cards


def on_terminal(argv: list[str], columns: int, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``python -m vaezoo ARGV`` with stdin, stdout and stderr on a pseudo-terminal ``columns`` wide.

    Returns:
        The exit code and what the terminal received, without rich's style codes and with plain line ends.
    """
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    child_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    child = subprocess.Popen([sys.executable, "-m", "vaezoo", *argv], stdin=terminal, stdout=terminal,
                             stderr=terminal, env={**child_env, **(env or {})})
    os.close(terminal)
    received = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child has closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(controller)
    return child.wait(timeout=300), ANSI.sub("", received.decode()).replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [60, 80])
def test_a_narrow_terminal_gets_every_value_whole(listed, columns):
    """Too narrow for the table without breaking a word: one block per card, its name on a line of its own."""
    code, shown = on_terminal(["list"], columns)
    assert code == 0, shown
    assert "…" not in shown and max(map(len, shown.splitlines())) <= columns
    blocks = [block.splitlines() for block in shown.strip("\n").split("\n\n")]
    assert [block[0] for block in blocks] == [LONG_NAME, "toy-mnist-2"]
    values: dict[str, str] = {}  # label -> its value, the lines it wraps over joined
    label = ""
    for line in blocks[0][1:]:
        label = line[:len("  headline metric  ")].strip() or label
        values[label] = f"{values.get(label, '')} {line[len('  headline metric  '):].strip()}".strip()
    assert values == {"architecture": "vae", "dataset": "mnist", "latent": LATENT_SHOWN, "parameters": "1,234,567",
                      "headline metric": "accuracy 0.8873"}
    assert [line.split() for line in blocks[1][1:]] == [["architecture", "vae"], ["dataset", "mnist"]]


@pytest.mark.parametrize("columns,env", [(80, {"COLUMNS": "0"}), (8, None)], ids=["COLUMNS=0", "8 columns"])
def test_a_terminal_of_no_width_or_a_tiny_one_still_gets_every_value(listed, columns, env):
    # COLUMNS=0 (a shell that could not read the size) is no width, as Python's shutil takes it: the terminal's is
    # used; a terminal narrower than a label gets lines it wraps itself, never a value cut to '…' or left out
    code, shown = on_terminal(["list"], columns, env)
    assert code == 0, shown
    assert "…" not in shown
    assert all(value in "".join(shown.split()) for value in (LONG_NAME, "toy-mnist-2", "1,234,567", "accuracy0.8873"))


class _Screen(io.StringIO):
    """A terminal's stdout, in this process: what is printed to it is kept."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [20, 30])
def test_a_terminal_too_narrow_for_a_word_beside_the_labels_gets_each_value_under_its_label(monkeypatch, columns):
    """20 or 30 columns (a phone's ssh, a split pane): beside labels as long as 'headline metric' a value had one
    column or a few, and was broken a character a line ('b', 'e', 't', 'a', ...); now each goes under its label,
    wrapped between words as textwrap wraps it at the width left."""
    values = {"architecture": "betatcvae", "latent": "gaussian(6) + categorical(3)",
              "headline metric": "mig_chen 0.2168 (3 seeds: 0.1881 to 0.4981)"}
    screen = _Screen()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setenv("COLUMNS", str(columns))
    print_table(["name", *values], [["betatcvae-dsprites", *values.values()], ["vae-mnist", "vae", "", "x"]])
    expected = ["betatcvae-dsprites"]
    for label, value in values.items():
        expected += [f"  {label}", *(f"    {line}" for line in textwrap.wrap(value, columns - 4))]
    expected += ["", "vae-mnist", "  architecture", "    vae", "  headline metric", "    x"]
    assert [line.rstrip() for line in ANSI.sub("", screen.getvalue()).splitlines()] == expected


def test_a_word_of_wide_characters_is_measured_in_the_columns_it_takes(monkeypatch):
    """A word of ten CJK characters takes twenty columns: counted as ten, it was put beside the labels in the eleven
    left at 30 columns and broken over two lines; under its label it is whole."""
    word = "\u5909\u5206\u30aa\u30fc\u30c8\u30a8\u30f3\u30b3\u30fc\u30c0"  # a variational autoencoder
    screen = _Screen()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setenv("COLUMNS", "30")
    print_table(["name", "architecture", "headline metric"], [["vae-mine", word, "x"]])
    assert [line.rstrip() for line in ANSI.sub("", screen.getvalue()).splitlines()] == [
        "vae-mine", "  architecture", f"    {word}", "  headline metric", "    x"]


def test_a_wide_terminal_gets_the_table(listed):
    code, shown = on_terminal(["list"], 200)
    assert code == 0, shown
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in shown.splitlines() if line.startswith("│")]
    assert rows[0] == [LONG_NAME, "vae", "mnist", LATENT_SHOWN, "1,234,567", "accuracy 0.8873"]


@pytest.mark.parametrize("color", [None, "1"], ids=["", "FORCE_COLOR=1"])
def test_off_a_terminal_values_are_never_cut_whatever_columns_says(listed, monkeypatch, capsys, color):
    # FORCE_COLOR=1, which asks for colours, made rich take the pipe for an 80-column terminal: one block per card
    monkeypatch.setenv("COLUMNS", "40")
    if color:
        monkeypatch.setenv("FORCE_COLOR", color)
    code, out, _ = cli(capsys, "list")
    out = ANSI.sub("", out)
    assert code == 0 and "…" not in out
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    assert rows == [[LONG_NAME, "vae", "mnist", LATENT_SHOWN, "1,234,567", "accuracy 0.8873"],
                    ["toy-mnist-2", "vae", "mnist", "", "", ""]]
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "name", "architecture", "dataset", "latent", "parameters", "headline metric"]


def test_off_a_terminal_a_title_wider_than_its_table_is_one_line(capsys):
    # eval --checkpoint's title holds the checkpoint's path: cut over lines, it could not be copied or grepped
    title = "jointvae-mnist (checkpoint runs/a-long-folder/of-runs/checkpoint.pt at step 2)"
    print_table(("metric", "measured"), [("reconstruction", "716.751")], title=title)
    assert capsys.readouterr().out.splitlines()[0] == title


# --- a reader that stops early ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv,reader", [(["list", "--json"], "head -c 10"), (["list"], "head -n 1"),
                                         (["info", "wide-mnist"], "head -n 1")], ids=" | ".join)
def test_a_reader_that_stops_early_ends_the_command_quietly(cards, argv, reader):
    """``vaezoo ... | head``: exit code 0, nothing on stderr (no traceback, no 'Exception ignored')."""
    # more than a pipe holds: the write must fail
    write_card(cards, make_card(name="wide-mnist", latent=[{"family": "x" * 1_000_000, "size": 1}]))
    pipeline = f'"$@" | {reader} > /dev/null; echo "${{PIPESTATUS[0]}}"'
    result = subprocess.run(["bash", "-c", pipeline, "bash", sys.executable, "-m", "vaezoo", *argv],
                            capture_output=True, text=True, timeout=300, env=os.environ)
    assert (result.stdout, result.stderr) == ("0\n", "")


def shell(script: str, *argv: str) -> subprocess.CompletedProcess:
    """``script`` in bash, with ``"$@"`` the installed command line ``python -m vaezoo ARGV``."""
    return subprocess.run(["bash", "-c", script, "bash", sys.executable, "-m", "vaezoo", *argv],
                          capture_output=True, text=True, timeout=300, env=os.environ)


@pytest.mark.parametrize("argv", [["--version"], ["list", "--help"], ["list"], ["list", "--json"],
                                  ["info", "toy-mnist"]], ids=" ".join)
def test_a_full_disk_on_stdout_is_a_one_line_error_even_for_help_and_version(cards, argv):
    """The line said "No space left on device" alone, as if a file the command was given had failed."""
    write_card(cards, make_card(name="toy-mnist"))
    result = shell('"$@" > /dev/full', *argv)
    assert (result.returncode, result.stderr) == (1, "error: cannot write to standard output: No space left on "
                                                     "device\n")


SYNTHETIC = {"name": "synthetic-run", "architecture": "vae", "summary": "A run on synthetic images.",
             "dataset": "synthetic", "paper": "none", "license": "MIT", "vaezoo_version": "0.1.0",
             "model": {"latent": {"type": "gaussian", "dim": 2}, "regularizers": [{"type": "beta", "beta": 1.0}],
                       "encoder": {"type": "mlp_encoder", "hidden": [8]},
                       "decoder": {"type": "mlp_decoder", "hidden": [8]}},
             "train": {"epochs": 1, "batch_size": 16, "seed": 0, "optimizer": {"name": "Adam", "lr": 1e-3},
                       "data": {"name": "synthetic", "options": {"image_size": 8, "size": 32}}}}


def test_a_closed_stdout_is_as_a_reader_gone(cards):
    card = write_card(cards, make_card(name="toy-mnist"))
    result = shell('"$@" >&-; echo "rc=$?"', "info", str(card))
    assert (result.stdout, result.stderr) == ("rc=0\n", "")


@pytest.mark.slow
def test_a_closed_stderr_silences_the_status_lines_and_the_run_goes_on(tmp_path):
    card = write_toml(tmp_path / "card.toml", SYNTHETIC)
    result = shell('"$@" 2>&-; echo "rc=$?"', "train", str(card), "--out", str(tmp_path / "out"))
    assert result.stdout.splitlines()[-1] == "rc=0"
    assert (tmp_path / "out" / "synthetic-run-run.toml").is_file()


@pytest.mark.slow
def test_a_stderr_on_a_full_disk_silences_the_status_lines_and_the_run_goes_on(tmp_path):
    """The first status line raised ENOSPC: the run stopped before its first step, exit 1 and no word anywhere."""
    card = write_toml(tmp_path / "card.toml", SYNTHETIC)
    result = shell('"$@" 2>/dev/full; echo "rc=$?"', "train", str(card), "--out", str(tmp_path / "out"))
    assert result.stdout.splitlines() == [str(tmp_path / "out" / "synthetic-run-run.toml"), "rc=0"]
    assert (tmp_path / "out" / "synthetic-run-run.safetensors").is_file()


def test_text_the_terminals_encoding_cannot_hold_is_escaped(cards, tmp_path):
    card = write_card(tmp_path / "d\u00e9", make_card(name="toy-mnist", summary="caf\u00e9 \u2265 1"))
    result = subprocess.run([sys.executable, "-m", "vaezoo", "info", str(card)], capture_output=True,
                            timeout=300, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr
    assert f"# {tmp_path}/d\\xe9/toy-mnist.toml".encode() in result.stdout
    assert b'caf\\xe9 \\u2265 1' in result.stdout


# --- over-long names --------------------------------------------------------------------------------------

TOO_LONG = "n" * 10_000
OVER_NAME_MAX = "n" * 300


@pytest.mark.parametrize("argv,fragment", [
    (["info", TOO_LONG], "no zoo card named 'nnn"),
    (["eval", TOO_LONG], "no zoo card named 'nnn"),
    (["show", TOO_LONG, "sample", "-o", "x.png"], "no zoo card named 'nnn"),
    (["verify", TOO_LONG], "no zoo card named 'nnn"),
    (["info", TOO_LONG + ".toml"], "too long"),
    (["info", f"{OVER_NAME_MAX}/card.toml"], "too long"),
    (["gallery", OVER_NAME_MAX, "--no-data"], "File name too long: nnn"),
    (["new-plugin", "abc", "--dir", OVER_NAME_MAX], "File name too long: nnn"),
], ids=lambda v: " ".join(a[:12] for a in v) if isinstance(v, list) else None)
def test_an_over_long_name_is_a_one_line_error(cards, tmp_path, monkeypatch, capsys, argv, fragment):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (1, "")
    last = err.splitlines()[-1]  # after progress lines, if any
    assert last.startswith("error: ") and fragment in last and "Traceback" not in err, err[:300]
    if fragment.startswith("File name too long"):  # the OSError of the system: its file name is shortened
        assert re.search(r"\.\.\.n*(/vaezoo-abc|/\.vaezoo-gallery\.json)? \(3\d\d characters\); "
                         r"give a shorter name or path$", last), last
    assert os.listdir(tmp_path) == ["cards"]


# --- progress ---------------------------------------------------------------------------------------------

@pytest.fixture
def every_advance(monkeypatch):
    """Plain progress lines at every advance, not every few seconds."""
    monkeypatch.setattr(progress_module, "PLAIN_INTERVAL", 0.0)
    monkeypatch.delenv("VAEZOO_PROGRESS", raising=False)


def test_plain_progress_lines_go_to_stderr(every_advance, capsys):
    with progress(f"eval {HOSTILE}", total=10_000) as task:
        for _ in range(4):
            task.advance(1000)
    with progress("mig_chen") as task:
        task.advance(64)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert re.fullmatch(re.escape(f"eval {SHOWN}: 10% (1,000/10,000 images), ") + r"\d+\.\d s left", lines[0])
    assert lines[3].startswith(f"eval {SHOWN}: 40% (4,000/10,000 images), ")
    assert re.fullmatch(re.escape(f"eval {SHOWN}: 4,000 images in ") + r"\d+\.\d s", lines[4])
    assert re.fullmatch(r"mig_chen: 64 images, [\d,]+ images/s", lines[5])
    assert lines[6].startswith("mig_chen: 64 images in ") and len(lines) == 7


def test_plain_progress_waits_for_the_interval(capsys, monkeypatch):
    monkeypatch.delenv("VAEZOO_PROGRESS", raising=False)
    with progress("quick", total=3) as task:  # done well within the default interval: only the closing line
        for _ in range(3):
            task.advance()
    [line] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"quick: 3 images in \d\.\d s", line)


def test_work_that_counted_nothing_says_only_its_time(capsys, monkeypatch):
    """A metric that reads the codes an earlier pass made encodes no image: "0 images" would read as a failure."""
    monkeypatch.delenv("VAEZOO_PROGRESS", raising=False)
    with progress("eval card: cluster_accuracy"):
        pass
    [line] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"eval card: cluster_accuracy: done in \d\.\d s", line)


def test_vaezoo_progress_0_turns_progress_off(every_advance, monkeypatch, capsys):
    monkeypatch.setenv("VAEZOO_PROGRESS", "0")
    with progress("quiet", total=3) as task:
        task.advance(3)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("term", ["xterm-256color", "dumb"])
def test_forced_colour_off_a_terminal_gets_plain_lines_not_a_redrawn_bar(every_advance, monkeypatch, capsys, term):
    # FORCE_COLOR=1, as CI services set it, made rich take the log for a terminal: a live bar redrawn with carriage
    # returns and cursor moves (ten a second), and under TERM=dumb nothing until the work ended
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", term)
    monkeypatch.delenv("NO_COLOR", raising=False)
    with progress("eval card: losses", total=3) as task:
        for _ in range(3):
            task.advance()
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    lines = err.splitlines()
    assert [line.split(" (")[0] for line in lines[:3]] == ["eval card: losses: 33%", "eval card: losses: 67%",
                                                           "eval card: losses: 100%"]
    assert lines[3].startswith("eval card: losses: 3 images in ") and len(lines) == 4


@pytest.mark.parametrize("term", ["xterm-256color", "dumb"])
def test_forced_colour_off_a_terminal_gets_the_training_lines(monkeypatch, capsys, term):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", term)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("VAEZOO_PROGRESS", raising=False)
    with Reporter(total=6, start=0, per_epoch=3, every=2, interval=0) as reporter:
        for step in range(1, 7):
            reporter.update(step, 32, lambda: {"loss": 1.5})
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err
    assert [line.split(" |")[0] for line in err.splitlines()] == ["epoch 1/2 step 2/6", "epoch 2/2 step 4/6",
                                                                  "epoch 2/2 step 6/6"]


def test_in_a_jupyter_notebook_training_lines_go_to_stderr_and_tables_are_text_on_stdout(monkeypatch, capsys):
    """In a Jupyter kernel rich showed the training lines as displays of their own (no redirect_stderr took them,
    the cell's stderr did not hold them), and every table as an empty display, then the table in colour codes."""
    import rich.console
    import rich.jupyter

    displayed = []
    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)  # as rich finds an IPython kernel
    monkeypatch.setattr(rich.jupyter, "display", lambda segments, text: displayed.append(text))
    monkeypatch.delenv("VAEZOO_PROGRESS", raising=False)
    with Reporter(total=2, start=0, per_epoch=2, every=2, interval=0) as reporter:
        reporter.update(2, 32, lambda: {"loss": 1.5})
    print_table(["name", "dataset"], [["toy-a", "mnist"]])
    out, err = capsys.readouterr()
    assert displayed == []
    assert err.split(" |")[0] == "epoch 1/1 step 2/2"
    assert "\x1b" not in out and [line.split() for line in out.splitlines()[1::2]] == [
        ["┃", "name", "┃", "dataset", "┃"], ["│", "toy-a", "│", "mnist", "│"]]


BAR_SCRIPT = """
import sys
from vaezoo.terminal import progress
with progress("gallery", total=2, unit="cards") as outer:
    for card in range(2):
        with progress("rendering dSprites [/]", total=100) as inner:
            inner.advance(100)
        outer.advance()
print("data", file=sys.__stdout__)
"""


def test_a_terminal_gets_a_bar_and_stdout_only_data(tmp_path):
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    child = subprocess.Popen([sys.executable, "-c", BAR_SCRIPT], stdout=subprocess.PIPE, stderr=terminal,
                             env={**{k: v for k, v in os.environ.items() if k != "VAEZOO_PROGRESS"},
                                  "TERM": "xterm-256color"})  # a terminal that redraws (TERM=dumb gets lines)
    os.close(terminal)
    stdout = child.stdout.read()
    assert child.wait(timeout=300) == 0
    received = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:
            break
        if not chunk:
            break
        received += chunk
    os.close(controller)
    shown = ANSI.sub("", received.decode())
    assert stdout == b"data\n"
    assert "gallery" in shown and "2/2 cards" in shown and "100%" in shown
    assert "rendering dSprites [/]" in shown  # a nested task: a row under the outer bar, its text not markup


# --- eval -------------------------------------------------------------------------------------------------

@pytest.fixture
def trained(data_plugin, tmp_path):
    """The completed card of a finished run of the toy card."""
    path = write_toml(tmp_path / "toy.toml", make_card("toy"))
    assert main(["train", str(path), "--out", str(tmp_path / "out")]) == 0
    return tmp_path / "out" / "toyvae-bars-run.toml"


def test_eval_reports_progress_and_how_many_metrics_match(trained, every_advance, capsys):
    capsys.readouterr()
    assert main(["eval", str(trained), "--check", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)  # stdout holds the JSON only
    card = tomllib.loads(trained.read_text())
    n = len(card["metrics"])
    lines = err.splitlines()
    assert lines[-1] == f"check: {n} of {n} metrics match the card within relative tolerance 0.0001"
    assert any(re.fullmatch(r"eval toyvae-bars-run: losses: \d+% \([\d,]+/[\d,]+ images\), .* left", x)
               for x in lines)
    for name in card["eval_metrics"]:
        assert any(x.startswith(f"eval toyvae-bars-run: {name}: ") and x.endswith(" s") for x in lines), (name, lines)
    assert report["check_failures"] == []
