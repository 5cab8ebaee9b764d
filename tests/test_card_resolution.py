"""Your own models load like zoo models: by zoo name, by card file path, or by a folder holding one card."""

from __future__ import annotations

import errno
import json
import os
import re
import warnings

import numpy as np
import pytest
import torch
from kit import cli, make_card, write_card, write_entry

import vaezoo
from vaezoo.cli import main
from vaezoo.entries.catalog import AmbiguousNameWarning, card_reference, discover, get_card
from vaezoo.errors import CardError, DeviceError, UnknownNameError


@pytest.fixture
def run_folder(tmp_path):
    """A folder as a training run leaves it: one card and its weights, outside every card directory."""
    folder = tmp_path / "run"
    folder.mkdir()
    card, state, _ = write_entry(folder, make_card(name="mine"), seed=3)
    return folder, card, state


def assert_loads_with(model, state) -> None:
    assert model.card.name == "mine" and not model.training
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    assert all(torch.equal(loaded[k], v) for k, v in state.items())


@pytest.mark.parametrize("how", ["file str", "file Path", "folder str", "folder Path", "folder with slash"])
def test_load_by_path(run_folder, tmp_path, monkeypatch, how):
    folder, card, state = run_folder
    target = {"file str": str(card), "file Path": card, "folder str": str(folder), "folder Path": folder,
              "folder with slash": str(folder) + os.sep}[how]
    monkeypatch.chdir(tmp_path.parent)  # the weights resolve beside the card, not from the working folder
    assert_loads_with(vaezoo.load(target), state)
    assert get_card(target).path == card.resolve()


def test_relative_paths_and_a_bare_folder_name(run_folder, tmp_path, monkeypatch):
    folder, card, state = run_folder
    monkeypatch.chdir(tmp_path)
    assert_loads_with(vaezoo.load("run/mine.toml"), state)
    assert_loads_with(vaezoo.load("run"), state)  # no separator, but it exists: a path
    monkeypatch.chdir(folder)
    assert get_card("mine.toml").path == card.resolve()  # ends in .toml: a path


def test_a_name_is_not_a_path(run_folder, monkeypatch):
    """Outside the cards path, 'mine' is a name the zoo lacks, even with the card on disk elsewhere."""
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    with pytest.raises(UnknownNameError, match="no zoo card named 'mine'"):
        get_card("mine")


def test_on_the_cards_path_the_run_lists_beside_the_whole_zoo(run_folder, monkeypatch):
    folder, _, state = run_folder
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    zoo = vaezoo.list_models()
    assert zoo, "the built-in zoo has no cards"
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(folder))
    assert sorted(vaezoo.list_models()) == sorted(zoo + ["mine"])
    assert_loads_with(vaezoo.load("mine"), state)


def test_each_load_of_a_name_has_a_card_of_its_own(cards):
    """A card is frozen, but its dicts are dicts: two loads of one name shared them with the catalog, so a change
    made in place to one model's card reached the other model's and every later load's in the process."""
    write_entry(cards, make_card(name="mine"))

    def dicts(card) -> list[dict]:
        return [card.metrics, card.sections, card.model, card.train.data.options]

    first, second = vaezoo.load("mine"), vaezoo.load("mine")
    for changed in dicts(first.card) + dicts(get_card("mine")) + dicts(vaezoo.build_model("mine").card):
        changed["mine"] = "changed"
    for card in (second.card, vaezoo.load("mine").card, get_card("mine")):
        assert not any("mine" in each for each in dicts(card))


@pytest.mark.parametrize("cards, found", [
    ([], "found no *.toml file"),
    (["a", "b"], "found a.toml, b.toml"),
    ([f"c{i}" for i in range(1200)], "found c0.toml, c1.toml, c10.toml and 1,197 more"),  # a folder of a lab's cards
])
def test_a_folder_without_exactly_one_card_is_a_one_line_error(tmp_path, capsys, cards, found):
    folder = tmp_path / "folder"
    folder.mkdir()
    for name in cards:
        write_card(folder, make_card(name=name))
    with pytest.raises(CardError, match=re.escape(f"folder {folder} must hold exactly one card, {found}; ")):
        get_card(folder)
    assert main(["info", str(folder)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: folder {folder} must hold exactly one card, {found}")
    assert err.count("\n") == 1


def test_a_missing_path_names_the_file(tmp_path):
    with pytest.raises(CardError, match="nothing.toml: cannot read card"):
        get_card(tmp_path / "nothing.toml")


@pytest.mark.parametrize("given, repo", [("me/jvae", "me/jvae"), ("hf_hub:me/jvae@v1", "me/jvae@v1"),
                                         ("HF-HUB:me/jvae", "me/jvae"), ("Hf_Hub:me/jvae", "me/jvae")])
def test_a_missing_path_shaped_as_a_hub_repository_names_the_hub_spelling(tmp_path, monkeypatch, given, repo):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CardError, match=f"^{given}: no such file or folder; for a Hugging Face Hub repository, "
                                        f"write hf-hub:{repo}$"):
        vaezoo.load(given)


def test_a_missing_folder_named_as_timm_names_a_local_folder_names_vaezoos_spelling(tmp_path, monkeypatch):
    """'local-dir:runs/x' and 'HF-HUB:me/jvae' were 'cannot read card (No such file or directory)'."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CardError, match=r"^local-dir:runs/x: no such file or folder; vaezoo names a folder by its "
                                        r"path alone: write runs/x$"):
        vaezoo.load("local-dir:runs/x")


@pytest.mark.parametrize("given", [None, 42, ["jointvae-mnist"]])
def test_a_card_is_named_by_a_string_or_a_path_only(given):
    with pytest.raises(TypeError, match=f"a card is named by a string or a path .*, not by {type(given).__name__}"):
        vaezoo.load(given)


def test_a_model_given_where_a_card_is_expected_is_told_its_card_is_model_card():
    from vaezoo.evaluation.report import evaluate_card

    model = vaezoo.build_model("vae-mnist")
    for call in (get_card, evaluate_card):
        with pytest.raises(TypeError, match=rf"not by {type(model).__name__}; a model's card is model\.card$"):
            call(model)


@pytest.mark.parametrize("given", ["jointvae-mnist\0", os.path.join("runs", "a\0b")])
def test_a_name_with_a_nul_character_is_a_card_error(given):
    with pytest.raises(CardError, match="holds a NUL character"):
        get_card(given)


def test_a_card_file_is_read_even_if_a_zoo_entry_holds_its_name(tmp_path, monkeypatch):
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    name = sorted(discover())[0]
    card, state, _ = write_entry(tmp_path, make_card(name=name), seed=5)
    model = vaezoo.load(card)
    assert model.card.path == card.resolve() and model.card.architecture == "vae"
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert get_card(name).path != card.resolve()  # by name, the zoo's entry


def test_every_command_takes_a_path(run_folder, capsys):
    folder, card, _ = run_folder
    for target in (str(card), str(folder)):
        assert main(["info", target, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["name"] == "mine"
        assert main(["verify", target, "--json"]) == 0
        assert [(r["name"], r["status"]) for r in json.loads(capsys.readouterr().out)] == [("mine", "ok")]


@pytest.mark.parametrize("device, message", [
    ("cuda:99", "device 'cuda:99' is not available on this machine, which has cpu"),
    ("bogus", "'bogus' is not a device; use cpu, cuda, cuda:1, mps"),
    ("meta", "device 'meta' holds no values (torch's meta device), so no model is loaded or run there; use cpu, "
             "cuda, cuda:1, mps or auto"),
])
def test_load_onto_a_device_this_machine_lacks_names_it_before_reading_anything(monkeypatch, device, message):
    import vaezoo.hub  # noqa: F401 - imported under the patch, it would keep the stand-in as its build_model

    monkeypatch.setattr("vaezoo.assemble.build_model", lambda card: pytest.fail("built a model for no device"))
    with pytest.raises(DeviceError, match=re.escape(message)):
        vaezoo.load("jointvae-mnist", device=device)
    monkeypatch.undo()
    model = vaezoo.load("jointvae-mnist", device=torch.device("cpu"), pretrained=False)
    assert {p.device for p in model.parameters()} == {torch.device("cpu")}


@pytest.mark.parametrize("device", [0, np.int64(0), np.array(0), torch.tensor(0), torch.tensor(0, dtype=torch.uint8)])
def test_a_device_index_is_cuda_of_that_index_whatever_integer_type_holds_it(monkeypatch, device):
    """torch.device took 0 and np.int64(0) as cuda:0 but not a 0-d tensor or array, which were "'0' is not a
    device"; each is the index it holds."""
    from vaezoo import devices

    monkeypatch.setattr(devices, "_count", lambda kind: 0)
    with pytest.raises(DeviceError, match=re.escape("device '0' is not available on this machine, which has cpu")):
        devices.usable_device(device)
    monkeypatch.setattr(devices, "_count", lambda kind: 1 if kind == "cuda" else 0)
    assert devices.usable_device(device) == torch.device("cuda", 0)


@pytest.mark.parametrize("device, shown", [(True, "True (bool)"), (np.True_, "np.True_ (bool)"),
                                           (torch.tensor(True), "tensor(True) (Tensor)"),
                                           (1.0, "1.0 (float)"), (torch.tensor([0]), "tensor([0]) (Tensor)"),
                                           (np.array([0, 1]), "array([0, 1]) (ndarray)"),
                                           (np.array("cpu"), "array('cpu', dtype='<U3') (ndarray)"),
                                           (torch.zeros(100, dtype=torch.long), "tensor([0, 0, 0,")])
def test_a_value_that_is_no_device_is_named_as_it_is_in_one_line(device, shown):
    """np.array([0, 1]) raised numpy's "truth value of an array ... is ambiguous", np.array('cpu') was "'cpu' is not a
    device" and True was cuda:1; each is named as what it is."""
    from vaezoo import devices

    with pytest.raises(DeviceError, match=f"^{re.escape(shown)}.*is not a device; use cpu, cuda") as caught:
        devices.usable_device(device)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 140


def test_auto_is_the_first_accelerator_the_machine_has_else_the_cpu(monkeypatch):
    from vaezoo import devices

    has = {}
    monkeypatch.setattr(devices, "_count", lambda kind: has.get(kind, 0))
    assert devices.usable_device("auto") == torch.device("cpu")
    has.update(xpu=1, mps=1)
    assert devices.usable_device("auto") == torch.device("mps")
    has.update(cuda=2)
    assert devices.usable_device("auto") == torch.device("cuda")
    has.clear()
    model = vaezoo.load("jointvae-mnist", device="auto", pretrained=False)
    assert {p.device for p in model.parameters()} == {torch.device("cpu")}


def test_auto_evaluates_through_the_command_line_and_the_library(mnist_root, capsys):
    from vaezoo.evaluation.measure import evaluate

    model = vaezoo.load("jointvae-mnist", device="auto")
    assert evaluate(model, model.card, mnist_root, device="auto", metrics=["cluster_accuracy"]) == {
        "cluster_accuracy": pytest.approx(model.card.metrics["cluster_accuracy"].value, abs=1e-4)}
    assert main(["eval", "jointvae-mnist", "--device", "auto", "--metrics", "cluster_accuracy", "--check",
                 "--data-root", str(mnist_root)]) == 0
    assert "check: 1 of 1 metrics match" in capsys.readouterr().err


def test_a_model_loaded_without_its_weights_keeps_nothing_measured_on_them_and_is_ready_to_train():
    model = vaezoo.load("jointvae-mnist", pretrained=False)
    assert model.card.metrics == {} and model.card.sections == {} and model.card.headline is None
    assert model.training and not vaezoo.load("jointvae-mnist").training  # as build_model, timm and torchvision
    for given in ("/tmp/other.safetensors", "False", None, 0):
        with pytest.raises(TypeError, match=f"pretrained is True or False, got {re.escape(repr(given))}"):
            vaezoo.load("jointvae-mnist", pretrained=given)
    assert vaezoo.load("jointvae-mnist").card.metrics  # the zoo's card is untouched


def test_the_loss_of_a_loaded_model_is_taken_at_its_cards_last_step():
    model, x = vaezoo.load("jointvae-mnist"), torch.rand(8, 1, 32, 32).round()
    with torch.no_grad():
        loss, at_0 = model(x).loss, model(x, step=0).loss
        assert torch.equal(loss, model(x, step=model.card.train.steps).loss)
        assert at_0 > loss  # the capacities' targets are 0 at step 0: a larger |KL - C|
        fresh = vaezoo.load("jointvae-mnist", pretrained=False).eval()
        assert torch.equal(fresh(x).loss, fresh(x, step=0).loss)  # untrained: where training starts


def test_train_takes_a_name_and_checks_its_device_before_writing_anything(tmp_path):
    from vaezoo.training.train import train, train_seeds

    for run in (lambda: train("vae-mnist", tmp_path / "out", device="cuda:99"),
                lambda: train_seeds("vae-mnist", tmp_path / "out", [0, 1], device="cuda:99")):
        with pytest.raises(DeviceError, match="device 'cuda:99' is not available on this machine"):
            run()
    assert not (tmp_path / "out").exists()


def test_build_model_onto_a_device_this_machine_lacks_names_it_as_load_does(monkeypatch):
    from vaezoo.assemble import build_model

    monkeypatch.setattr("vaezoo.assemble.build_part", lambda *a, **k: pytest.fail("built a model for no device"))
    with pytest.raises(DeviceError, match=re.escape("device 'cuda:99' is not available on this machine")):
        build_model(get_card("jointvae-mnist"), device="cuda:99")


@pytest.mark.parametrize("shadow", ["folder", "file"])
def test_a_zoo_name_means_the_zoo_entry_even_where_a_folder_or_file_has_that_name(tmp_path, monkeypatch, shadow):
    """In a folder holding ``jointvae-mnist`` (a run folder with its own card, or a file), the name still
    loads the zoo entry, with a one-line warning; ``./jointvae-mnist`` names the local one."""
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    zoo = discover()["jointvae-mnist"]
    local = tmp_path / "jointvae-mnist"
    if shadow == "folder":
        local.mkdir()
        own, state, _ = write_entry(local, make_card(name="mine"), seed=4)
    else:
        local.write_text("not a card\n")
    monkeypatch.chdir(tmp_path)
    with pytest.warns(AmbiguousNameWarning) as caught:
        model = vaezoo.load("jointvae-mnist")
    assert model.card.path == zoo.path and model.card.architecture == "jointvae"
    [warning] = caught
    message = str(warning.message)
    assert "\n" not in message and message == (
        f"'jointvae-mnist' is the zoo entry of {zoo.path}, not the {shadow} ./jointvae-mnist here; "
        f"write ./jointvae-mnist to use that")
    if shadow == "folder":
        assert_loads_with(vaezoo.load("./jointvae-mnist"), state)  # a separator: the path
        assert get_card(local).path == own.resolve()  # a Path is a path
    else:
        with pytest.raises(CardError, match="not valid TOML"):
            get_card("./jointvae-mnist")


def test_the_cli_reports_the_ambiguity_in_one_line_and_uses_the_zoo_entry(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    (tmp_path / "jointvae-mnist").mkdir()
    write_entry(tmp_path / "jointvae-mnist", make_card(name="mine"), seed=4)
    monkeypatch.chdir(tmp_path)
    assert main(["info", "jointvae-mnist", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["name"] == "jointvae-mnist"
    assert captured.err.splitlines() == [
        f"warning: 'jointvae-mnist' is the zoo entry of {discover()['jointvae-mnist'].path}, not the folder "
        f"./jointvae-mnist here; write ./jointvae-mnist to use that"]
    assert main(["info", "./jointvae-mnist", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "mine"


def test_a_bare_name_the_zoo_lacks_is_still_the_folder_here_and_recorded_as_a_path(run_folder, tmp_path,
                                                                                    monkeypatch):
    """``run`` is no zoo name, so it is the folder; a command recorded for it names it ``./run``, which
    stays a path even if a zoo entry called ``run`` appears later."""
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    folder, card, state = run_folder
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AmbiguousNameWarning)
        assert_loads_with(vaezoo.load("run"), state)
    assert card_reference(get_card("run"), "run") == os.path.join(os.curdir, "run")
    assert card_reference(get_card("run")) == str(card.resolve())


def test_no_ambiguity_is_reported_where_the_folder_here_holds_that_very_zoo_card(tmp_path, monkeypatch):
    """A card folder on VAEZOO_CARDS_PATH, run from beside it: the name and ./NAME are one card."""
    folder = tmp_path / "evil"
    _, state, _ = write_entry(folder, make_card(name="evil"), seed=4)
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(folder))
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AmbiguousNameWarning)
        model = vaezoo.load("evil")
    assert model.card.name == "evil" and all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


def test_what_is_no_card_file_is_named_for_what_it_is(tmp_path):
    """The weights beside a card, a torch.save file, an image and a URL read as 'not valid TOML (utf-8 codec ...)'
    and as a missing file whose name had lost a slash."""
    _, state, weights = write_entry(tmp_path, make_card(name="mine"), seed=4)
    torch.save(state, tmp_path / "state.pt")
    (tmp_path / "traversal.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    for given, message in ((weights, r"mine.safetensors: is a safetensors weights file, not a card; give its card "
                                     r"\(mine.toml\) or the folder holding both"),
                           (tmp_path / "traversal.png", r"traversal.png: is not text \(its byte 0 is no UTF-8\), not a "
                                                        r"card \(TOML\); give the card's .toml file"),
                           (tmp_path / "state.pt", r"state.pt: is a torch.save or pickle file, not a card \(TOML\)"),
                           ("https://example.com/x.toml", r"^'https://example.com/x.toml' is a URL; a card is named")):
        with pytest.raises(CardError, match=message):
            vaezoo.load(given)


def test_a_card_or_folder_that_may_not_be_read_is_one_line_naming_why(tmp_path, capsys, monkeypatch):
    """A card in a folder that may not be entered was a bare 'Permission denied: PATH' from pathlib."""
    card, _, _ = write_entry(tmp_path / "locked", make_card(name="mine"), seed=4)
    stat, scandir = os.stat, os.scandir

    def refused(path):
        if str(tmp_path / "locked") in os.fspath(path):  # as chmod 000 does to a user without root
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

    monkeypatch.setattr(os, "stat", lambda path, **kw: refused(path) or stat(path, **kw))
    monkeypatch.setattr(os, "scandir", lambda path=".": refused(path) or scandir(path))
    code, _, err = cli(capsys, "info", str(card))
    assert code == 1 and err.strip().splitlines() == [f"error: {card}: cannot read card (Permission denied)"]
    monkeypatch.setattr(os, "stat", stat)
    code, _, err = cli(capsys, "info", str(tmp_path / "locked"))
    assert code == 1 and err.strip().splitlines() == [
        f"error: folder {tmp_path / 'locked'} cannot be read (Permission denied); give a folder you may read, or the "
        f"card file's path"]


def test_a_card_whose_plugin_is_not_installed_names_what_it_needs(tmp_path):
    """It said "unknown dataset 'clock'", naming neither the card nor the plugin its folder records."""
    from vaezoo.errors import UnknownNameError

    card, _, _ = write_entry(tmp_path / "gone", make_card(name="gone"), seed=4)
    card.write_text(card.read_text().replace('[train.data]\nname = "mnist"', '[train.data]\nname = "clock"'))
    message = r"^card 'gone' needs the dataset 'clock', which no installed plugin registers{}; install the plugin"
    with pytest.raises(UnknownNameError, match=message.format("")):
        vaezoo.load(tmp_path / "gone")
    (tmp_path / "gone" / "config.json").write_text('{"plugins": {"vaezoo-clock": "0.1.0"}}')  # a Hub folder's
    with pytest.raises(UnknownNameError, match=message.format(r" \(it was made with vaezoo-clock 0.1.0\)")):
        vaezoo.load(tmp_path / "gone")


def test_a_card_of_a_newer_vaezoo_naming_a_part_no_plugin_registers_says_to_upgrade(tmp_path, capsys):
    """A part that a later vaezoo's built-in plugins add (as 0.3.0 added the dataset image_folder) was said as a
    plugin to install, which a user could not find: the card records the vaezoo that wrote it."""
    card, _, _ = write_entry(tmp_path / "later", make_card(name="later", vaezoo_version="99.0.0"), seed=4)
    card.write_text(card.read_text().replace('[train.data]\nname = "mnist"', '[train.data]\nname = "clock"'))
    code, _, err = cli(capsys, "eval", str(tmp_path / "later"))
    assert code == 1 and err.strip().splitlines() == [
        f"error: card 'later' needs the dataset 'clock', which no installed plugin registers; the card was written by "
        f"vaezoo 99.0.0, newer than this vaezoo {vaezoo.__version__}: upgrade vaezoo, or install the plugin that "
        f"registers it"]



def test_a_card_a_plugin_ships_naming_a_part_no_plugin_registers_names_that_plugin(tmp_path, site, capsys):
    """It said "install the plugin that registers it" to a user who had installed the plugin that ships the card,
    naming neither that plugin nor whom to tell."""
    from kit import install_plugin

    cards = tmp_path / "cards"
    card, _, _ = write_entry(cards, make_card(name="careless-mnist"), seed=4)
    card.write_text(card.read_text().replace('type = "gaussian"', 'type = "laplace"'))
    module = install_plugin(site, "careless", f"""
        import vaezoo

        @vaezoo.hookimpl
        def vaezoo_card_dirs():
            return [{str(cards)!r}]
    """)
    for command in (["eval", "careless-mnist"], ["train", "careless-mnist", "--out", str(tmp_path / "run")],
                    ["show", "careless-mnist", "sample", "-o", str(tmp_path / "x.png")]):
        code, _, err = cli(capsys, *command)
        assert code == 1 and err.strip().splitlines() == [
            f"error: card 'careless-mnist' of plugin 'careless' ({module} 1.0) needs the latent family 'laplace', "
            f"which neither it nor any other installed plugin registers; install the plugin that registers it, or "
            f"report it to {module}'s author"], command


def test_a_card_whose_metrics_plugin_is_not_installed_names_what_it_needs(tmp_path, capsys):
    """It said "unknown metric 'my_metric'. Known: ..." with no fix, where a missing family names its plugin."""
    card, _, _ = write_entry(tmp_path / "gone", make_card(name="gone"), seed=4)
    parsed = vaezoo.get_card(card)
    card.write_text(parsed.model_copy(update={"eval_metrics": ["my_metric"]}).toml())
    code, _, err = cli(capsys, "eval", str(tmp_path / "gone"))
    assert code == 1 and err.strip().splitlines() == [
        "error: card 'gone' needs the metric 'my_metric', which no installed plugin registers; install the plugin "
        "that registers it ('vaezoo plugins' lists those installed)"]
    code, _, err = cli(capsys, "eval", str(tmp_path / "gone"), "--metrics", "my_metric")  # a name given: misspelt?
    assert code == 1 and "unknown metric 'my_metric'" in err


def test_a_card_whose_plugin_the_allow_list_leaves_out_says_so_instead_of_asking_to_install_it(tmp_path, capsys,
                                                                                                monkeypatch):
    """With the plugin installed but left out by VAEZOO_LOAD_PLUGINS, it said "which no installed plugin registers;
    install the plugin that registers it", which changes nothing."""
    from vaezoo.plugins import get_plugins

    card, _, _ = write_entry(tmp_path / "gone", make_card(name="gone"), seed=4)
    card.write_text(card.read_text().replace('[train.data]\nname = "mnist"', '[train.data]\nname = "clock"'))
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    vaezoo.plugins.reset()
    left_out = get_plugins().left_out
    assert "methods" in left_out  # a built-in plugin the allow-list leaves out
    code, _, err = cli(capsys, "eval", str(tmp_path / "gone"))
    assert code == 1 and err.strip().splitlines() == [
        f"error: card 'gone' needs the dataset 'clock', which no loaded plugin registers; VAEZOO_LOAD_PLUGINS leaves "
        f"out the installed plugin(s) {', '.join(left_out)}: add the one that registers it to it, or unset it"]


def test_a_card_whose_plugin_failed_to_load_says_so_instead_of_asking_to_install_it(tmp_path, site):
    from kit import install_plugin

    from vaezoo.errors import UnknownNameError
    from vaezoo.plugins import PluginWarning

    card, _, _ = write_entry(tmp_path / "gone", make_card(name="gone"), seed=4)
    card.write_text(card.read_text().replace('[train.data]\nname = "mnist"', '[train.data]\nname = "clock"'))
    module = install_plugin(site, "clock", "raise RuntimeError('clock exploded at import')\n")
    with pytest.warns(PluginWarning), pytest.raises(UnknownNameError) as caught:
        vaezoo.load(tmp_path / "gone")
    assert str(caught.value) == (
        f"card 'gone' needs the dataset 'clock', which no loaded plugin registers; installed plugins did not load: "
        f"'clock' ({module} 1.0) failed: import of '{module}' raised RuntimeError: clock exploded at import; fix or "
        f"reinstall the one that registers it")


def test_build_model_and_an_untrained_load_take_architecture_arguments_over_the_card_s():
    from vaezoo.errors import CardError

    built = vaezoo.build_model("jointvae-mnist", continuous=5)
    assert built.part_slices["continuous"] == slice(0, 5) and built.card.model["continuous"] == 5
    assert built.card.weights is None and built.card.metrics == {}  # another model: nothing measured on it
    fresh = vaezoo.load("jointvae-mnist", pretrained=False, temperature=0.5)
    assert fresh.card.model["temperature"] == 0.5 and fresh.training
    with pytest.raises(TypeError, match="arguments continuous change the model the card's weights were trained as"):
        vaezoo.load("jointvae-mnist", continuous=5)
    for build in (vaezoo.build_model, vaezoo.load):  # load names the unknown argument, not pretrained=False
        with pytest.raises(CardError, match="architecture 'jointvae' takes no argument 'nosuch'"):
            build("jointvae-mnist", nosuch=1)
    assert vaezoo.get_card("jointvae-mnist").model["continuous"] == 10  # the zoo's card is untouched


def test_build_model_s_card_keeps_nothing_measured_on_the_card_s_weights():
    """vaezoo.build_model(NAME) kept the card's metrics and JointVAE's label matching: the untrained model's card
    said cluster_accuracy 0.9581, and predict_label gave digits through the pretrained model's matching, where
    vaezoo.load(NAME, pretrained=False) refuses for want of one."""
    from vaezoo.errors import VaezooError

    x = torch.rand(2, 1, 32, 32)
    for built in (vaezoo.build_model("jointvae-mnist"), vaezoo.load("jointvae-mnist", pretrained=False)):
        assert built.training and built.weights_digest is None
        assert (built.card.metrics, built.card.sections, built.card.headline) == ({}, {}, None)
        with pytest.raises(VaezooError, match="stores no category -> label matching for 'discrete0'"):
            built.predict_label(x)
    assert vaezoo.get_card("jointvae-mnist").metrics  # the zoo's card is untouched


@pytest.mark.parametrize("keyword, ours", [("map_location", "device"), ("device_map", "device"),
                                            ("torch_dtype", "dtype")])
def test_another_librarys_keyword_for_a_device_or_dtype_names_vaezoos(keyword, ours):
    """load(NAME, map_location='cpu') said the architecture takes no argument 'map_location'; from_pretrained
    got Python's own "unexpected keyword argument"."""
    for build, name in ((vaezoo.build_model, "build_model"), (vaezoo.load, "load"),
                        (lambda *a, **k: vaezoo.load(*a, pretrained=False, **k), "load"),
                        (vaezoo.from_pretrained, "from_pretrained")):
        with pytest.raises(TypeError, match=rf"^{name} takes {ours}=, not {keyword}= \(what torch.load or "
                                            rf"transformers call it\)$"):
            build("jointvae-mnist", **{keyword: "cpu"})


def test_an_architecture_argument_that_does_not_fit_is_named_not_blamed_on_the_cards_file():
    """continuous=-1 named the installed card's file and said it 'needs continuous > 0 or at least one discrete
    part', though discrete = [10] was there."""
    from vaezoo.errors import CardError

    for build in (vaezoo.build_model, lambda *a, **k: vaezoo.load(*a, pretrained=False, **k)):
        with pytest.raises(CardError) as caught:
            build("jointvae-mnist", continuous=-1)
        said = str(caught.value)
        assert said.startswith("jointvae-mnist: ") and "continuous is a number of Gaussian dimensions, at least 0, " \
            "got -1" in said and ".toml" not in said


def test_a_recipe_a_plugin_ships_is_named_by_plugin_and_file_from_any_folder(tmp_path, monkeypatch, capsys):
    # a pip-installed user has no checkout path (plugins/vaezoo_methods/recipes/...) to the recipes
    monkeypatch.chdir(tmp_path)
    card = get_card("methods:recipes/dipvae1-dsprites.toml")
    assert card.name == "dipvae1-dsprites" and card.path.parent.name == "recipes"
    assert card.path.parent.parent.name == "vaezoo_methods"
    code, out, err = cli(capsys, "info", "betatcvae:recipes/betavae-dsprites.toml")
    assert code == 0 and 'name = "betavae-dsprites"' in out, err


@pytest.mark.parametrize("given, message", [
    ("method:recipes/x.toml", "'method:recipes/x.toml' names a file of plugin 'method', and no plugin loaded is "
                              "called that; the plugins are "),
    ("methods:recipes/x.toml", "plugin 'methods' has no file recipes/x.toml; its recipes: "
                               "methods:recipes/annealedvae-dsprites.toml, methods:recipes/dipvae1-dsprites.toml, "),
    ("methods:recipes/../../vaezoo/x.toml", "'recipes/../../vaezoo/x.toml' is not a path inside plugin 'methods'; "
                                            "give one such as recipes/NAME.toml")],
                         ids=["no-such-plugin", "no-such-file", "outside-the-plugin"])
def test_a_plugin_file_that_is_not_one_is_a_one_line_error(tmp_path, monkeypatch, capsys, given, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "info", given)
    assert code == 1 and err.startswith(f"error: {message}") and err.count("\n") == 1


def test_a_file_here_named_as_a_plugin_file_is_that_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_card(tmp_path / "methods:mine", make_card(name="mine"))
    assert get_card("methods:mine/mine.toml").name == "mine"


def test_one_scan_serves_the_lookups_of_its_block_and_thread_only(cards, monkeypatch):
    """A batch's lookups share one read of the card folders; another thread's, and those after the block, see a
    card written meanwhile."""
    import threading

    from vaezoo.entries import catalog

    write_card(cards, make_card(name="first"))
    with catalog.one_scan():
        assert "first" in catalog.scan().cards
        write_card(cards, make_card(name="second"))
        with catalog.one_scan():
            assert "second" not in catalog.scan().cards
        seen = []
        thread = threading.Thread(target=lambda: seen.append("second" in catalog.scan().cards))
        thread.start()
        thread.join()
        assert seen == [True]
    assert "second" in catalog.scan().cards
