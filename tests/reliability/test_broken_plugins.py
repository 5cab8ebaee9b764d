"""Broken plugins: each is reported (a warning and ``vaezoo plugins``) and the rest of the zoo keeps working."""

from __future__ import annotations

import json
import re
from importlib import import_module
from pathlib import Path

import pytest
from kit import (assert_one_line_error, child_env, cli, install_plugin, make_card, run_python, run_vaezoo,
                 save_model_weights, weights_entry, write_toml)

import vaezoo
from vaezoo import plugins
from vaezoo.errors import VaezooError
from vaezoo.plugins import PluginWarning, registry

HEADER = "import vaezoo\n\n\n@vaezoo.hookimpl\n"

# name -> (plugin source, a fragment of the error ``vaezoo plugins`` must show)
BROKEN = {
    "raises_on_import": ("raise ImportError(\"No module named 'missing_dependency'\")\n",
                         "raised ImportError: No module named 'missing_dependency'"),
    "raises_in_hook": (HEADER + "def vaezoo_register_architectures(register):\n"
                                "    register('half_registered', dict)\n"
                                "    raise RuntimeError('boom inside the hook')\n",
                       "hook vaezoo_register_architectures raised RuntimeError: boom inside the hook"),
    "duplicate_name": (HEADER + "def vaezoo_register_regularizers(register):\n"
                                "    from vaezoo.regularizers import Beta\n"
                                "    register('my_beta', Beta)\n"
                                "    register('beta', Beta)\n",
                       "regularizer 'beta' is registered by both plugin 'core' and plugin 'duplicate_name'"),
    "card_dirs_string": (HEADER + "def vaezoo_card_dirs():\n    return '/tmp'\n",
                         "hook vaezoo_card_dirs must return a list of paths, got '/tmp'"),
    "latent_not_a_class": (HEADER + "def vaezoo_register_latent_families(register):\n"
                                    "    register('gaussian_typo', 42)\n",
                           ("registered latent family 'gaussian_typo': expected a subclass of "
                            "vaezoo.latents.base.LatentFamily, got 42")),
    "wrong_hook_signature": (HEADER + "def vaezoo_register_nets(register, extra):\n    pass\n",
                             "Argument(s) {'extra'} are declared in the hookimpl"),
    # BaseException that is not an Exception: each would end vaezoo (with the plugin's exit code) if not isolated
    "exits_on_import": ("import sys\n\nsys.exit(0)\n", "raised SystemExit: 0"),
    "interrupts_on_import": ("raise KeyboardInterrupt('raised by the plugin itself')\n",
                             "raised KeyboardInterrupt: raised by the plugin itself"),
    "base_exception_in_hook": (HEADER + "def vaezoo_register_architectures(register):\n"
                                        "    raise BaseException('not an Exception')\n",
                               "hook vaezoo_register_architectures raised BaseException: not an Exception"),
    "exits_in_card_dirs": (HEADER + "def vaezoo_card_dirs():\n    raise SystemExit(3)\n",
                           "hook vaezoo_card_dirs raised SystemExit: 3"),
    "interrupts_in_hook": (HEADER + "def vaezoo_register_metrics(register):\n    raise KeyboardInterrupt\n",
                           "hook vaezoo_register_metrics raised KeyboardInterrupt"),
}

# what a broken plugin must not leave behind: (registry kind, name) it tried to add
LEFT_BEHIND = {"raises_in_hook": ("architecture", "half_registered"), "duplicate_name": ("regularizer", "my_beta"),
               "latent_not_a_class": ("latent family", "gaussian_typo")}


@pytest.fixture
def tiny_zoo(cards_dir, data_plugin):
    """A tiny card with local weights, which every test below loads to show the zoo still works."""
    weights = save_model_weights(cards_dir / "tiny.safetensors", make_card("tiny"))
    write_toml(cards_dir / "tiny.toml", make_card("tiny", weights=weights_entry(weights, file="tiny.safetensors")))
    return cards_dir


def _plugin_rows(capsys) -> dict[str, dict]:
    code, out, stderr = cli(capsys, "plugins", "--json")
    assert code == 0, stderr
    return {row["name"]: row for row in json.loads(out)}


def _use_the_zoo():
    """List and load the tiny card and fill every registry (so every plugin's hooks run); returns the model."""
    assert "tiny-blobs" in vaezoo.list_models()
    model = vaezoo.load("tiny-blobs")
    for kind in plugins.KINDS:
        registry(kind)
    return model


def _use_tiny_card(cards_dir, architecture: str | None = None, data: str | None = None) -> None:
    """Reload the plugins and make the tiny card use a plugin's ``architecture`` or dataset ``data``."""
    plugins.reset()
    card = make_card("tiny")
    if architecture is not None:
        card["architecture"] = architecture
    if data is not None:
        card["train"]["data"] = {"name": data}
    write_toml(cards_dir / "tiny.toml", card)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_plugin_is_reported_and_the_zoo_keeps_working(site, tiny_zoo, capsys, name):
    source, fragment = BROKEN[name]
    install_plugin(site, name, source)
    plugins.reset()
    with pytest.warns(PluginWarning, match=f"vaezoo plugin '{name}' failed"):
        model = _use_the_zoo()
    assert model.card.name == "tiny-blobs"
    assert registry("regularizer").plugin_of("beta") == plugins.CORE
    if name in LEFT_BEHIND:
        kind, left = LEFT_BEHIND[name]
        assert left not in registry(kind), f"a failed plugin's '{left}' was kept"

    rows = _plugin_rows(capsys)
    assert rows[name]["status"] == "failed" and fragment in rows[name]["error"], rows[name]
    assert "\n" not in rows[name]["error"]
    assert all(row["status"] == "ok" for other, row in rows.items() if other != name), rows


def test_two_plugins_claiming_one_name(site, tiny_zoo, capsys):
    """The plugin that loads first (entry points in name order) keeps the name; the other is reported."""
    source = HEADER + "def vaezoo_register_architectures(register):\n    register('contested', dict)\n"
    install_plugin(site, "claimant_a", source)
    install_plugin(site, "claimant_b", source)
    plugins.reset()
    with pytest.warns(PluginWarning, match="'contested' is registered by both plugin 'claimant_a' and plugin "
                                           "'claimant_b'"):
        assert registry("architecture").plugin_of("contested") == "claimant_a"
    assert vaezoo.load("tiny-blobs").card.name == "tiny-blobs"
    rows = _plugin_rows(capsys)
    assert rows["claimant_a"]["status"] == "ok" and rows["claimant_b"]["status"] == "failed"


@pytest.mark.parametrize(("second", "said"), [
    ("register('twice', dict)", "plugin 'self_twice' registers architecture 'twice' twice; report it to its author"),
    ("register('Twice', dict)", "plugin 'self_twice' registers architecture 'Twice' twice (as 'twice' too)")])
def test_a_plugin_registering_one_name_twice_is_named_once(site, tiny_zoo, second, said):
    """It was 'registered by both plugin 'evil' and plugin 'evil'; uninstall one'."""
    install_plugin(site, "self_twice", HEADER + "def vaezoo_register_architectures(register):\n"
                                                "    register('twice', dict)\n    " + second + "\n")
    plugins.reset()
    with pytest.warns(PluginWarning, match=re.escape(said)):
        registry("architecture")


def test_a_name_that_differs_from_a_registered_one_in_case_only_is_refused(site, tiny_zoo):
    """'Gaussian' was accepted beside the core's 'gaussian', and a run's card then recorded it as 'gaussian'."""
    install_plugin(site, "shouting", HEADER + "def vaezoo_register_latent_families(register):\n"
                                              "    from vaezoo.latents import Gaussian\n"
                                              "    register('Gaussian', Gaussian)\n")
    plugins.reset()
    with pytest.warns(PluginWarning, match=re.escape("latent family 'Gaussian' is registered by both plugin 'core' "
                                                     "(as 'gaussian') and plugin 'shouting'")):
        assert "Gaussian" not in registry("latent family").registered()


def test_architecture_returning_the_wrong_type(site, data_plugin, cards_dir, capsys):
    install_plugin(site, "stringy", HEADER + "def vaezoo_register_architectures(register):\n"
                                             "    register('stringy', lambda **model: 'not a model')\n")
    _use_tiny_card(cards_dir, architecture="stringy")
    with pytest.raises(VaezooError, match="architecture 'stringy' of plugin 'stringy' returned str"):
        vaezoo.load("tiny-blobs", pretrained=False)


def test_an_architecture_that_raises_or_a_dataset_whose_info_is_no_data_info_names_its_plugin(site, data_plugin,
                                                                                              cards_dir):
    """Both were "section 'model' does not fit architecture ...", naming no plugin (a dict from info() as an
    AttributeError of 'size')."""
    install_plugin(site, "raising", HEADER + "def vaezoo_register_architectures(register):\n"
                                             "    def explodes(**model):\n        raise RuntimeError('boom')\n"
                                             "    register('explodes', explodes)\n\n\n@vaezoo.hookimpl\n"
                                             "def vaezoo_register_datasets(register):\n"
                                             "    from vaezoo.data import Dataset\n\n"
                                             "    class Dicty(Dataset):\n"
                                             "        def info(self, split='train'):\n"
                                             "            return {'size': 4}\n"
                                             "    register('dicty', Dicty())\n")
    _use_tiny_card(cards_dir, architecture="explodes")
    with pytest.raises(VaezooError, match="does not fit architecture 'explodes' of plugin 'raising': RuntimeError: "
                                          "boom$"):
        vaezoo.load("tiny-blobs", pretrained=False)
    _use_tiny_card(cards_dir, data="dicty")
    with pytest.raises(VaezooError, match=r"^dataset 'dicty' of plugin 'raising' returned dict from info\(\), not a "
                                          r"vaezoo.data.DataInfo; report it to its author$"):
        vaezoo.load("tiny-blobs", pretrained=False)


WRONG_SIZE = HEADER + """def vaezoo_register_datasets(register):
    import torch

    from vaezoo.data import DataInfo, Dataset, ImageDataset

    class Misfit(Dataset):
        def info(self, split="train"):
            return DataInfo(size=8, image_size=4, channels=1)

        def load(self, root=None, split="train"):
            return ImageDataset(torch.zeros(8, 1, 8, 8, dtype=torch.uint8))

    register("misfit", Misfit())
"""


def test_a_dataset_that_loads_other_images_than_its_info_says_is_named(site, data_plugin, cards_dir, tmp_path,
                                                                       capsys):
    """The run said 'the model takes float images (N, 1, 16, 16) ... turn images into model input with
    model.preprocess(images)': the wrong fix, the dataset being at fault."""
    install_plugin(site, "misfit", WRONG_SIZE)
    _use_tiny_card(cards_dir, data="misfit")
    code, _, err = cli(capsys, "train", "tiny-blobs", "--out", str(tmp_path / "run"), "--max-steps", "1")
    assert code == 1
    assert_one_line_error(err, "dataset 'misfit' of plugin 'misfit' loads images of shape (1, 8, 8) where its "
                               "info() says (1, 4, 4); report it to its author")


def test_a_part_that_calls_sys_exit_is_one_line_naming_its_plugin(site, data_plugin, cards_dir, capsys):
    """An architecture calling sys.exit(7) ended 'vaezoo eval' with exit code 7 and nothing said."""
    install_plugin(site, "quitter", HEADER + "def vaezoo_register_architectures(register):\n"
                                             "    import sys\n\n"
                                             "    def quits(**model):\n        sys.exit(7)\n"
                                             "    register('quits', quits)\n")
    _use_tiny_card(cards_dir, architecture="quits")
    code, _, err = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(err, "plugin 'quitter' (", "raised SystemExit: 7; report it to its author")


@pytest.mark.slow
def test_all_broken_plugins_at_once_in_the_command_line(tmp_path, tiny_zoo):
    """The installed ``vaezoo`` command, in a fresh process: no traceback, every broken plugin reported."""
    site = tmp_path / "cli-site"
    for name, (source, _) in BROKEN.items():
        install_plugin(site, name, source)
    env = child_env(tmp_path / "home", cards=tiny_zoo, site=site)

    listed = run_vaezoo("list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    assert "tiny-blobs" in [row["name"] for row in json.loads(listed.stdout)]

    shown = run_vaezoo("plugins", "--json", env=env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    rows = {row["name"]: row for row in json.loads(shown.stdout)}
    for name, (_, fragment) in BROKEN.items():
        assert rows[name]["status"] == "failed" and fragment in rows[name]["error"], rows[name]
    assert all(row["status"] == "ok" for name, row in rows.items() if name not in BROKEN)


def test_a_plugin_exiting_at_import_leaves_vaezoos_exit_code_alone(tmp_path, tiny_zoo):
    """``vaezoo verify`` on tampered weights exits 1 although a plugin calls ``sys.exit(0)`` at import."""
    site = tmp_path / "cli-site"
    install_plugin(site, "exits_on_import", BROKEN["exits_on_import"][0])
    weights = tiny_zoo / "tiny.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    verified = run_vaezoo("verify", "tiny-blobs", env=child_env(tmp_path / "home", cards=tiny_zoo, site=site))
    assert verified.returncode == 1 and "FAILED" in verified.stdout, verified
    assert "vaezoo plugin 'exits_on_import' failed: import of" in verified.stderr
    assert "raised SystemExit: 0" in verified.stderr
    assert_one_line_error(verified.stderr, "failed verification")


# what the code a plugin imports does with the KeyboardInterrupt a signal raises in it
WHAT_IMPORTS_DO = {
    "lets it through": "{kill}\n",
    "wraps it": "try:\n    {kill}\nexcept KeyboardInterrupt:\n    raise ImportError('a half-imported library')\n",
    "swallows it": "try:\n    {kill}\nexcept KeyboardInterrupt:\n    pass\n",
}


@pytest.mark.parametrize("what", WHAT_IMPORTS_DO)
@pytest.mark.parametrize(("signal_name", "code", "last_line"), [("SIGINT", 130, "error: interrupted"),
                                                                 ("SIGTERM", 143, "error: stopped by SIGTERM")])
def test_a_stop_signal_while_a_plugin_imports_stops_vaezoo(tmp_path, tiny_zoo, what, signal_name, code, last_line):
    """A stop signal that arrives while plugin code runs is the user's: vaezoo stops and the plugin is not
    blamed, whether the code let the interrupt through, wrapped it in another error or swallowed it."""
    site = tmp_path / "cli-site"
    kill = f"os.kill(os.getpid(), signal.{signal_name}); time.sleep(60)"
    install_plugin(site, "stopped", "import os\nimport signal\nimport time\n\n"
                   + WHAT_IMPORTS_DO[what].format(kill=kill))
    listed = run_vaezoo("list", env=child_env(tmp_path / "home", cards=tiny_zoo, site=site), timeout=50)
    assert listed.returncode == code, listed
    assert listed.stderr.strip().splitlines()[-1] == last_line
    assert "Traceback" not in listed.stderr and "vaezoo plugin" not in listed.stderr
    assert listed.stdout == ""


@pytest.mark.slow
def test_a_plugin_hanging_at_import_is_named_with_how_to_skip_it(tmp_path, tiny_zoo):
    site = tmp_path / "cli-site"
    install_plugin(site, "sleepy", "import time\n\ntime.sleep(3)\n")
    env = {**child_env(tmp_path / "home", cards=tiny_zoo, site=site), "VAEZOO_PLUGIN_TIMEOUT": "0.5"}
    # every other plugin the child finds, third parties installed beside vaezoo included
    listed = run_python("-c", "from importlib.metadata import entry_points as e; print(','.join(sorted(p.name for p "
                              "in e(group='vaezoo') if p.name not in ('core', 'sleepy'))))", env=env)
    others = listed.stdout.strip().split(",")

    slow = run_vaezoo("list", "--json", env=env)
    assert slow.returncode == 0 and "tiny-blobs" in [row["name"] for row in json.loads(slow.stdout)], slow
    (line,) = [line for line in slow.stderr.splitlines() if "sleepy" in line]
    assert line.startswith("vaezoo: plugin 'sleepy' of distribution 'fake_sleepy_")
    assert "is still running import of 'fake_sleepy_" in line and "after 0.5 s" in line
    skip = line.partition("VAEZOO_LOAD_PLUGINS=")[2]
    assert skip == ",".join(others)

    skipped = run_vaezoo("plugins", "--json", env={**env, "VAEZOO_LOAD_PLUGINS": skip})
    assert skipped.returncode == 0 and skipped.stderr == "", skipped
    assert sorted(row["name"] for row in json.loads(skipped.stdout)) == sorted(["core", *others])


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_plugin_timeout_must_be_a_positive_number(site, cards_dir, capsys, monkeypatch, value):
    monkeypatch.setenv("VAEZOO_PLUGIN_TIMEOUT", value)
    code, out, stderr = cli(capsys, "list")
    assert (code, out) == (1, "")
    assert_one_line_error(stderr, f"VAEZOO_PLUGIN_TIMEOUT must be a positive number of seconds, got '{value}'")


# A third party's plugin posing as a built-in: it would mark its import, and offer its own 'jointvae-mnist'
IMPOSTOR = """
from pathlib import Path

import vaezoo

Path(__file__).with_suffix(".imported").touch()


@vaezoo.hookimpl
def vaezoo_card_dirs():
    return [Path(__file__).parent / "impostor_cards"]
"""


@pytest.mark.parametrize("builtin", ["core", "zoo", "jointvae"])
def test_a_third_party_entry_point_named_like_a_builtin_is_refused(site, capsys, builtin):
    install_plugin(site, builtin, IMPOSTOR)
    card = make_card("tiny")
    card["name"] = "jointvae-mnist"
    write_toml(site / "impostor_cards" / "jointvae-mnist.toml", card)
    (module,) = [p.stem for p in site.glob("fake_*.py")]
    with pytest.warns(PluginWarning, match=f"vaezoo plugin '{builtin}' refused: entry point '{builtin}' of "
                                           f"distribution '{module}': the built-in plugin of distribution 'vaezoo' "
                                           f"has this name, and no other distribution can replace it"):
        card = vaezoo.get_card("jointvae-mnist")
    zoo = Path(import_module("vaezoo_zoo").__file__).resolve().parent
    assert card.architecture == "jointvae" and card.path.parent == zoo
    assert not (site / f"{module}.imported").exists()  # never imported

    rows = [row for row in json.loads(cli(capsys, "plugins", "--json")[1]) if row["name"] == builtin]
    assert [(r["distribution"], r["builtin"], r["status"]) for r in rows] == [
        ("vaezoo", True, "ok"), (module, False, "refused")]


# ``trylast`` puts an implementation first in pluggy's own order: it must not get ahead of the built-ins that way
CLAIMS_BUILTIN_NAMES = HEADER.replace("hookimpl", "hookimpl(trylast=True)") + (
    "def vaezoo_register_architectures(register):\n"
    "    register('jointvae', dict)\n")


def test_a_name_a_builtin_registers_stays_the_builtins(site, capsys):
    install_plugin(site, "aaa_claims", CLAIMS_BUILTIN_NAMES)  # its entry point sorts before every built-in
    plugins.reset()
    with pytest.warns(PluginWarning, match="architecture 'jointvae' is registered by both plugin 'jointvae' and "
                                           "plugin 'aaa_claims'"):
        assert registry("architecture").plugin_of("jointvae") == "jointvae"
    assert registry("architecture")["jointvae"] is not dict
    rows = _plugin_rows(capsys)
    assert rows["aaa_claims"]["status"] == "failed"
    assert all(row["status"] == "ok" for name, row in rows.items() if name != "aaa_claims")


def test_an_entry_point_named_vaezoo_is_reported(site, capsys):
    install_plugin(site, "vaezoo", HEADER + "def vaezoo_register_metrics(register):\n"
                                            "    register('constant_metric', lambda model, dataset: 1.0)\n")
    plugins.reset()
    assert registry("metric").plugin_of("constant_metric") == "vaezoo"
    row = _plugin_rows(capsys)["vaezoo"]
    assert (row["status"], row["builtin"], row["distribution"][:12]) == ("ok", False, "fake_vaezoo_")
