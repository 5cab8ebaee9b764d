"""Card edits keep the user's text (``eval --write``, ``seeds --write``: vaezoo.entries.entry.update_card): a card
whose lines end in CRLF keeps CRLF on every line, the added ones and the plain-TOML fallback included; a card whose
tables are written as dotted keys (``metrics.mig.value = 0.2`` among top-level keys) keeps every comment and line,
a new key added as one more dotted line."""

from __future__ import annotations

import tomllib

import pytest
from kit import TINY_MODEL_TABLE, cli, make_card, write_entry

from vaezoo.entries.catalog import parse_card
from vaezoo.entries.entry import update_card
from vaezoo.entries.schema import Metric
from vaezoo.entries.toml_update import updated_text

HEAD = """\
# My card, by hand.
name = "tiny-blobs"
architecture = "vae"   # the builder
summary = "A tiny VAE."
dataset = "tiny_blobs"
paper = "Kingma & Welling (2014), Auto-Encoding Variational Bayes. https://arxiv.org/abs/1312.6114"
license = "MIT"
vaezoo_version = "0.1.0"
eval_metrics = ["elbo"]
"""
DOTTED_METRICS = """\
# what I measured
metrics.elbo.value = -12.5   # nats
metrics.elbo.command = "vaezoo eval tiny-blobs"
metrics.elbo.vaezoo_version = "0.1.0"
metrics.mig.value = 0.2   # by hand
metrics.mig.command = "vaezoo eval tiny-blobs --metrics mig"
metrics.mig.vaezoo_version = "0.1.0"
# end of metrics
"""
TABLES = """
[train]   # the recipe
epochs = 2
batch_size = 8
data = { name = "tiny_blobs" }
optimizer = { name = "Adam", lr = 0.01 }

""" + TINY_MODEL_TABLE


def _metric(value: float, **fields) -> Metric:
    return Metric(value=value, command="vaezoo eval tiny-blobs --write", vaezoo_version="0.1.0", **fields)


def _measured(card):
    """As ``eval --write`` changes a card: a metric measured again, one measured for the first time."""
    metrics = {**card.metrics, "elbo": _metric(-11.0), "gap": _metric(0.125)}
    return card.model_copy(update={"metrics": metrics, "eval_metrics": [*card.eval_metrics, "gap"]})


def _crlf_kinds(data: bytes) -> tuple[int, int]:
    """(lines ending CRLF, lines ending in a bare LF)."""
    crlf = data.count(b"\r\n")
    return crlf, data.count(b"\n") - crlf


@pytest.mark.parametrize("text", [HEAD + TABLES, HEAD + DOTTED_METRICS + TABLES], ids=["tables", "dotted metrics"])
def test_a_crlf_card_keeps_crlf_on_every_line(tmp_path, text):
    """eval --write added LF lines to a CRLF card: the file ended with mixed line endings."""
    path = tmp_path / "tiny-blobs.toml"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    written = update_card(path, _measured)
    data = path.read_bytes()
    assert _crlf_kinds(data)[1] == 0 and _crlf_kinds(data)[0] > text.count("\n")  # lines added, each CRLF
    assert data.decode().replace("\r\n", "\n").startswith(HEAD.replace('["elbo"]', '["elbo", "gap"]'))
    assert parse_card(path).metrics == written.metrics


def test_the_plain_toml_fallback_keeps_crlf_too(tmp_path, monkeypatch):
    """Where the edit cannot be made, the card is written as plain TOML: with the file's line endings."""
    path = tmp_path / "tiny-blobs.toml"
    path.write_bytes((HEAD + TABLES).replace("\n", "\r\n").encode())

    def refuse(text, old, new):
        raise ValueError("an edit tomlkit cannot make")

    monkeypatch.setattr("vaezoo.entries.toml_update.updated_text", refuse)
    written = update_card(path, _measured)
    assert _crlf_kinds(path.read_bytes())[1] == 0
    assert parse_card(path).metrics == written.metrics


def test_an_lf_card_stays_lf():
    text = HEAD + TABLES
    edited = updated_text(text, tomllib.loads(text), {**tomllib.loads(text), "license": "Apache-2.0"})
    assert "\r" not in edited and 'license = "Apache-2.0"\n' in edited


def test_top_level_dotted_metrics_keep_every_comment_and_line(tmp_path):
    """A new metric among top-level dotted metrics.* keys dropped every comment and the layout (the edit put a
    [metrics.gap] header among the dotted lines, which did not load back, and the plain TOML was written)."""
    path = tmp_path / "tiny-blobs.toml"
    path.write_text(HEAD + DOTTED_METRICS + TABLES, encoding="utf-8")
    written = update_card(path, _measured)
    text = path.read_text(encoding="utf-8")
    assert "[metrics" not in text  # no header dropped among the dotted keys
    kept = (HEAD + DOTTED_METRICS + TABLES).replace("-12.5", "-11.0").replace('["elbo"]', '["elbo", "gap"]')
    lines = text.splitlines()
    assert [line for line in lines if not line.startswith("metrics.gap")] == [
        line.replace('command = "vaezoo eval tiny-blobs"', 'command = "vaezoo eval tiny-blobs --write"')
        if line.startswith("metrics.elbo.command") else line for line in kept.splitlines()]
    new = [index for index, line in enumerate(lines) if line.startswith("metrics.gap")]
    assert len(new) == 1 and lines[new[0] - 1].startswith("metrics.mig.")  # after the table's last dotted line
    assert parse_card(path).metrics == written.metrics


def test_a_key_new_to_a_dotted_table_at_any_depth_is_one_more_dotted_line():
    """The class: a table written as dotted keys (inside a [table] too) takes a new key, a value or a table, as a
    dotted line after its last one."""
    text = "a = 1\nx.y.v = 1  # one\nx.y.w = 2\n# after x\n\n[t]\np.q = 1  # kept\np.r = 2\n\n[u]\nk = 1\n"
    old = tomllib.loads(text)
    new = {**old, "x": {"y": {"v": 1, "w": 2, "n": 3}, "z": {"deep": {"s": "t"}}},
           "t": {"p": {"q": 1, "r": 2, "s": {"m": [1, 2]}}}}
    edited = updated_text(text, old, new)
    assert tomllib.loads(edited) == new
    assert "[x" not in edited and "[t.p" not in edited
    assert all(line in edited.splitlines() for line in text.splitlines())
    assert edited.index("# after x") > edited.index("x.z")  # added after the table's lines, before what follows


def test_eval_write_on_a_crlf_card_with_dotted_metrics(data_plugin, cards, capsys, monkeypatch):
    """The example through the command: ``vaezoo eval CARD --write``."""
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core,testdata")
    card, _, _ = write_entry(cards, make_card("tiny", eval_metrics=["elbo"]))
    data = tomllib.loads(card.read_text())
    weights = data["weights"]
    text = (HEAD + DOTTED_METRICS + TABLES).replace('name = "tiny-blobs"', f'name = "{data["name"]}"')
    text += "\n[weights]\n" + "".join(f"{key} = {value!r}\n".replace("'", '"') for key, value in weights.items())
    card.write_bytes(text.replace("\n", "\r\n").encode())
    assert parse_card(card).weights is not None
    code, _, err = cli(capsys, "eval", str(card), "--metrics", "elbo", "--write")
    assert code == 0, err
    after = card.read_bytes()
    assert _crlf_kinds(after)[1] == 0
    assert b"# what I measured\r\n" in after and b"   # nats\r\n" in after and b"# end of metrics\r\n" in after
    assert b"[metrics" not in after
