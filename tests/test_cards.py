"""Zoo cards: validation errors that name the file and field, discovery, wildcards, natural sort, filters."""

from __future__ import annotations

import errno
import os
import re
import tomllib

import numpy as np
import pytest
from kit import GAUSSIAN_MLP_RGB, install_plugin, make_card, write_card, write_toml
from pydantic import ValidationError

import vaezoo
import vaezoo.cli
import vaezoo.plugins
from vaezoo.context import LatentPart
from vaezoo.entries.catalog import CardWarning, SkippedCard, discover, get_card, parse_card, scan
from vaezoo.entries.entry import write_card as write_card_toml
from vaezoo.entries.schema import Card
from vaezoo.errors import CardError, UnknownNameError

SHA = "ab" * 32


@pytest.mark.parametrize("change, field, message", [
    (lambda c: c.pop("dataset"), "dataset", "Field required"),
    (lambda c: c["train"].update(epochs=0), "train.epochs", "greater than 0"),
    (lambda c: c.update(name="Bad Name"), "name", "should match pattern"),
    (lambda c: c.update(name="a" * 201), "name", "should have at most 200 characters"),
    (lambda c: c.update(weights={"file": "w.safetensors", "sha256": "xyz", "size": 10}), "weights.sha256",
     "should match pattern"),
    (lambda c: c.update(weights={"file": "w.pt", "sha256": SHA, "size": 10}), "weights", "must be a .safetensors"),
    (lambda c: c.update(weights={"file": "w.safetensors", "url": "https://x/w.safetensors", "sha256": SHA,
                                 "size": 10}), "weights", "exactly one of 'file' and 'url'"),
    (lambda c: c["train"]["optimizer"].update(name="Adagrad"), "train.optimizer.name", "Input should be"),
    (lambda c: c["train"]["optimizer"].update(lr=float("inf")), "train.optimizer.lr", "should be a finite number"),
    (lambda c: c["train"]["optimizer"].update(lr=float("nan")), "train.optimizer.lr", "should be a finite number"),
    (lambda c: c["train"]["optimizer"].update(options={"weight_decay": float("inf")}), "train.optimizer",
     "Adam option 'weight_decay': Input should be a finite number"),
    (lambda c: c["train"].update(compile="yes"), "train.compile", "Input should be a valid boolean"),
    (lambda c: c["train"].update(compile=1), "train.compile", "Input should be a valid boolean"),
    # a recipe's numbers as strict as its options: these trained an lr of 1.0, 3 epochs, batches of 1, 2 epochs
    (lambda c: c["train"]["optimizer"].update(lr=True), "train.optimizer.lr", "Input should be a valid number"),
    (lambda c: c["train"].update(epochs="3"), "train.epochs", "Input should be a valid integer"),
    (lambda c: c["train"].update(batch_size=True), "train.batch_size", "Input should be a valid integer"),
    (lambda c: c["train"].update(epochs=2.0), "train.epochs", "Input should be a valid integer"),
    (lambda c: c["train"].update(steps="5"), "train.steps", "Input should be a valid integer"),
    (lambda c: c["train"]["optimizer"].update(options={"amsgrad": "true"}), "train.optimizer",
     "Adam option 'amsgrad': Input should be a valid boolean"),
    (lambda c: c.update(metrics={"elbo": {"value": 1.0, "command": "vaezoo eval toy-mnist", "vaezoo_version": "0.1",
                                          "higher_is_better": "on"}}), "metrics.elbo.higher_is_better",
     "Input should be a valid boolean"),
])
def test_invalid_card_names_the_file_and_the_field(tmp_path, change, field, message):
    data = make_card(name="toy-mnist")
    change(data)
    path = write_toml(tmp_path / "toy-mnist.toml", data)
    with pytest.raises(CardError) as info:
        parse_card(path)
    text = str(info.value)
    assert text.startswith(f"{path}: field '{field}': ") and message in text
    assert "\n" not in text


def test_a_recipe_s_whole_numbers_given_as_numpy_or_torch_integers_are_taken_as_the_ints_they_are():
    """Strict against a card's `true`, "3" and 2.0, the recipe's counts refused np.int64(3) from Python as "Input
    should be a valid integer", which they took before; a bool is still no count."""
    import numpy as np
    import torch

    given = {"epochs": np.int64(3), "batch_size": np.int32(8), "checkpoint_every": torch.tensor(5),
             "steps": np.uint8(7)}
    recipe = Card.model_validate(make_card(name="toy-mnist", train=given)).train
    assert [(type(v), v) for v in (recipe.epochs, recipe.batch_size, recipe.checkpoint_every, recipe.steps)] == [
        (int, 3), (int, 8), (int, 5), (int, 7)]
    for value in (np.True_, torch.tensor(True), np.array(True)):
        with pytest.raises(ValidationError, match="train.epochs\n  Input should be a valid integer"):
            Card.model_validate(make_card(name="toy-mnist", train={"epochs": value}))


def test_a_field_unknown_to_this_vaezoo_on_a_card_of_a_newer_one_says_to_upgrade(tmp_path):
    data = make_card(name="toy-mnist", license_url="https://example.org/licence")
    path = write_toml(tmp_path / "toy-mnist.toml", {**data, "vaezoo_version": "3.2.0"})
    with pytest.raises(CardError, match=r"'license_url' is no field of a card to this vaezoo; the card was written "
                                        r"by vaezoo 3\.2\.0, newer than this vaezoo .*: upgrade vaezoo$"):
        parse_card(path)
    write_toml(path, data)  # written by this version: a typo, and nothing is said of versions
    with pytest.raises(CardError) as caught:
        parse_card(path)
    assert "upgrade" not in str(caught.value)


def test_unreadable_and_malformed_cards(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n", encoding="utf-8")
    with pytest.raises(CardError, match=f"^{bad}: not valid TOML"):
        parse_card(bad)
    with pytest.raises(CardError, match="cannot read card"):
        parse_card(tmp_path / "missing.toml")


def test_cards_are_frozen_and_round_trip_through_toml(tmp_path):
    card = Card.model_validate(make_card(name="toy-mnist",
                                         weights={"file": "w.safetensors", "sha256": SHA, "size": 3}))
    with pytest.raises(ValidationError, match="frozen"):
        card.name = "other"
    write_card_toml(card, tmp_path / "toy-mnist.toml")
    again = parse_card(tmp_path / "toy-mnist.toml")
    assert again.model_dump() == card.model_dump()
    assert card.path is None and again.path == (tmp_path / "toy-mnist.toml").resolve()


LAYOUT = [{"family": "gaussian", "size": 6, "name": "continuous"}, {"family": "categorical", "size": 3}]


def test_a_latent_layout_round_trips_through_toml_as_a_list_of_parts(tmp_path):
    card = Card.model_validate(make_card(name="toy-mnist", latent=LAYOUT))
    assert card.latent == [LatentPart(family="gaussian", size=6, name="continuous"),
                           LatentPart(family="categorical", size=3)]
    assert card.latent_text == "gaussian(6) + categorical(3)" and card.latent_families == ("gaussian", "categorical")
    path = tmp_path / "toy-mnist.toml"
    write_card_toml(card, path)
    assert tomllib.loads(path.read_text(encoding="utf-8"))["latent"] == LAYOUT
    assert parse_card(path).latent == card.latent
    written = 'latent = [{ family = "gaussian", size = 6, name = "continuous" }, { family = "categorical", size = 3 }]'
    assert Card.model_validate({**make_card(name="toy-mnist"), **tomllib.loads(written)}).latent == card.latent


@pytest.mark.parametrize("legacy, parts, shown", [
    ("gaussian(6) + categorical(3)", [("gaussian", 6, None), ("categorical", 3, None)], "gaussian(6) + categorical(3)"),
    ("cont: Gaussian(dim=3) + cat: GumbelCategorical(categories=4, temperature=0.67)",
     [("gaussian", 3, "cont"), ("gumbelcategorical", 4, "cat")], "gaussian(3) + gumbelcategorical(4)"),
    ("Laplace(dim=8)", [("laplace", 8, None)], "laplace(8)"),
    ("", None, ""),
])
def test_a_legacy_layout_stated_as_text_loads_into_parts(tmp_path, legacy, parts, shown):
    """Cards written before the layout was a list of parts (users' runs) load, into the parts of today's cards."""
    card = parse_card(write_toml(tmp_path / "toy-mnist.toml", make_card(name="toy-mnist", latent=legacy)))
    assert card.latent == (parts and [LatentPart(family=f, size=n, name=name) for f, n, name in parts])
    assert card.latent_text == shown
    assert card.latent_families == tuple(dict.fromkeys(f for f, _, _ in parts or ()))


@pytest.mark.parametrize("latent, message", [
    ("gaussian(6) + categorical", "latent part 'categorical' is not 'family(size)'"),
    ("gaussian(2.5)", "latent part 'gaussian(2.5)' is not 'family(size)'"),
    ([{"family": "gaussian mixture", "size": 6}], "should match pattern"),
    ([{"family": "gaussian", "size": 0}], "greater than 0"),
    ([{"family": "gaussian", "size": 6, "dims": 6}], "'latent.0.dims' is no field of [latent.0]"),
    ([], "at least 1 item"),
])
def test_a_bad_latent_layout_names_the_field(tmp_path, latent, message):
    path = write_toml(tmp_path / "toy-mnist.toml", make_card(name="toy-mnist", latent=latent))
    with pytest.raises(CardError, match="latent") as info:
        parse_card(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_cards_path_lists_several_directories(cards, tmp_path, monkeypatch):
    write_card(cards, make_card(name="toy-a"))
    write_card(tmp_path / "more", make_card(name="toy-b"))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", os.pathsep.join([str(cards), "", str(tmp_path / "more")]))
    cards = discover()
    assert sorted(cards) == ["toy-a", "toy-b"]
    assert cards["toy-b"].path == (tmp_path / "more" / "toy-b.toml").resolve()


def test_a_name_defined_twice_keeps_the_first_and_reports_the_other(cards, tmp_path, monkeypatch):
    first = write_card(cards, make_card(name="toy-a"))
    write_card(cards, make_card(name="toy-b"))
    (tmp_path / "more").mkdir()
    second = write_toml(tmp_path / "more" / "copy.toml", make_card(name="toy-a"))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", os.pathsep.join([str(cards), str(tmp_path / "more")]))
    with pytest.warns(CardWarning) as caught:
        cards = discover()
    assert sorted(cards) == ["toy-a", "toy-b"] and cards["toy-a"].path == first.resolve()
    reason = f"name 'toy-a' is already taken by {first.resolve()}; the card found first is kept"
    assert [str(w.message) for w in caught] == [f"card {second} skipped: {reason}"]
    assert scan().skipped == [SkippedCard(second, "toy-a", reason)]


def test_a_lookup_reads_again_only_the_card_files_that_changed(cards, monkeypatch):
    """Every lookup by name scans every folder: 2,000 cards cost a parse each per lookup until this was kept."""
    for name in ("toy-a", "toy-b", "toy-c"):
        write_card(cards, make_card(name=name))
    assert get_card("toy-a").name == "toy-a"
    read = []
    real_read = vaezoo.entries.catalog._read
    monkeypatch.setattr(vaezoo.entries.catalog, "_read", lambda path: read.append(path.name) or real_read(path))
    assert get_card("toy-b").name == "toy-b" and read == []
    changed = make_card(name="toy-c", summary="changed")
    write_toml(cards / "toy-c.toml.new", changed).replace(cards / "toy-c.toml")  # as a card is rewritten
    assert get_card("toy-c").summary == "changed" and read == ["toy-c.toml"]
    (cards / "toy-a.toml").unlink()
    with pytest.raises(UnknownNameError):
        get_card("toy-a")


@pytest.mark.parametrize("broken", [2, 5])
def test_many_skipped_cards_are_one_warning_and_a_few_one_each(cards, broken):
    write_card(cards, make_card(name="toy-a"))
    for i in range(broken):
        write_toml(cards / f"bad-{i}.toml", make_card(name=f"bad-{i}", colour="blue"))
    with pytest.warns(CardWarning) as caught:
        assert get_card("toy-a").name == "toy-a"
    said = [str(w.message) for w in caught]
    reason = "'colour' is no field of a card; remove it or correct its name"
    if broken <= 3:
        assert said == [f"card {cards / f'bad-{i}.toml'} skipped: {reason}" for i in range(broken)]
    else:
        assert said == [f"{broken} cards skipped, the first {cards / 'bad-0.toml'}: {reason}; run 'vaezoo list "
                        f"--skipped' to see why each was"]


def test_pretrained_lists_the_models_with_weights(cards):
    """timm's list_models(pretrained=True): list_models refused the keyword ("unexpected keyword argument")."""
    write_card(cards, make_card(name="toy-recipe"))
    write_card(cards, make_card(name="toy-trained", weights={"file": "toy-trained.safetensors", "sha256": "0" * 64,
                                                             "size": 8}))
    assert vaezoo.list_models() == vaezoo.list_models(pretrained=False) == ["toy-recipe", "toy-trained"]
    assert vaezoo.list_models(pretrained=True) == ["toy-trained"]
    assert vaezoo.list_models("toy-r*", pretrained=True) == []
    assert vaezoo.list_models(pretrained=np.True_) == ["toy-trained"]
    for given in ("no", 1, None):
        with pytest.raises(TypeError, match=rf"^list_models takes pretrained as True or False, not {given!r}$"):
            vaezoo.list_models(pretrained=given)


def test_a_card_outside_the_zoo_never_shadows_a_zoo_card(monkeypatch, tmp_path):
    monkeypatch.delenv("VAEZOO_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    zoo = discover()
    if not zoo:
        pytest.fail("the zoo has no cards; the built-in 'zoo' plugin should contribute zoo_cards/")
    name = sorted(zoo)[0]
    impostor = write_card(tmp_path, make_card(name=name, summary="an impostor"))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(tmp_path))
    with pytest.warns(CardWarning, match=re.escape(f"card {impostor} skipped: name '{name}' is already taken by "
                                                   f"{zoo[name].path}; the built-in zoo entry is kept")):
        card = get_card(name)
    assert card.path == zoo[name].path and card.summary == zoo[name].summary
    found = scan()
    assert found.cards.keys() == zoo.keys() and name in found.builtin
    assert [s.path for s in found.skipped] == [impostor]


def test_wildcards_and_natural_sort(cards):
    for name in ["toy-mnist-10", "toy-mnist-2", "toy-mnist-1", "toy-dsprites", "other-mnist"]:
        write_card(cards, make_card(name=name))
    assert vaezoo.list_models("toy-mnist-*") == ["toy-mnist-1", "toy-mnist-2", "toy-mnist-10"]
    assert vaezoo.list_models() == ["other-mnist", "toy-dsprites", "toy-mnist-1", "toy-mnist-2", "toy-mnist-10"]
    assert vaezoo.list_models("toy-?-*") == []
    assert vaezoo.list_models("*-mnist") == ["other-mnist"]
    assert vaezoo.list_models("toy-mnist-[12]") == ["toy-mnist-1", "toy-mnist-2"]
    assert vaezoo.list_models(["other-*", "toy-mnist-1?"]) == ["other-mnist", "toy-mnist-10"]  # as timm takes them
    assert vaezoo.list_models(None) == vaezoo.list_models()
    for pattern, where in ((5, None), (["toy-*", 1], None), ("*", "beta=6")):
        with pytest.raises(TypeError, match="takes"):
            vaezoo.list_models(pattern, where=where)
    # an int was AttributeError: 'int' object has no attribute 'casefold'
    for argument, given, said in (("dataset", 5, "'mnist'"), ("architecture", b"vae", "'jointvae'"),
                                  ("latent", ["gaussian"], "'categorical'")):
        with pytest.raises(TypeError, match=f"^{argument} takes a name, e.g. {said}, or None; got "
                                            f"{type(given).__name__}$"):
            vaezoo.list_models(**{argument: given})


def test_filters_on_dataset_architecture_and_fields(cards):
    write_card(cards, make_card(name="toy-a"))
    write_card(cards, make_card(name="toy-b", model=GAUSSIAN_MLP_RGB, dataset="dsprites",
                                          train={"epochs": 3, "batch_size": 64, "data": {"name": "dsprites"},
                                                 "optimizer": {"name": "Adam", "lr": 5e-4}}))
    write_card(cards, make_card(name="toy-c", architecture="other",
                                          model={"beta": 6, "channels": 1, "latent": {"type": "gaussian", "dim": 10}}))
    assert vaezoo.list_models(dataset="dsprites") == ["toy-b"]
    assert vaezoo.list_models(architecture="other") == ["toy-c"]
    assert vaezoo.list_models(where={"beta": "6"}) == ["toy-a", "toy-c"]  # toy-a: regularizers.0.beta = 6.0
    assert vaezoo.list_models(where={"beta": "4"}) == ["toy-b"]
    assert vaezoo.list_models(where={"beta": "6.0", "dim": "10"}) == ["toy-c"]
    assert vaezoo.list_models(where={"batch_size": "64"}) == ["toy-b"]
    assert vaezoo.list_models(where={"train.optimizer.lr": "0.0005"}) == ["toy-b"]
    assert vaezoo.list_models(where={"sampling": "mss"}) == ["toy-b"]
    assert vaezoo.list_models(where={"regularizers.0.sampling": "mws"}) == ["toy-a"]
    assert vaezoo.list_models(where={"beta": "7"}) == []
    assert vaezoo.list_models("toy-?", dataset="mnist", architecture="vae") == ["toy-a"]
    assert vaezoo.list_models("toy-?", dataset="dsprites", architecture="other") == []  # both known: none has both
    for filters, message in (({"dataset": "dsprite"}, r"dataset dsprite: no card has it \(did you mean dsprites\?\); "
                                                     "the cards have dsprites, mnist"),
                             ({"architecture": "vea"}, "architecture vea: no card has it"),
                             ({"latent": "categorial"}, "latent categorial: no card has it"),
                             ({"where": {"betta": "6"}}, "where betta: no card has such a field")):
        with pytest.raises(UnknownNameError, match=f"^{message}"):
            vaezoo.list_models(**filters)  # an empty list would say "no such models"


def test_unknown_name_lists_close_matches(cards):
    write_card(cards, make_card(name="toy-mnist"))
    write_card(cards, make_card(name="toy-dsprites"))
    with pytest.raises(UnknownNameError, match="no zoo card named 'toy-mnst'. Did you mean 'toy-mnist'"):
        get_card("toy-mnst")
    assert get_card("toy-mnist").name == "toy-mnist"


@pytest.mark.parametrize("given, said", [
    ("toy-mnist\n", r"'toy-mnist\n'"),  # was two lines, the second "'. Did you mean 'toy-mnist'", the same text
    (" toy-mnist ", "' toy-mnist '"),
    ("Toy-MNIST", "'Toy-MNIST'"),  # difflib missed it: no 'Did you mean'
])
def test_an_unknown_name_that_is_a_card_name_but_for_case_or_spaces_is_one_line_naming_it(cards, given, said):
    write_card(cards, make_card(name="toy-mnist"))
    with pytest.raises(UnknownNameError) as caught:
        get_card(given)
    assert str(caught.value).startswith(f"no zoo card named {said}. Did you mean 'toy-mnist'? (a card's name is lower "
                                        f"case, with nothing around it) Run 'vaezoo list' to see the zoo")


def test_an_unknown_name_names_the_installed_plugins_the_allow_list_leaves_out(monkeypatch, capsys):
    from vaezoo.plugins import get_plugins

    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    left_out = get_plugins().left_out
    assert "zoo" in left_out  # the plugin whose card folder holds jointvae-mnist
    hint = (f"; VAEZOO_LOAD_PLUGINS leaves out the installed plugin(s) {', '.join(left_out)}: add the one that "
            f"provides the card to it, or unset it")
    with pytest.raises(UnknownNameError) as caught:
        get_card("jointvae-mnist")
    assert str(caught.value) == f"no zoo card named 'jointvae-mnist'. Run 'vaezoo list' to see the zoo{hint}"
    assert vaezoo.cli.main(["info", "jointvae-mnist"]) == 1
    assert capsys.readouterr().err == f"error: {caught.value}\n"
    monkeypatch.delenv("VAEZOO_LOAD_PLUGINS")
    vaezoo.plugins.reset()
    with pytest.raises(UnknownNameError) as caught:
        get_card("no-such-card")
    assert "VAEZOO_LOAD_PLUGINS" not in str(caught.value)


def test_a_cards_path_entry_that_is_not_a_folder_is_skipped_with_one_warning_per_process(cards, tmp_path,
                                                                                         monkeypatch):
    write_card(cards, make_card(name="toy-a"))
    missing, module = tmp_path / "missing", tmp_path / "hooks.py"
    module.write_text("")
    card_file = write_card(tmp_path / "elsewhere", make_card(name="toy-b"))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", os.pathsep.join(map(str, [cards, missing, module, card_file])))
    with pytest.warns(CardWarning) as caught:
        assert sorted(discover()) == ["toy-a"]
        assert sorted(discover()) == ["toy-a"] and get_card("toy-a").name == "toy-a"  # no second warning
    assert [str(w.message) for w in caught] == [
        f"VAEZOO_CARDS_PATH entry {missing} skipped: no such folder; VAEZOO_CARDS_PATH lists folders of cards, "
        f"separated by '{os.pathsep}'",
        f"VAEZOO_CARDS_PATH entry {module} skipped: it is a file, not a folder of cards; list the folder that holds "
        f"the cards",
        f"VAEZOO_CARDS_PATH entry {card_file} skipped: it is a card file, not a folder of cards; list its folder, "
        f"{card_file.parent}, or give the card by its path",
    ]
    write_card(missing, make_card(name="toy-c"))  # made later in the process (a run's --out): found then
    assert sorted(discover()) == ["toy-a", "toy-c"]


def test_a_cards_path_folder_that_may_not_be_listed_is_skipped_with_a_warning_not_in_silence(cards, tmp_path,
                                                                                            monkeypatch, capsys):
    import vaezoo.entries.catalog as catalog

    locked = tmp_path / "locked"
    write_card(locked, make_card(name="toy-locked"))
    scandir = os.scandir

    def refused_in_locked(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return scandir(path)

    monkeypatch.setattr(catalog.os, "scandir", refused_in_locked)  # as chmod 000 does to a user without root
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(locked))
    assert vaezoo.cli.main(["list"]) == 0
    assert capsys.readouterr().err.splitlines()[0] == (
        f"warning: VAEZOO_CARDS_PATH entry {locked} skipped: it cannot be read (Permission denied); VAEZOO_CARDS_PATH "
        f"lists folders of cards")


def test_vaezoo_list_prints_the_same_table_and_one_warning_line_per_entry_that_is_not_a_folder(cards, tmp_path,
                                                                                                monkeypatch, capsys):
    write_card(cards, make_card(name="toy-a"))
    assert vaezoo.cli.main(["list"]) == 0
    table = capsys.readouterr().out
    missing = tmp_path / "no" / "such" / "folder"
    monkeypatch.setenv("VAEZOO_CARDS_PATH", os.pathsep.join(map(str, [cards, missing])))
    assert vaezoo.cli.main(["list"]) == 0
    out, err = capsys.readouterr()
    assert out == table
    assert err == (f"warning: VAEZOO_CARDS_PATH entry {missing} skipped: no such folder; VAEZOO_CARDS_PATH lists "
                   f"folders of cards, separated by '{os.pathsep}'\n")


SECTION_PLUGIN = """
from pydantic import BaseModel, ConfigDict

from vaezoo.hookspecs import hookimpl


class Provenance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lab: str
    gpus: int


@hookimpl
def vaezoo_register_card_sections(register):
    register("provenance", Provenance)
"""


def test_a_plugins_card_section_is_validated_kept_and_written_back_at_the_top_level(site, cards_dir, tmp_path):
    path = write_card(cards_dir, make_card(name="toy-lab", provenance={"lab": "here", "gpus": 2}))
    with pytest.warns(CardWarning, match=r"toy-lab.toml skipped: table 'provenance' "
                                         r"is no card field, and no loaded plugin registers a card section of that "
                                         r"name"):
        assert "toy-lab" not in discover()
    install_plugin(site, "lab", SECTION_PLUGIN)
    card = get_card("toy-lab")
    assert type(card.sections["provenance"]).__name__ == "Provenance" and card.sections["provenance"].gpus == 2
    write_card_toml(card, tmp_path / "again.toml")
    assert tomllib.loads((tmp_path / "again.toml").read_text())["provenance"] == {"lab": "here", "gpus": 2}
    write_card(cards_dir, make_card(name="toy-bad-lab", provenance={"lab": "here", "gpus": "two"}))
    with pytest.warns(CardWarning, match=r"toy-bad-lab.toml skipped: .*gpus"):
        assert "toy-lab" in discover() and "toy-bad-lab" not in discover()
    assert path.exists()


def test_a_cards_repr_is_readable_and_makes_the_card_again():
    """A notebook showed pydantic's repr of a card: one line of every field, each metric's unset note=None,
    parameters=None, data=None ... too (about 3,400 characters for jointvae-mnist)."""
    from vaezoo.entries import schema

    metric = {"value": 0.5, "command": "vaezoo eval toy", "vaezoo_version": "0.1.0", "note": "a \x1b[2J note"}
    latent = [{"family": "gaussian", "size": 3, "name": "z"}]
    card = Card.model_validate(make_card("toy", metrics={"mig_chen": metric}, latent=latent))
    shown = repr(card)
    lines = shown.splitlines()
    assert lines[0] == "Card(" and lines[1] == "    name='toyvae-bars'," and lines[-1] == ")"
    assert "None" not in shown and "'a \\x1b[2J note'" in shown and "\x1b" not in shown  # escaped, as Python's repr
    assert "    metrics={\n        'mig_chen': Metric(\n            value=0.5,\n" in shown  # nested, indented
    assert eval(shown, vars(schema) | {"LatentPart": LatentPart}) == card  # noqa: S307 - the repr, in its namespace
    assert card.model_dump()["metrics"]["mig_chen"]["data"] is None  # the card's data keeps every field
