"""The command line: tables, parsed JSON, one-line errors, and a torch-free list (widths: tests/test_terminal.py)."""

from __future__ import annotations

import importlib
import json
import math
import os
import resource
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit import assert_one_line_error, cli, make_card, run_python, run_vaezoo, write_card, write_entry

from vaezoo.cli import COMMANDS
from vaezoo.entries.catalog import get_card

LONG_NAME = "toy-a-long-name-joint-tc-capacity-seed-10"
METRIC = {"value": 0.8873, "command": "vaezoo eval toy --check", "vaezoo_version": "0.1.0"}
LAYOUT = [{"family": "gaussian", "size": 3, "name": "cont"}, {"family": "categorical", "size": 4, "name": "cat"}]
LEGACY = "cont: Gaussian(dim=3) + cat: GumbelCategorical(categories=4)"
"""A layout as cards stated it before it was a list of parts."""


@pytest.fixture
def listed(cards):
    """Three cards: one with a latent layout, parameter count and headline metric, as `vaezoo train` writes."""
    write_card(cards, make_card(name="toy-mnist-2"))
    write_card(cards, make_card(name=LONG_NAME, latent=LAYOUT, parameters=1234567, metrics={"accuracy": METRIC},
                                headline="accuracy"))
    write_card(cards, make_card(name="toy-dsprites-1", dataset="dsprites",
                                model={"image_size": 64, "channels": 1, "beta": 6,
                                       "latent": {"type": "gaussian", "dim": 10}}))
    return cards


def table_rows(text: str) -> list[list[str]]:
    """The body rows of a rich table, as lists of stripped cells."""
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if line.startswith("│")]


@pytest.mark.parametrize(("argv", "last"), [
    (["lis"], "vaezoo: error: 'lis' is not a vaezoo command; did you mean 'list'?"),
    (["leaderbord"], "vaezoo: error: 'leaderbord' is not a vaezoo command; did you mean 'leaderboard'?"),
    (["xyz"], "vaezoo: error: 'xyz' is not a vaezoo command; 'vaezoo --help' lists the commands"),
    (["list", "--jsn"], "vaezoo list: error: unrecognized arguments: --jsn"),
    (["list", "--js"], "vaezoo list: error: unrecognized arguments: --js"),  # options are spelled whole
])
def test_a_mistyped_command_or_option_is_a_usage_error_of_the_command_meant(listed, capsys, argv, last):
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, "") and err.splitlines()[-1] == last
    assert err.splitlines()[0].startswith(f"usage: vaezoo {argv[0]} " if len(argv) > 1 else "usage: vaezoo [-h]")


@pytest.mark.parametrize("verb", ["info", "show", "train", "eval", "seeds", "push"])
def test_every_command_that_takes_a_card_names_and_explains_it_alike(verb, capsys):
    code, out, _ = cli(capsys, verb, "--help")
    words = " ".join(out.split()).replace("- ", "-")  # argparse wraps lines after a hyphen too (hf- hub:)
    assert code == 0 and "CARD" in out.split("\n\n")[0]  # in the usage
    assert ("a zoo name, a card's TOML file, a folder holding one card, PLUGIN:FILE (a card file an installed plugin "
            "ships, such as the recipe methods:recipes/dipvae1-dsprites.toml), or hf-hub:OWNER/REPO[@REVISION]"
            in words)
    assert "DATA_ROOT" not in out and "MAX_STEPS" not in out


def test_list_json(listed, capsys):
    code, out, _ = cli(capsys, "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == [LONG_NAME, "toy-dsprites-1", "toy-mnist-2"]
    long = rows[0]
    assert long == {"name": LONG_NAME, "architecture": "vae", "dataset": "mnist", "latent": LAYOUT,
                    "parameters": 1234567, "headline": "accuracy", "metrics": {"accuracy": 0.8873}}


def test_list_table(listed, capsys):
    code, out, _ = cli(capsys, "list")
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "name", "architecture", "dataset", "latent", "parameters", "headline metric"]
    rows = table_rows(out)
    assert [r[0] for r in rows] == [LONG_NAME, "toy-dsprites-1", "toy-mnist-2"]
    assert rows[0] == [LONG_NAME, "vae", "mnist", "gaussian(3) + categorical(4)", "1,234,567", "accuracy 0.8873"]
    assert rows[1][3] == rows[2][3] == ""  # no layout stated


def test_list_filters(listed, capsys):
    def names(*argv):
        code, out, _ = cli(capsys, "list", "--json", *argv)
        assert code == 0
        return [r["name"] for r in json.loads(out)]

    assert names("toy-mnist-*") == ["toy-mnist-2"]
    assert names("--dataset", "dsprites") == ["toy-dsprites-1"]
    assert names("--arch", "vae", "--where", "beta=6") == [LONG_NAME, "toy-dsprites-1", "toy-mnist-2"]
    assert names("--where", "beta=6", "--where", "dim=10") == ["toy-dsprites-1"]
    assert names("--where", "image_size=64") == ["toy-dsprites-1"]
    assert names("--where", "beta=7") == [] and names("--dataset", "dsprites", "--where", "dim=3") == []
    assert names("toy-mnist-*", "toy-dsprites-*") == ["toy-dsprites-1", "toy-mnist-2"]  # any of them, as timm's
    assert names("--exclude", "toy-*-[0-9]") == [LONG_NAME]
    assert names("toy-*-[0-9]", "--exclude", "*-2") == ["toy-dsprites-1"]
    write_card(listed, make_card(name="toy-compiled", train={"compile": True}))
    for spelled in ("true", "True"):  # as the card's TOML spells it, and as Python does
        assert names("--where", f"compile={spelled}") == ["toy-compiled"]
    import vaezoo

    assert vaezoo.list_models(["toy-*-[0-9]"], exclude="*-mnist-*") == ["toy-dsprites-1"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--arch", "nothing"], "error: --arch nothing: no card has it; the cards have vae"),
    (["--dataset", "mnistt"], "error: --dataset mnistt: no card has it (did you mean mnist?); the cards have dsprites, "
                              "mnist"),
    (["--latent", "laplace"], "error: --latent laplace: no card has it; the cards have categorical, gaussian"),
    (["--where", "betta=6"], "error: --where betta: no card has such a field; name one by the end of its dotted path"),
    # a card's own fields, which --where never reads: they said "no card has such a field"
    (["--where", "dataset=mnist"], "error: --where reads a card's [model] and [train] fields, and dataset is none of "
                                   "them; filter by the card's dataset with --dataset mnist"),
    (["--where", "architecture=vae"], "error: --where reads a card's [model] and [train] fields, and architecture is "
                                      "none of them; filter by the card's architecture with --arch vae"),
])
def test_a_filter_no_card_could_pass_is_named_not_an_empty_table(listed, capsys, argv, message):
    code, out, err = cli(capsys, "list", *argv)
    assert (code, out) == (1, "") and err.startswith(message) and len(err.splitlines()) == 1


def test_a_pattern_that_matches_no_card_says_so(listed, capsys):
    code, out, err = cli(capsys, "list", "mine*")
    assert code == 0 and table_rows(out) == []
    assert err == "no card of the 3 found matches; 'vaezoo list' with no pattern or filter lists them all\n"
    assert cli(capsys, "list", "toy-*")[2] == ""
    code, out, _ = cli(capsys, "list", "mine*", "--group", "dataset", "--json")
    assert code == 0 and json.loads(out) == {}


def test_list_groups_by_dataset_or_architecture(listed, capsys):
    code, out, _ = cli(capsys, "list", "--json", "--group", "dataset")
    assert code == 0
    groups = json.loads(out)
    assert list(groups) == ["dsprites", "mnist"]
    assert [r["name"] for r in groups["mnist"]] == [LONG_NAME, "toy-mnist-2"]
    code, out, _ = cli(capsys, "list", "--group", "dataset")
    assert [line for line in out.splitlines() if line.startswith("dataset")] == ["dataset dsprites (1)",
                                                                                 "dataset mnist (2)"]
    assert [r[0] for r in table_rows(out)] == ["toy-dsprites-1", LONG_NAME, "toy-mnist-2"]
    code, out, _ = cli(capsys, "list", "--json", "--group", "architecture")
    assert list(json.loads(out)) == ["vae"]


def test_list_filters_and_groups_by_latent_family(listed, capsys):
    write_card(listed, make_card(name="toy-joint", latent="gaussian(6) + categorical(3) + categorical(2)"))
    write_card(listed, make_card(name="toy-legacy", latent=LEGACY))
    code, out, _ = cli(capsys, "list", "--json", "--latent", "categorical")
    assert code == 0 and [r["name"] for r in json.loads(out)] == [LONG_NAME, "toy-joint"]
    code, out, _ = cli(capsys, "list", "--json", "--latent", "GumbelCategorical")  # as the legacy text names it
    assert [r["name"] for r in json.loads(out)] == ["toy-legacy"]
    code, out, _ = cli(capsys, "list", "--json", "--latent", "gaussian")
    assert [r["name"] for r in json.loads(out)] == [LONG_NAME, "toy-joint", "toy-legacy"]
    code, out, _ = cli(capsys, "list", "--json", "--group", "latent")
    groups = {layout: [r["name"] for r in rows] for layout, rows in json.loads(out).items()}
    assert groups == {"(not stated)": ["toy-dsprites-1", "toy-mnist-2"],
                      "gaussian + categorical": [LONG_NAME, "toy-joint"],
                      "gaussian + gumbelcategorical": ["toy-legacy"]}


def test_latent_filter_reads_the_families_not_the_names_of_the_parts(cards, capsys):
    write_card(cards, make_card(name="toy-named", latent=[{"family": "gaussian", "size": 2, "name": "categorical"}]))
    code, out, err = cli(capsys, "list", "--json", "--latent", "categorical")
    assert (code, out, err) == (1, "", "error: --latent categorical: no card has it; the cards have gaussian\n")
    code, out, _ = cli(capsys, "list", "--json", "--latent", "Gaussian")  # the family, in any case
    assert [r["name"] for r in json.loads(out)] == ["toy-named"]


def test_list_markdown_shows_the_layout_as_text(listed, capsys):
    write_card(listed, make_card(name="toy-legacy", latent=LEGACY))
    code, out, _ = cli(capsys, "list", "--markdown", "toy-[al]*")
    assert code == 0
    assert [line.split(" | ")[2] for line in out.splitlines()[2:]] == ["gaussian(3) + categorical(4)",
                                                                      "gaussian(3) + gumbelcategorical(4)"]


def test_a_headline_with_seeds_shows_their_range(cards, capsys):
    seeds = {"runs": [{"seed": 0, "value": 0.5}, {"seed": 1, "value": 0.7}], "n": 2, "median": 0.6, "min": 0.5,
             "max": 0.7, "shipped": 1, "selection": "the best", "command": "vaezoo train toy --seed N"}
    write_card(cards, make_card(name="toy-seeds", metrics={"accuracy": {**METRIC, "value": 0.7, "seeds": seeds}},
                                headline="accuracy"))
    code, out, _ = cli(capsys, "list")
    assert table_rows(out)[0][-1] == "accuracy 0.7 (2 seeds: 0.5 to 0.7)"


def test_bad_where_is_a_one_line_error(listed, capsys):
    code, out, err = cli(capsys, "list", "--where", "beta")
    assert (code, out) == (2, "")
    assert err == "error: --where takes KEY=VALUE, got 'beta'\n"


def test_info_json_and_toml(listed, capsys):
    card = get_card(LONG_NAME)
    code, out, _ = cli(capsys, "info", LONG_NAME, "--json")
    assert code == 0
    assert json.loads(out) == {**card.model_dump(mode="json", exclude_none=True), "path": str(card.path),
                               "source": None}  # what the text's header says
    code, out, _ = cli(capsys, "info", LONG_NAME)
    first, _, body = out.partition("\n")
    assert first == f"# {card.path}"
    assert tomllib.loads(body) == card.model_dump(mode="json", exclude_none=True)
    code, out, _ = cli(capsys, "info", str(card.path), "--json")  # a card file works too
    assert json.loads(out)["name"] == LONG_NAME


def test_unknown_name_is_a_one_line_error_with_close_matches(listed, capsys):
    code, out, err = cli(capsys, "info", "toy-mnist-3")
    assert (code, out) == (1, "")
    assert err.startswith("error: no zoo card named 'toy-mnist-3'. Did you mean 'toy-mnist-2'")
    assert err.count("\n") == 1


def test_verify(cards, capsys):
    write_entry(cards, make_card(name="tiny-good"))
    _, _, damaged = write_entry(cards, make_card(name="tiny-bad"))
    write_card(cards, make_card(name="tiny-none"))
    code, out, err = cli(capsys, "verify", "--json")
    assert code == 0, err
    assert {r["name"]: r["status"] for r in json.loads(out)} == {
        "tiny-good": "ok", "tiny-bad": "ok", "tiny-none": "no weights"}

    data = damaged.read_bytes()
    damaged.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    code, out, err = cli(capsys, "verify", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 1 and err == "error: 1 weights file(s) failed verification\n"
    assert rows["tiny-bad"]["status"] == "FAILED" and "does not match the card's" in rows["tiny-bad"]["detail"]
    assert rows["tiny-good"]["status"] == "ok"

    code, out, _ = cli(capsys, "verify", "tiny-good")
    assert code == 0 and out.startswith("tiny-good: ok ")


def test_what_else_prints_on_stdout_during_a_json_command_goes_to_stderr(cards, capsys, monkeypatch):
    # a plugin's metric or architecture that prints as it runs (eval --json) put its lines before the JSON
    import vaezoo.entries.catalog

    write_card(cards, make_card(name="tiny-good"))
    listing = vaezoo.entries.catalog.listing
    monkeypatch.setattr(vaezoo.entries.catalog, "listing", lambda *a: print("chatty") or listing(*a))
    code, out, err = cli(capsys, "list", "--json")
    assert (code, [card["name"] for card in json.loads(out)], err) == (0, ["tiny-good"], "chatty\n")
    code, out, err = cli(capsys, "list")  # without --json too: the table alone on stdout
    assert (code, err) == (0, "chatty\n") and "chatty" not in out and "tiny-good" in out


@pytest.mark.parametrize("command, library, made, paths", [
    ("gallery", "vaezoo.extras.gallery.gallery", ["DIR/index.html"], ["DIR/index.html"]),
    ("study", "vaezoo.extras.study.build_study", SimpleNamespace(table="DIR/dsprites.csv", figures=["DIR/mig.svg"],
                                                                  doc=None), ["DIR/dsprites.csv", "DIR/mig.svg"])])
def test_what_a_part_prints_while_gallery_or_study_works_goes_to_stderr(capsys, monkeypatch, command, library, made,
                                                                         paths):
    # a chatty architecture's line stood on stdout among the paths, which a script reads
    module, name = library.rsplit(".", 1)
    monkeypatch.setattr(importlib.import_module(module), name, lambda *a, **k: print("chatty") or made)
    code, out, err = cli(capsys, command, "DIR")
    assert (code, out.splitlines(), err) == (0, paths, "chatty\n")


def test_verify_of_no_card_at_all_fails_saying_why(cards, capsys):
    # VAEZOO_LOAD_PLUGINS='' (the zoo left out) and no card on the path: exit 0 and not a word, a CI step that
    # verified nothing passing
    code, out, err = cli(capsys, "verify", "--json")
    assert (code, out) == (1, "")
    assert err.startswith("error: no card found, so no weights file was verified: VAEZOO_LOAD_PLUGINS leaves out "
                          "the installed plugins ") and err.count("\n") == 1
    assert cli(capsys, "verify")[:2] == (1, "")


def test_verify_of_several_names_gives_a_row_per_name_an_unknown_one_an_error_row(cards, capsys, tmp_path):
    # 'verify GOOD nosuch' failed whole on the unknown name: the good card's check was never reported
    write_entry(cards, make_card(name="tiny-good"))
    (tmp_path / "broken.toml").write_text("not [toml", encoding="utf-8")
    given = ["tiny-good", "tiny-goood", str(tmp_path / "broken.toml")]
    code, out, err = cli(capsys, "verify", *given, "--json")
    rows = json.loads(out)
    assert code == 1 and [(r["name"], r["status"]) for r in rows] == [
        ("tiny-good", "ok"), ("tiny-goood", "ERROR"), (given[2], "ERROR")]
    assert rows[1]["detail"].startswith("no zoo card named 'tiny-goood'. Did you mean 'tiny-good'? Run 'vaezoo list' "
                                        "to see the zoo")
    assert rows[2]["detail"].startswith(f"{given[2]}: not valid TOML")
    assert_one_line_error(err, "2 name(s) could not be read as a card, so nothing was verified for them")

    code, out, err = cli(capsys, "verify", "nosuch", "tiny-good")
    assert code == 1 and out.splitlines()[0].startswith("nosuch: ERROR no zoo card named 'nosuch'")
    assert out.splitlines()[1].startswith("tiny-good: ok ") and len(out.splitlines()) == 2
    assert_one_line_error(err, "1 name(s) could not be read as a card")


@pytest.mark.parametrize(("argv", "said"), [
    (["gallery", "{out}", "--only-seeds"], "error: no card found, so there is nothing to draw: "),
    (["gallery", "{out}", "--no-data"], "error: no card found, so there is nothing to draw: "),
    (["push", "--all", "me", "--dry-run", "--out", "{out}"], "error: no card found, so there is nothing to stage: "),
    (["study", "{out}"], "error: the zoo holds none of the study's entries (betavae-dsprites, "),
])
def test_a_command_over_the_zoo_that_finds_no_card_fails_saying_why_and_writes_nothing(cards, capsys, tmp_path, argv,
                                                                                        said):
    # each wrote an empty page, collection or table (or nothing) and exited 0 without a word
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, *(word.format(out=out) for word in argv))
    assert (code, stdout, err.count("\n")) == (1, "", 1)
    assert err.startswith(said) and "VAEZOO_LOAD_PLUGINS leaves out the installed plugins" in err, err
    assert not out.exists()


def test_verify_hashes_a_weights_file_that_several_cards_state_alike_once(cards, capsys, monkeypatch):
    import vaezoo.entries.entry

    card_path, _, _ = write_entry(cards, make_card(name="tiny-a"))
    weights = tomllib.loads(card_path.read_text())["weights"]
    for name in ("tiny-b", "tiny-c"):
        write_card(cards, make_card(name=name, weights=weights))
    write_card(cards, make_card(name="tiny-wrong", weights={**weights, "sha256": "0" * 64}))
    hashed = []
    real_verify = vaezoo.entries.entry.verify
    monkeypatch.setattr(vaezoo.entries.entry, "verify", lambda path, w: hashed.append(w.sha256) or real_verify(path, w))
    code, out, _ = cli(capsys, "verify", "--json")
    assert code == 1 and sorted(hashed) == sorted([weights["sha256"], "0" * 64])
    assert {r["name"]: r["status"] for r in json.loads(out)} == {
        "tiny-a": "ok", "tiny-b": "ok", "tiny-c": "ok", "tiny-wrong": "FAILED"}


def test_plugins_json_lists_every_entry_point(monkeypatch, capsys):
    from importlib.metadata import entry_points

    monkeypatch.delenv("VAEZOO_LOAD_PLUGINS", raising=False)
    code, out, _ = cli(capsys, "plugins", "--json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    found = {ep.name: ep.dist.name for ep in entry_points(group="vaezoo")}
    assert set(rows) == set(found)
    assert all(r["status"] == "ok" and r["error"] is None for r in rows.values()), rows
    # built-in exactly when vaezoo's own distribution registers it; a third party installed beside it is not
    assert all(r["builtin"] == (found[name] == "vaezoo") == (r["distribution"] == "vaezoo")
               for name, r in rows.items()), rows
    assert {"core", "zoo", "jointvae", "betatcvae"} <= {name for name, r in rows.items() if r["builtin"]}
    code, table, _ = cli(capsys, "plugins")
    assert "vaezoo_register_architectures" in " ".join(table.split())  # as --json and the hookspecs spell it
    assert all(hook.startswith("vaezoo_") for r in rows.values() for hook in r["hooks"])


def test_vaezoo_list_does_not_import_torch(listed):
    code = (
        "import sys\n"
        "from vaezoo.cli import main\n"
        f"codes = [main(['list']), main(['list', '--json', '--where', 'beta=6']), main(['info', {LONG_NAME!r}])]\n"
        "print(codes, sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    result = run_python("-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[0, 0, 0] []"


def test_python_dash_m_vaezoo(listed):
    result = run_vaezoo("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"vaezoo {__import__('vaezoo').__version__}")
    result = run_vaezoo("info", "no-such-model")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: no zoo card named 'no-such-model'")
    assert "Traceback" not in result.stderr


def test_leaderboard_ranks_the_cards_that_record_a_metric(cards, capsys):
    for name, value in (("toy-low", 0.2), ("toy-high", 0.9), ("toy-mid", 0.5)):
        write_card(cards, make_card(name=name, metrics={"accuracy": {**METRIC, "value": value}}, headline="accuracy"))
    write_card(cards, make_card(name="toy-none"))
    code, out, _ = cli(capsys, "leaderboard", "accuracy", "--json")
    assert code == 0
    assert [(r["name"], r["metrics"]["accuracy"]) for r in json.loads(out)] == [
        ("toy-high", 0.9), ("toy-mid", 0.5), ("toy-low", 0.2)]
    write_card(cards, make_card(name="toy-other", metrics={"other": {**METRIC, "value": 0.1}}, headline="other"))
    code, out, _ = cli(capsys, "leaderboard", "accuracy,other")
    assert table_rows(out)[0] == ["toy-high", "mnist", "0.9", ""]
    code, out, err = cli(capsys, "leaderboard", "nothing")
    assert (code, out) == (1, "") and err.startswith("error: no card records nothing")
    write_card(cards, make_card("tiny", name="toy-blobs"))
    code, out, err = cli(capsys, "leaderboard", "accuracy", "--dataset", "tiny_blobs")
    assert (code, err) == (1, "error: no card of dataset 'tiny_blobs' records accuracy; 'vaezoo info NAME' lists a "
                              "card's metrics\n")
    code, out, err = cli(capsys, "leaderboard", "accuracy", "--dataset", "mnsit")
    assert (code, err) == (1, "error: no card is of dataset 'mnsit' (did you mean mnist?); the zoo's datasets: "
                              "mnist, tiny_blobs\n")


@pytest.mark.parametrize("metrics", ["accuracy,acuracy", "acuracy,accuracy", "acuracy"])
def test_leaderboard_of_a_metric_no_card_records_names_it_and_its_close_match(cards, capsys, metrics):
    # 'leaderboard mig_chen,mig_dlb' printed a blank mig_dlb column for every card and exited 0
    write_card(cards, make_card(name="toy", metrics={"accuracy": {**METRIC, "value": 0.9}}, headline="accuracy"))
    write_card(cards, make_card("tiny", name="toy-blobs", metrics={"acuracy": {**METRIC, "value": 0.1}},
                                headline="acuracy"))
    assert cli(capsys, "leaderboard", metrics, "--dataset", "mnist") == (
        1, "", "error: no card of dataset 'mnist' records acuracy (did you mean accuracy?); 'vaezoo info NAME' lists "
               "a card's metrics\n")
    assert cli(capsys, "leaderboard", "accuracy,elsewise") == (
        1, "", "error: no card records elsewise; 'vaezoo info NAME' lists a card's metrics\n")


def test_leaderboard_of_no_card_at_all_says_why_in_one_line(cards, capsys):
    # VAEZOO_LOAD_PLUGINS='' (the zoo left out) was an AttributeError traceback: no dataset to suggest
    code, out, err = cli(capsys, "leaderboard", "mig_chen")
    assert (code, out) == (1, "")
    assert err.startswith("error: no card found: VAEZOO_LOAD_PLUGINS leaves out the installed plugins ")
    assert err.endswith("; add those whose cards you want, or unset it\n") and " zoo" in err and err.count("\n") == 1


def test_leaderboard_orders_ties_by_name_as_people_sort_names(cards, capsys):
    for name in ("toy-10", "toy-2", "toy-1"):
        write_card(cards, make_card(name=name, metrics={"accuracy": {**METRIC, "value": 0.5}}, headline="accuracy"))
    code, out, _ = cli(capsys, "leaderboard", "accuracy", "--json")
    assert code == 0 and [r["name"] for r in json.loads(out)] == ["toy-1", "toy-2", "toy-10"]


def test_leaderboard_ranks_values_that_are_not_finite_last_and_prints_strict_json(cards, capsys):
    # a hand-edited 'mig_chen = inf' ranked first
    for name, value in (("toy-nan", math.nan), ("toy-inf", math.inf), ("toy-ninf", -math.inf), ("toy-low", 0.2),
                        ("toy-high", 0.9)):
        write_card(cards, make_card(name=name, metrics={"tc": {**METRIC, "value": value}}, headline="tc"))
    write_card(cards, make_card(name="toy-none", metrics={"other": {**METRIC, "value": 0.5}}))
    code, out, _ = cli(capsys, "leaderboard", "tc,other", "--json")

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    rows = json.loads(out, parse_constant=refuse)
    assert code == 0
    assert [(r["name"], r["metrics"]["tc"]) for r in rows] == [
        ("toy-high", 0.9), ("toy-low", 0.2), ("toy-none", None), ("toy-inf", None), ("toy-nan", None),
        ("toy-ninf", None)]
    # null alone said an inf, a NaN and a card without the metric alike
    assert [r["not_finite"] for r in rows] == [{}, {}, {}, {"tc": "inf"}, {"tc": "nan"}, {"tc": "-inf"}]
    code, out, _ = cli(capsys, "leaderboard", "tc")
    assert [row[2] for row in table_rows(out)] == ["0.9", "0.2", "inf", "nan", "-inf"]


@pytest.mark.parametrize(("metric", "shown"), [("[/]", "[/]"), ("[red]m[/red]", "[red]m[/red]"),
                                              ("\x1b[2Jm\u202e", "\\x1b[2Jm\\u202e")])
def test_leaderboard_shows_a_third_party_card_s_metric_name_as_text_in_its_header(cards, capsys, metric, shown):
    # the header was rich markup: '[/]' was a MarkupError traceback, '[red]m[/red]' a red 'm', ESC sent raw
    write_card(cards, make_card(name="toy-odd", metrics={metric: {**METRIC, "value": 0.5}}))
    code, out, err = cli(capsys, "leaderboard", metric)
    assert (code, err) == (0, "")
    assert shown in out.splitlines()[1] and "\x1b" not in out and "\u202e" not in out
    assert table_rows(out) == [["toy-odd", "mnist", "0.5"]]


def test_leaderboard_ranks_each_metric_in_its_spec_s_direction(cards, capsys):
    values = {"toy-a": (0.1, 0.2, 90.0), "toy-b": (0.3, 0.1, 80.0), "toy-c": (0.2, 0.3, 85.0)}
    for name, (tc, mig, loss) in values.items():
        metrics = {"total_correlation": {**METRIC, "value": tc}, "mig_dlib": {**METRIC, "value": mig},
                   "reconstruction": {**METRIC, "value": loss}}
        write_card(cards, make_card(name=name, metrics=metrics, headline="mig_dlib"))
    ranked = {}
    for metric in ("total_correlation", "mig_dlib", "reconstruction"):
        code, out, _ = cli(capsys, "leaderboard", metric, "--json")
        ranked[metric] = [row["name"] for row in json.loads(out)]
    assert ranked == {"total_correlation": ["toy-a", "toy-c", "toy-b"],  # lower is better
                      "mig_dlib": ["toy-c", "toy-a", "toy-b"],  # higher is better
                      "reconstruction": ["toy-b", "toy-c", "toy-a"]}  # a loss: lower is better


# Prints the leaderboard of argv[1] as JSON rows' names, then whether torch was imported.
RANKED_WITHOUT_TORCH = """
import json, sys
from contextlib import redirect_stdout
from io import StringIO
from vaezoo.cli import main
with redirect_stdout(StringIO()) as out:
    assert main(["leaderboard", sys.argv[1], "--json"]) == 0
print(json.dumps([row["name"] for row in json.loads(out.getvalue())]))
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""


def test_leaderboard_ranks_in_the_direction_the_cards_record_without_importing_torch(cards, capsys):
    """Each metric's direction came from its spec, which imports torch (3.9 s where list takes 0.3): the cards
    record it, as eval --write writes it; where they do not all record one, the spec's still decides."""
    for name, (tc, own) in {"toy-a": (0.1, 5.0), "toy-b": (0.3, 1.0), "toy-c": (0.2, 3.0)}.items():
        metrics = {"total_correlation": {**METRIC, "value": tc, "higher_is_better": False},
                   "my_loss": {**METRIC, "value": own, "higher_is_better": False}}
        write_card(cards, make_card(name=name, metrics=metrics, headline="total_correlation"))
    for metric, ranked in (("total_correlation", ["toy-a", "toy-c", "toy-b"]),
                           ("my_loss", ["toy-b", "toy-c", "toy-a"])):  # a name nothing registers: the cards' only
        result = run_python("-c", RANKED_WITHOUT_TORCH, metric)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [json.dumps(ranked), "[]"]  # lower first, and no torch

    write_card(cards, make_card(name="toy-d", metrics={"total_correlation": {**METRIC, "value": 0.0}},
                                headline="total_correlation"))  # an older card records no direction: the spec's
    code, out, _ = cli(capsys, "leaderboard", "total_correlation", "--json")
    assert code == 0 and [row["name"] for row in json.loads(out)] == ["toy-d", "toy-a", "toy-c", "toy-b"]


def test_eval_records_each_registered_metric_s_direction_and_the_zoo_s_leaderboard_needs_no_torch():
    from vaezoo.assemble import metric
    from vaezoo.entries.catalog import list_cards
    from vaezoo.entries.schema import Card
    from vaezoo.evaluation.report import as_metrics

    card = Card.model_validate(make_card(eval_metrics=["total_correlation", "importance_log_likelihood"]))
    recorded = as_metrics(card, {"total_correlation": 0.5, "importance_log_likelihood": -90.0, "reconstruction": 60.0})
    assert {name: entry.higher_is_better for name, entry in recorded.items()} == {
        "total_correlation": False, "importance_log_likelihood": True, "reconstruction": None}
    zoo = list_cards()
    registered = {name for card in zoo for name in card.metrics if name in card.eval_metrics}
    assert {"mig_chen", "total_correlation", "cluster_accuracy"} <= registered
    for card in zoo:  # every zoo card records its metrics' directions, as their specs state them
        assert {name: card.metrics[name].higher_is_better for name in registered & card.metrics.keys()} == {
            name: metric(name).higher_is_better for name in registered & card.metrics.keys()}, card.name
    result = run_python("-c", RANKED_WITHOUT_TORCH, ",".join(sorted(registered)))
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "[]", result.stderr


@pytest.mark.parametrize("command", ["eval", "show", "info", "push", "seeds", "train"])
def test_help_says_a_model_is_a_name_a_card_file_or_a_folder_as_the_readme_does(capsys, command):
    code, out, _ = cli(capsys, command, "--help")
    assert code == 0 and "a zoo name, a card's TOML file" in out
    assert "a folder holding one card" in " ".join(out.split())


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_s_help_opens_with_what_it_does(capsys, command):
    code, out, _ = cli(capsys, command, "--help")
    paragraphs = out.split("\n\n")
    assert code == 0 and paragraphs[0].startswith(f"usage: vaezoo {command}")
    assert not paragraphs[1].lstrip().startswith(("positional arguments:", "options:")), paragraphs[1]


def test_vaezoo_list_group_as_the_readme_writes_it(capsys):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    (line,) = [line for line in readme.splitlines() if line.startswith("vaezoo list ")]
    group = line.split("--group ")[1].split(",")[0]
    code, out, err = cli(capsys, "list", "--group", group)
    assert code == 0 and out, err


@pytest.mark.parametrize("argv", [
    ["train", "vae-mnist", "--out", ""],
    ["train", "vae-mnist", "--out", "run", "--data-root", " "],
    ["eval", "vae-mnist", "--checkpoint", ""],
    ["show", "vae-mnist", "traverse", "--out", ""],
    ["convert", "jointvae-original", "x.pt", "--dataset", "mnist", "--out", ""],
    ["gallery", ""],
    ["study", "out", ""],
])
def test_an_empty_path_is_a_usage_error_not_the_current_folder(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, "") and "give a path, not an empty string" in err.strip().splitlines()[-1]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["train", "vae-mnist", "--out", "run"], ["eval", "vae-mnist"],
                                  ["show", "vae-mnist", "traverse", "--out", "x.png"]])
def test_a_data_root_that_is_a_file_is_named_as_one_before_anything_is_read_or_made(tmp_path, monkeypatch, capsys,
                                                                                     argv):
    monkeypatch.chdir(tmp_path)
    Path("a-file").write_text("mine")
    code, out, err = cli(capsys, *argv, "--data-root", "a-file")
    assert (code, out) == (1, "") and "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("error: --data-root a-file is a file, not a folder; give the folder "
                                            "holding the datasets, or leave it out to read them from VAEZOO_DATA or "
                                            "the default data folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_fold_below_takes_a_finite_number_of_nats(capsys, value):
    code, out, err = cli(capsys, "show", "vae-mnist", "traverse", "--out", "x.png", "--fold-below", value)
    assert (code, out) == (2, "")
    assert err.strip().splitlines()[-1].endswith(f"argument --fold-below: give a finite number >= 0, e.g. 1e-4, "
                                                  f"got '{value}'")


def test_every_option_a_library_message_can_name_is_spelled_as_the_command_line_has_it():
    """A keyword whose option's flag is not ``--KEYWORD`` (``--set`` keeps ``settings``) is in the spelling's table."""
    import argparse

    from vaezoo.cli import build_parser
    from vaezoo.cli.common import flag_spelling

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    wrong = [f"{name} {action.dest}: {flag_spelling(action.dest, '')} not in {action.option_strings}"
             for name, parser in commands.choices.items() for action in parser._actions
             if action.option_strings and action.dest != "help"
             and flag_spelling(action.dest, "") not in action.option_strings]
    assert wrong == []


def test_a_setting_out_of_its_bounds_is_refused_before_any_image_is_read(tmp_path, capsys):
    code, _, err = cli(capsys, "eval", "vae-mnist", "--data-root", str(tmp_path / "no-data"), "--metrics",
                       "importance_log_likelihood", "--set", "importance_log_likelihood.samples=0")
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "error: --set: metric 'importance_log_likelihood': samples = 0 is not a whole number (int), at least 1 "
        "and at most 10,000,000")


@pytest.mark.parametrize("argv", [["show", "jointvae-mnist", "sample", "-o", "x.png", "-n", "abc"],
                                  ["show", "jointvae-mnist", "sample", "-o", "x.png", "--columns", "2.5"],
                                  ["train", "vae-mnist", "--out", "x", "--epochs", "1.5"],
                                  ["train", "vae-mnist", "--out", "x", "--max-steps", "ten"]])
def test_a_count_that_is_no_whole_number_says_what_to_give(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, *argv)
    assert code == 2 and err.strip().splitlines()[-1].endswith(f"give a whole number, e.g. 10, got '{argv[-1]}'")
    assert list(tmp_path.iterdir()) == []


def test_a_warning_made_an_error_by_the_warnings_filter_is_a_one_line_error(tmp_path):
    """PYTHONWARNINGS=error turned vaezoo's own warning (a VAEZOO_CARDS_PATH entry skipped) into a traceback."""
    env = {**os.environ, "PYTHONWARNINGS": "error", "VAEZOO_CARDS_PATH": str(tmp_path / "missing")}
    result = run_vaezoo("list", env=env)
    assert result.returncode == 1
    assert_one_line_error(result.stderr, f"VAEZOO_CARDS_PATH entry {tmp_path / 'missing'} skipped",
                          "CardWarning, a warning that the warnings filter makes an error: do what it says, or "
                          "let it pass with PYTHONWARNINGS=default")


def test_torch_that_cannot_load_under_a_memory_limit_is_a_one_line_error():
    """Under ulimit -v 1 GiB torch's shared library fails to map: eval, train and show were an ImportError
    traceback."""

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 ** 30, resource.getrlimit(resource.RLIMIT_AS)[1]))

    result = subprocess.run([sys.executable, "-m", "vaezoo", "eval", "no-such-card"], capture_output=True, text=True,
                            timeout=300, preexec_fn=limited)
    assert result.returncode == 1
    assert_one_line_error(result.stderr, "cannot import torch: ", "may use 1.0 GiB of memory (ulimit -v)",
                          "raise the limit")


def test_a_library_not_installed_under_a_memory_limit_is_said_to_be_missing_not_short_of_memory(monkeypatch):
    """A cluster's login node sets ulimit -v: a library that is not installed was said to need a higher limit."""
    from vaezoo.cli import _import_uninterrupted
    from vaezoo.errors import VaezooError

    monkeypatch.setattr(resource, "getrlimit", lambda which: (16 * 2 ** 30, resource.RLIM_INFINITY))
    with pytest.raises(VaezooError) as caught:
        _import_uninterrupted(["vaezoo_no_such_library"])
    assert str(caught.value) == (f"cannot import vaezoo_no_such_library: No module named 'vaezoo_no_such_library'; "
                                 f"install it again in the Python environment running vaezoo ({sys.executable} -m "
                                 f"pip install vaezoo_no_such_library)")


LOUD = '''
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    from vaezoo.model import build_vae

    def loud_vae(context, image_size, channels, **model):
        print("loud: building the model")
        return build_vae(context, image_size, channels, **model)

    register("loud_vae", loud_vae)
'''


@pytest.mark.parametrize("command", [["eval", "CARD"], ["show", "CARD", "sample", "-o", "OUT/x.png"],
                                     ["verify", "CARD"], ["info", "CARD"]])
def test_what_a_plugin_prints_while_a_command_runs_goes_to_stderr_without_json_too(data_plugin, tmp_path, capsys,
                                                                                   command):
    # without --json, the builder's print stood on stdout above eval's table, in a script's data
    from kit import install_plugin

    install_plugin(data_plugin, "loud", LOUD)
    card = write_entry(tmp_path / "entry", make_card("tiny", architecture="loud_vae"))[0].parent
    capsys.readouterr()
    code, out, err = cli(capsys, *(word.replace("CARD", str(card)).replace("OUT", str(tmp_path)) for word in command))
    assert code == 0, err
    assert "loud:" not in out and out.strip()
    if command[0] in ("eval", "show"):  # the commands that build the model
        assert "loud: building the model" in err


WAIT = 30  # seconds an event is waited for before the test fails rather than hangs


def overlapping_commands(monkeypatch, then) -> dict[str, int]:
    """Run ``vaezoo plugins`` in threads 'first' and 'second', the second started while the first runs, the first
    ended first, each running ``then(name)`` as its command; their exit codes by thread."""
    import threading

    import vaezoo.cli.plugins
    from vaezoo.cli import main

    entered = {name: threading.Event() for name in ("first", "second")}
    done = {name: threading.Event() for name in entered}

    def run(args) -> int:
        name = threading.current_thread().name
        entered[name].set()
        assert done[name].wait(WAIT)
        then(name)
        return 0

    monkeypatch.setattr(vaezoo.cli.plugins, "run", run)
    codes = {}
    threads = {name: threading.Thread(target=lambda: codes.update({threading.current_thread().name: main(["plugins"])}),
                                      name=name) for name in entered}
    threads["first"].start()
    assert entered["first"].wait(WAIT)
    threads["second"].start()
    assert entered["second"].wait(WAIT)
    for name in ("first", "second"):  # the one started first ends first
        done[name].set()
        threads[name].join(WAIT)
    return codes


def test_commands_run_at_once_in_threads_keep_their_data_on_stdout_and_leave_the_streams_as_they_were(cards, capsys,
                                                                                                    monkeypatch):
    """sys.stdout is the process's: each command saved it, sent it to stderr, and put back what it had saved, so a
    command started in a thread while another held stdout aside printed its data to stderr, and the one that ended
    last left the process's stdout on stderr for good."""
    from vaezoo.cli.common import print_data

    def then(name: str) -> None:
        print_data(f"data of {name}")
        print(f"a plugin's print in {name}")

    stdout, stderr = sys.stdout, sys.stderr
    assert overlapping_commands(monkeypatch, then) == {"first": 0, "second": 0}
    out, err = capsys.readouterr()
    assert (sys.stdout, sys.stderr) == (stdout, stderr)
    assert out == "data of first\ndata of second\n"
    assert "a plugin's print in first" in err and "a plugin's print in second" in err


def test_commands_run_at_once_in_threads_show_their_warnings_in_one_line_and_leave_showwarning_as_it_was(cards, capsys,
                                                                                                    monkeypatch):
    """Each command showed warnings in a warnings.catch_warnings() block of its own, which saves showwarning and puts
    it back: the one that ended last put back the _show_warning the other had installed, for good."""
    import warnings

    from vaezoo.errors import TrainingWarning

    showwarning, filters = warnings.showwarning, list(warnings.filters)
    assert overlapping_commands(monkeypatch, lambda name: warnings.warn(f"a warning of {name}", TrainingWarning)) == {
        "first": 0, "second": 0}
    assert warnings.showwarning is showwarning and warnings.filters == filters
    assert capsys.readouterr().err.splitlines() == ["warning: a warning of first", "warning: a warning of second"]


def test_a_command_run_inside_another_leaves_the_outer_one_s_data_on_stdout(cards, capsys, monkeypatch):
    """The inner command's end put no data stream back: the outer command's data that followed went to stderr."""
    import vaezoo.cli.verify
    from vaezoo.cli import main
    from vaezoo.cli.common import print_data

    def run(args) -> int:
        main(["plugins", "--json"])
        print_data("outer's data")
        return 0

    monkeypatch.setattr(vaezoo.cli.verify, "run", run)
    code, out, err = cli(capsys, "verify")
    assert code == 0 and out.endswith("]\nouter's data\n") and "outer's data" not in err


def test_main_returns_argparse_s_codes_as_it_returns_every_other(capsys):
    """From a notebook's cell, main(["lst"]) raised SystemExit: 2 (IPython then added 'To exit: use exit, quit or
    Ctrl-D') and main(["--help"]) SystemExit: 0, where every other error is a returned code and one line."""
    from vaezoo.cli import main

    assert main(["lst"]) == 2
    said = capsys.readouterr().err.splitlines()[-1]
    assert said == "vaezoo: error: 'lst' is not a vaezoo command; did you mean 'list'?"
    assert main(["--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: vaezoo")
    assert main(["info", "jointvae-mnist", "--jsn"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("unrecognized arguments: --jsn")
