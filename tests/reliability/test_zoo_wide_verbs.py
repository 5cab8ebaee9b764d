"""One bad card never stops a zoo-wide verb: ``gallery``, ``push --all``, ``verify``, ``list`` and ``leaderboard``
skip the card, name it, and finish the rest."""

from __future__ import annotations

import json

import pytest
from kit import cli, make_card, write_entry

from vaezoo.extras.hub_push import MANIFEST_FILE

SPREAD = {"runs": [{"seed": 0, "value": 0.5}, {"seed": 1, "value": 0.7}], "n": 2, "median": 0.6, "min": 0.5,
          "max": 0.7, "shipped": 0, "selection": "the recipe's seed", "command": "vaezoo seeds X a b --write"}


def _metric(value: float, seeds: bool = False) -> dict:
    return {"value": value, "command": "vaezoo eval X", "vaezoo_version": "0.1.0", **({"seeds": SPREAD} if seeds
                                                                                      else {})}


@pytest.fixture
def zoo(cards, data_plugin, monkeypatch):
    """The test's cards only, with the extras' commands and the kit's datasets."""
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core,extras,testdata")
    return cards


def test_gallery_skips_a_card_whose_dataset_is_300_characters_and_draws_the_rest(zoo, tmp_path, capsys):
    """It stopped the whole gallery with a false 'already holds ...' message."""
    long = "d" * 300
    write_entry(zoo, make_card("tiny", name="good-card", metrics={"elbo": _metric(1.0, seeds=True)}))
    write_entry(zoo, make_card("tiny", name="long-card", dataset=long,
                               metrics={"elbo": _metric(2.0, seeds=True)}))
    unbuildable, _, _ = write_entry(zoo, make_card("tiny", name="unbuildable-card"))
    unbuildable.write_text(unbuildable.read_text().replace('name = "tiny_blobs"', 'name = "no_such_data"'))
    site = tmp_path / "pages"
    code, out, err = cli(capsys, "gallery", str(site), "--no-data")
    assert code == 0, err
    assert "already holds" not in err and "Traceback" not in err
    assert "seed distribution of elbo on dataset 'ddd" in err and "(cards long-card) skipped" in err
    assert "gallery: card unbuildable-card (" in err and "needs the dataset 'no_such_data'" in err
    page = (site / "index.html").read_text()
    assert "good-card" in page and (site / "good-card.sample.png").is_file() and "long-card" in page
    assert (site / "seeds-tiny_blobs-elbo.svg").is_file() and not (site / "unbuildable-card.sample.png").exists()


def test_only_seeds_skips_a_metric_whose_file_name_is_another_s_and_keeps_the_first(zoo, tmp_path, capsys):
    """Metrics 'a-b' and 'a/b' both drew seeds-DATASET-a-b.svg: the second overwrote the first, listed twice."""
    write_entry(zoo, make_card("tiny", name="dashed-card", metrics={"a-b": _metric(1.0, seeds=True)}))
    write_entry(zoo, make_card("tiny", name="slashed-card", metrics={"a/b": _metric(2.0, seeds=True)}))
    code, out, err = cli(capsys, "gallery", str(tmp_path / "plots"), "--only-seeds")
    assert code == 0, err
    assert out.splitlines() == [str(tmp_path / "plots" / "seeds-tiny_blobs-a-b.svg")]
    assert err == ("gallery: the seed distribution of a/b on dataset 'tiny_blobs' (cards slashed-card) skipped: its "
                   "file seeds-tiny_blobs-a-b.svg is that of the seed distribution of a-b on dataset 'tiny_blobs'\n")
    assert "seed distribution of a-b on tiny_blobs" in (tmp_path / "plots" / "seeds-tiny_blobs-a-b.svg").read_text()


def test_push_all_dry_run_skips_a_card_named_manifest_json_and_stages_the_rest(zoo, tmp_path, capsys):
    """A card named manifest.json, a legal name, stopped push --all --dry-run, the error blaming the output path."""
    pytest.importorskip("huggingface_hub")
    write_entry(zoo, make_card("tiny", name="good-card"))
    write_entry(zoo, make_card("tiny", name=MANIFEST_FILE))
    _, _, damaged = write_entry(zoo, make_card("tiny", name="damaged-card"))
    damaged.write_bytes(damaged.read_bytes()[:-1] + b"\0")
    out_dir = tmp_path / "staged"
    code, out, err = cli(capsys, "push", "--all", "owner", "--dry-run", "--out", str(out_dir))
    assert code == 0, err
    assert f"push --all: card {MANIFEST_FILE} (" in err and "rename the card to stage it" in err
    assert "push --all: card damaged-card (" in err and "does not match the card's" in err
    manifest = json.loads((out_dir / MANIFEST_FILE).read_text())
    assert sorted(manifest) == ["owner/good-card"]
    collection = json.loads((out_dir / "collection.json").read_text())
    assert [item["item_id"] for item in collection["items"]] == ["owner/good-card"]


def test_verify_list_and_leaderboard_name_the_bad_card_and_finish_the_rest(zoo, capsys):
    write_entry(zoo, make_card("tiny", name="good-card", metrics={"elbo": _metric(1.0)}))
    write_entry(zoo, make_card("tiny", name="other-card", metrics={"elbo": _metric(2.0)}))
    (zoo / "broken.toml").write_text("name = 'broken'\nthis is not TOML\n")
    code, out, err = cli(capsys, "verify", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 1 and rows["good-card"]["status"] == "ok" and rows["other-card"]["status"] == "ok"
    assert rows["broken"]["status"] == "SKIPPED" and "not valid TOML" in rows["broken"]["detail"]
    assert err.strip().splitlines()[-1] == ("error: 1 card(s) could not be read, so their weights were not verified "
                                            "('vaezoo list --skipped' says why)")
    code, out, err = cli(capsys, "list")
    assert code == 0 and "good-card" in out and "other-card" in out and "1 card skipped" in err
    code, out, err = cli(capsys, "leaderboard", "elbo")
    assert code == 0 and "good-card" in out and "other-card" in out and "broken.toml" in err
