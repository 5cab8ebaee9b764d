"""Broken plugins: each is reported (a warning and ``vaezoo plugins``) and the rest of the zoo keeps working."""

from __future__ import annotations

import json

import pytest
from faultkit import child_env, cli, install_plugin, run_cli, save_tiny_weights, tiny_card, weights_entry, write_toml

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
                            "vaezoo.latents.LatentFamily, got 42")),
    "wrong_hook_signature": (HEADER + "def vaezoo_register_nets(register, extra):\n    pass\n",
                             "Argument(s) {'extra'} are declared in the hookimpl"),
}

# what a broken plugin must not leave behind: (registry kind, name) it tried to add
LEFT_BEHIND = {"raises_in_hook": ("architecture", "half_registered"), "duplicate_name": ("regularizer", "my_beta"),
               "latent_not_a_class": ("latent family", "gaussian_typo")}


@pytest.fixture
def tiny_zoo(cards_dir):
    """A tiny card with local weights, which every test below loads to show the zoo still works."""
    weights = save_tiny_weights(cards_dir / "tiny.safetensors", tiny_card())
    write_toml(cards_dir / "tiny.toml", tiny_card(**weights_entry(weights, file="tiny.safetensors")))
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


def test_architecture_returning_the_wrong_type(site, cards_dir, capsys):
    install_plugin(site, "stringy", HEADER + "def vaezoo_register_architectures(register):\n"
                                             "    register('stringy', lambda **model: 'not a model')\n")
    plugins.reset()
    card = tiny_card()
    card["architecture"] = "stringy"
    write_toml(cards_dir / "tiny.toml", card)
    with pytest.raises(VaezooError, match="architecture 'stringy' of plugin 'stringy' returned str"):
        vaezoo.load("tiny-blobs", pretrained=False)


def test_all_broken_plugins_at_once_in_the_command_line(tmp_path, tiny_zoo):
    """The installed ``vaezoo`` command, in a fresh process: no traceback, every broken plugin reported."""
    site = tmp_path / "cli-site"
    for name, (source, _) in BROKEN.items():
        install_plugin(site, name, source)
    env = child_env(tmp_path / "home", cards=tiny_zoo, site=site)

    listed = run_cli(["list", "--json"], env)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    assert "tiny-blobs" in [row["name"] for row in json.loads(listed.stdout)]

    shown = run_cli(["plugins", "--json"], env)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    rows = {row["name"]: row for row in json.loads(shown.stdout)}
    for name, (_, fragment) in BROKEN.items():
        assert rows[name]["status"] == "failed" and fragment in rows[name]["error"], rows[name]
    assert all(row["status"] == "ok" for name, row in rows.items() if name not in BROKEN)
