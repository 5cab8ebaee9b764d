"""An update of a card file (``eval --write``, ``seeds --write``) keeps what did not change: comments, the order
and format of keys and tables (vaezoo.entries.entry.update_card, vaezoo.entries.toml_update)."""

from __future__ import annotations

import math
import shutil
import tomllib
from pathlib import Path

import pytest
from kit import TINY_MODEL_TABLE
from tomlkit.exceptions import TOMLKitError

from vaezoo.entries.catalog import parse_card
from vaezoo.entries.entry import update_card
from vaezoo.entries.schema import Metric
from vaezoo.entries.toml_update import BOM, same, with_line_ends

ZOO = Path(__file__).resolve().parents[1] / "zoo_cards"

HAND_EDITED = """\
# A card edited by hand: this header stays.
name = "tiny-blobs"
architecture = "vae"   # the builder
summary = 'A tiny VAE for fault tests, in a literal string: C:\\no\\escapes'
dataset = "tiny_blobs"
paper = "Kingma & Welling (2014), Auto-Encoding Variational Bayes. https://arxiv.org/abs/1312.6114"
license = "MIT"
vaezoo_version = "0.1.0"
eval_metrics = ["elbo"]
train.epochs = 2
train.batch_size = 8
train.seed = 0
train.checkpoint_every = 4
train.data = { name = "tiny_blobs" }
train.optimizer.name = "Adam"
train.optimizer.lr = 0.01

""" + TINY_MODEL_TABLE + """
# The numbers measured on it.
[metrics.elbo]
value = -12.5   # nats
command = "vaezoo eval tiny-blobs --metric elbo"
vaezoo_version = "0.1.0"
note = "an old note"
parameters = { samples = 10, seed = 0 }
"""


def _metric(value: float, **fields) -> Metric:
    return Metric(value=value, command="vaezoo eval tiny-blobs", vaezoo_version="0.1.0", **fields)


def _card_file(tmp_path: Path, text: str = HAND_EDITED) -> Path:
    path = tmp_path / "tiny-blobs.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _measured(card):
    """A change as ``eval --write`` makes one: the elbo measured again (its note gone), a metric added."""
    elbo = card.metrics["elbo"].model_copy(update={"value": -11.0, "note": None})
    return card.model_copy(update={"metrics": {"elbo": elbo, "mig": _metric(0.25)},
                                   "eval_metrics": [*card.eval_metrics, "mig"]})


def test_an_update_keeps_comments_and_the_format_of_what_did_not_change(tmp_path):
    path = _card_file(tmp_path)
    written = update_card(path, _measured)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# A card edited by hand: this header stays.\nname = \"tiny-blobs\"\n")
    assert 'architecture = "vae"   # the builder\n' in text
    assert "# The numbers measured on it.\n[metrics.elbo]\n" in text
    assert "value = -11.0   # nats\n" in text  # the value changed, its comment stayed
    assert "note" not in text  # a key that went away is removed
    assert "parameters = { samples = 10, seed = 0 }\n" in text  # an inline table stays inline
    assert 'encoder = { type = "mlp_encoder", hidden = [8] }\n' in text
    assert "summary = 'A tiny VAE for fault tests, in a literal string: C:\\no\\escapes'\n" in text
    assert "train.optimizer.lr = 0.01\n" in text  # dotted keys stay dotted
    assert "[metrics.mig]\nvalue = 0.25\n" in text  # the new metric is added
    assert parse_card(path).model_dump() == written.model_dump()


def test_an_update_that_changes_nothing_leaves_the_file_as_it_was(tmp_path):
    path = _card_file(tmp_path)
    update_card(path, lambda card: card)
    assert path.read_text(encoding="utf-8") == HAND_EDITED


def test_a_card_that_starts_with_a_byte_order_mark_is_read_and_keeps_it_when_updated(tmp_path):
    # a Windows editor's card was refused as "not valid TOML (Invalid statement (at line 1, column 1))"
    path = tmp_path / "tiny-blobs.toml"
    path.write_bytes(HAND_EDITED.replace("\n", "\r\n").encode("utf-8-sig"))
    assert parse_card(path).metrics["elbo"].value == -12.5
    update_card(path, lambda card: card)
    assert path.read_bytes() == HAND_EDITED.replace("\n", "\r\n").encode("utf-8-sig")
    written = update_card(path, _measured)
    data = path.read_bytes()
    assert data.startswith(BOM.encode() + b"# A card edited by hand: this header stays.\r\n")
    assert data.count(BOM.encode()) == 1
    assert b"[metrics.mig]\r\nvalue = 0.25\r\n" in data and parse_card(path).model_dump() == written.model_dump()
    # the plain TOML a card is written as where an edit would not load back keeps the mark and the line ends too
    assert with_line_ends("a = 1\n", BOM + "b = 2\r\n") == BOM + "a = 1\r\n"


def test_a_dotted_key_table_takes_a_new_key(tmp_path):
    path = _card_file(tmp_path)
    written = update_card(path, lambda card: card.model_copy(
        update={"train": card.train.model_copy(update={"epochs": 3, "steps": 40})}))
    text = path.read_text(encoding="utf-8")
    assert "train.epochs = 3\n" in text and "# A card edited by hand" in text
    assert 'train.optimizer.lr = 0.01\ntrain.steps = 40\n' in text  # after the table's last dotted line
    assert "precision" not in text  # a default the file leaves out stays out
    assert parse_card(path).train == written.train


def test_nan_and_infinity_round_trip(tmp_path):
    path = _card_file(tmp_path)

    def odd(card):
        return card.model_copy(update={"metrics": {**card.metrics, "tc": _metric(math.nan),
                                                   "mig": _metric(math.inf), "gap": _metric(-math.inf)}})

    update_card(path, odd)
    text = path.read_text(encoding="utf-8")
    assert "value = nan\n" in text and "value = inf\n" in text and "value = -inf\n" in text
    metrics = parse_card(path).metrics
    assert math.isnan(metrics["tc"].value) and metrics["mig"].value == math.inf and metrics["gap"].value == -math.inf
    assert "# The numbers measured on it." in text
    before = path.read_text(encoding="utf-8")
    update_card(path, lambda card: card)  # NaN equals NaN here: nothing changed, nothing rewritten
    assert path.read_text(encoding="utf-8") == before


def _refuse(text, old, new):
    raise TOMLKitError("an edit tomlkit cannot make")


@pytest.mark.parametrize("edit", [lambda text, old, new: text.replace("-12.5", "-13.5"), _refuse],
                         ids=["wrong text", "tomlkit error"])
def test_text_that_would_not_load_back_as_the_card_is_written_plainly(tmp_path, monkeypatch, edit):
    """Whatever goes wrong keeping the layout, the card written is the card: its plain TOML."""
    path = _card_file(tmp_path)
    monkeypatch.setattr("vaezoo.entries.toml_update.updated_text", edit)
    written = update_card(path, _measured)
    assert path.read_text(encoding="utf-8") == written.toml()


@pytest.mark.parametrize("card_file", sorted(ZOO.glob("*.toml")), ids=lambda path: path.stem)
def test_a_shipped_card_updates_in_place(tmp_path, card_file):
    """Unchanged, a zoo card's file stays byte for byte; changed, it loads as the card written."""
    path = tmp_path / card_file.name
    shutil.copyfile(card_file, path)
    update_card(path, lambda card: card)
    assert path.read_bytes() == card_file.read_bytes()

    def measured(card):
        metrics = {name: metric.model_copy(update={"value": metric.value + 1}) for name, metric in card.metrics.items()}
        return card.model_copy(update={"metrics": {**metrics, "extra": _metric(0.5, parameters={"seed": 3})},
                                       "eval_metrics": [*card.eval_metrics, "extra"]})

    written = update_card(path, measured)
    assert same(parse_card(path).model_dump(), written.model_dump())  # NaN on a card equals NaN


def test_tables_out_of_order_and_keys_that_need_quotes_are_edited_in_place():
    from vaezoo.entries.toml_update import same, updated_text

    text = "[metrics.a]\nv = 1 # kept\n\n[model]\nx = 1\n\n# above b\n[metrics.b]\nv = 2\n"
    new = {"metrics": {"a": {"v": 1}, "b": {"v": 3}, "c d": {"v": math.nan}}, "model": {"x": 1, "a.b": "two\nlines"}}
    edited = updated_text(text, tomllib.loads(text), new)
    assert "v = 1 # kept\n" in edited and "# above b\n" in edited and "[metrics.b]\nv = 3\n" in edited
    assert same(tomllib.loads(edited), new)
