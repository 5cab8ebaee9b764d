"""Plugins' card sections (``vaezoo_register_card_sections``) run under the isolation plugin code gets elsewhere:
a section model that exits or raises makes only the cards holding that section unusable, with one line naming the
section and its plugin; and every card vaezoo writes is checked to load back, the fallback paths included, so a
section with an unusual field (a ``set``) or a pydantic alias round-trips."""

from __future__ import annotations

import itertools
import tomllib

import pytest
from kit import assert_one_line_error, cli, install_plugin, make_card, run_vaezoo, child_env, write_card, write_entry

from vaezoo.entries.catalog import CardWarning, checked_toml, discover, get_card, parse_card
from vaezoo.entries.entry import update_card, updated_card_text
from vaezoo.errors import CardError
from vaezoo.plugins import PluginWarning

SECTION = """
import sys
from pydantic import BaseModel, ConfigDict, Field, field_validator

from vaezoo.hookspecs import hookimpl


class Lab(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=False)
    lab: str
    gpu_count: int = Field(alias="gpu-count")
    tags: set[str] = set()

    @field_validator("lab")
    @classmethod
    def _hostile(cls, value):
        if value == "exit":
            sys.exit(0)
        if value == "raise":
            raise RuntimeError("the section model broke")
        return value


@hookimpl
def vaezoo_register_card_sections(register):
    register("lab", Lab)
"""


@pytest.fixture
def lab(site, cards, monkeypatch):
    """The plugin ``labplugin`` registering the section ``[lab]`` (an alias, a set field, a hostile validator)."""
    install_plugin(site, "labplugin", SECTION)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core,labplugin")
    return cards


@pytest.mark.parametrize("hostile", ["exit", "raise"])
def test_a_section_model_that_exits_or_raises_makes_only_its_card_unusable(lab, capsys, hostile):
    """sys.exit(0) in a section model made 'vaezoo verify' exit 0, silently; one that raised broke list, info and
    verify for every card."""
    write_card(lab, make_card(name="good-card"))
    bad = write_card(lab, make_card(name="bad-card", lab={"lab": hostile, "gpu-count": 1}))
    with pytest.warns((CardWarning, PluginWarning)):
        assert "good-card" in discover() and "bad-card" not in discover()
    code, out, err = cli(capsys, "list")
    assert code == 0 and "good-card" in out and "bad-card" not in out and "Traceback" not in err
    for argv in (["info", str(bad)], ["verify", str(bad)]):
        code, out, err = cli(capsys, *argv)
        assert code == 1, (argv, out, err)
        assert_one_line_error(err, "the card section [lab] cannot be read: its plugin 'labplugin' failed reading it")
    code, out, err = cli(capsys, "info", "good-card")
    assert code == 0 and "good-card" in out


def test_verify_over_a_tampered_card_is_not_ended_by_a_section_calling_sys_exit(lab, tmp_path):
    card, _, weights = write_entry(lab, make_card(name="tampered", lab={"lab": "exit", "gpu-count": 1}))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    result = run_vaezoo("verify", env=child_env(tmp_path / "home", lab, lab.parent / "site") |
                        {"VAEZOO_LOAD_PLUGINS": "core,labplugin"})
    assert result.returncode == 1, result


def test_a_section_with_an_alias_and_a_set_round_trips_on_every_path(lab, capsys, tmp_path):
    """info's TOML did not load back; eval --write fell back to field names and left a card that no longer loads;
    a set field ended info in a traceback."""
    path = write_card(lab, make_card(name="lab-card", lab={"lab": "here", "gpu-count": 2, "tags": ["a", "b"]}))
    card = get_card("lab-card")
    assert card.sections["lab"].gpu_count == 2 and card.sections["lab"].tags == {"a", "b"}
    code, out, err = cli(capsys, "info", "lab-card")
    assert code == 0, err
    shown = tomllib.loads(out)
    assert shown["lab"] == {"lab": "here", "gpu-count": 2, "tags": ["a", "b"]} or shown["lab"]["tags"] == ["b", "a"]
    (tmp_path / "shown.toml").write_text(out)
    assert parse_card(tmp_path / "shown.toml").sections == card.sections
    changed = card.model_copy(update={"summary": "changed"})
    assert parse_card(path).sections == card.sections
    again = tmp_path / "again.toml"
    again.write_text(updated_card_text("# a comment \n" + path.read_text(), card, changed, again))
    assert parse_card(again).summary == "changed" and parse_card(again).sections == card.sections
    update_card(path, lambda now: now.model_copy(update={"summary": "updated"}))
    assert parse_card(path).summary == "updated" and parse_card(path).sections == card.sections
    assert checked_toml(changed)  # the fallback's text, checked to load back


def _tags_a_round_trip_reorders() -> list[str]:
    """Two tags whose set, rebuilt from the order it iterates in, iterates in the other order (their hashes collide
    in this process): a set written in its order and read back comes back reordered."""
    for i, j in itertools.combinations(range(1000), 2):
        tags = [f"tag{i}", f"tag{j}"]
        once = list(set(tags))
        if list(set(once)) != once:
            return tags
    raise AssertionError("no two tags of 1,000 collide: the test cannot set up its case")


def test_a_set_read_back_in_another_order_is_the_same_card(lab, tmp_path):
    """A set field whose order a round trip changes failed the load-back check: 'lab would read differently', and
    eval --write refused to write the card, in a process whose hash seed made the tags collide."""
    tags = _tags_a_round_trip_reorders()
    path = write_card(lab, make_card(name="lab-card", lab={"lab": "here", "gpu-count": 2, "tags": tags}))
    card = get_card("lab-card")
    changed = card.model_copy(update={"summary": "changed"})
    plain = tmp_path / "plain.toml"
    plain.write_text(checked_toml(changed))  # the fallback's text, refused before
    assert parse_card(plain).sections == card.sections
    update_card(path, lambda now: now.model_copy(update={"summary": "updated"}))
    assert parse_card(path).summary == "updated" and parse_card(path).sections["lab"].tags == set(tags)


def test_a_card_that_would_not_load_back_is_never_written(lab, tmp_path):
    """Where the text made would load as another card, the write is refused in one line, nothing written."""
    card = get_card_or_write(lab)
    broken = card.model_copy(update={"sections": {"lab": {"lab": "here"}}})  # a raw table the model refuses
    with pytest.raises(CardError, match="would not load back"):
        checked_toml(broken)
    target = tmp_path / "x.toml"
    with pytest.raises(CardError):
        updated_card_text(card.path.read_text(), card, broken, target)
    assert not target.exists()


def get_card_or_write(folder):
    write_card(folder, make_card(name="lab-card", lab={"lab": "here", "gpu-count": 2}))
    return get_card("lab-card")
