"""Plugins: entry points, the allow-list, and failures that are reported but never fatal for the others."""

from __future__ import annotations

import json
import sys
from importlib.metadata import entry_points

import pytest
from kit import child_env, install_plugin, make_card, run_vaezoo, write_card

import vaezoo
from vaezoo import plugins
from vaezoo.cli import main
from vaezoo.errors import VaezooError
from vaezoo.plugins import PluginWarning, get_plugins, registry

RAISES_ON_IMPORT = "raise RuntimeError('broken on import')\n"

RAISES_IN_HOOK = """
import vaezoo

@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    register("half_registered", dict)
    raise RuntimeError("broken in a hook")
"""

REGISTERS_VAE_AGAIN = """
import vaezoo

@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    register("vae", dict)
"""

REGISTERS_A_NON_FAMILY = """
import vaezoo

@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("not_a_family", dict)
"""

REGISTERS_A_LOSS_NAME = """
import vaezoo

@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    register("{name}", lambda model, dataset, device=None, batch_size=64: 0.0)
"""

REGISTERS_A_FAMILY_CLASS_OF_ANOTHER_NAME = """
import vaezoo
from vaezoo.latents import Gaussian

class Family(Gaussian):
    pass

@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    register("wobbly", Family)
"""

REGISTERS_A_SECTION_NAMED_LIKE_A_FIELD = """
import vaezoo
from pydantic import BaseModel

class Whatever(BaseModel):
    x: int = 0

@vaezoo.hookimpl
def vaezoo_register_card_sections(register):
    register("metrics", Whatever)
"""

ADDS_CARDS = """
from pathlib import Path

import vaezoo

@vaezoo.hookimpl
def vaezoo_card_dirs():
    return [Path(__file__).parent / "cards"]

@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    register("constant_metric", lambda model, dataset, device=None: 1.0)
"""

PRINTS = """
import vaezoo

print("chatty: imported")

@vaezoo.hookimpl
def vaezoo_card_dirs():
    print("chatty: card folders")
    return []
"""

CLASHES_IN_ONE_HOOK = """
from pathlib import Path

import vaezoo

@vaezoo.hookimpl
def vaezoo_register_latent_families(register):
    from vaezoo.latents.gaussian import Gaussian
    register("own_family", Gaussian)
    register("gaussian", Gaussian)

@vaezoo.hookimpl
def vaezoo_register_metrics(register):
    register("own_metric", lambda model, dataset, device=None: 1.0)

@vaezoo.hookimpl
def vaezoo_card_dirs():
    return [Path(__file__).parent / "cards"]
"""

BAD_CARD_DIRS = """
import vaezoo

@vaezoo.hookimpl
def vaezoo_card_dirs():
    return "not a list"
"""


@pytest.fixture
def baseline(monkeypatch):
    """Plugin statuses, architectures and zoo names before any fake plugin is installed."""
    monkeypatch.delenv("VAEZOO_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    plugins.reset()
    result = {
        "status": {name: info.status for name, info in get_plugins().info.items()},
        "architectures": set(registry("architecture")),
        "models": vaezoo.list_models(),
    }
    plugins.reset()
    return result


def test_empty_allow_list_loads_no_plugin(monkeypatch, site):
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    module = install_plugin(site, "fake", RAISES_ON_IMPORT)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    assert list(get_plugins().info) == list(plugins.ALWAYS)  # vaezoo's own load whatever the allow-list says
    assert list(registry("architecture")) == ["vae"]
    assert vaezoo.list_models() == []
    assert module not in sys.modules


def test_list_of_no_card_says_when_the_allow_list_leaves_the_zoo_out(monkeypatch, capsys):
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "jointvae")
    plugins.reset()
    assert main(["list"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("no card found: VAEZOO_LOAD_PLUGINS leaves out the installed plugins ")
    assert "zoo" in err.partition("plugins ")[2].partition(" (")[0].split(", ")
    assert err.endswith(" (plugin 'zoo' holds the built-in entries); add those whose cards you want\n")  # not 'zoo''s


@pytest.mark.parametrize("argv", [["list", "--json"], ["plugins", "--json"], ["info", "tiny", "--json"]])
def test_what_a_plugin_prints_as_it_loads_goes_to_stderr_not_into_the_json(site, cards_dir, capsys, argv):
    # its lines came on stdout before the JSON, which no reader then took
    write_card(cards_dir, make_card(name="tiny"))
    install_plugin(site, "chatty", PRINTS)
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)
    assert "chatty: imported\n" in err and "chatty: card folders\n" in err



@pytest.mark.parametrize("folder", ["missing", "a file"])
def test_a_card_folder_of_a_plugin_that_is_no_folder_is_named_once(site, capsys, folder):
    """A plugin built without its cards (no package-data), or returning a misspelt folder, had its cards left out of
    every listing without a word."""
    install_plugin(site, "cardy", ADDS_CARDS)  # its folder: site/cards
    if folder == "a file":
        (site / "cards").write_text("not a folder")
    said = ""
    for _ in range(2):
        assert main(["list", "--json"]) == 0
        out, err = capsys.readouterr()
        assert "vae-mnist" in {card["name"] for card in json.loads(out)}
        said += err
    why = "it is not a folder" if folder == "a file" else "no such folder"
    assert said.count(f"warning: card folder {site / 'cards'} of plugin 'cardy' (vaezoo_card_dirs) skipped: {why}; "
                     f"its cards are not listed: ship the folder in the plugin's package (its package-data) or "
                     f"return the folder that holds them\n") == 1


def test_an_unknown_part_names_the_installed_plugins_the_allow_list_leaves_out(monkeypatch, site):
    install_plugin(site, "cardy", ADDS_CARDS)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "jointvae")
    with pytest.raises(VaezooError) as caught:
        registry("metric")["constant_metric"]
    assert str(caught.value).endswith("add the one that registers it to VAEZOO_LOAD_PLUGINS")
    assert "VAEZOO_LOAD_PLUGINS leaves out: " in str(caught.value) and "cardy" in str(caught.value)
    monkeypatch.delenv("VAEZOO_LOAD_PLUGINS")
    plugins.reset()
    with pytest.raises(VaezooError) as caught:
        registry("metric")["no_such_metric"]
    assert "VAEZOO_LOAD_PLUGINS" not in str(caught.value)


def test_allow_list_loads_only_the_named_plugins(monkeypatch, site, baseline):
    module = install_plugin(site, "fake", RAISES_ON_IMPORT)
    entry_points = sorted(set(baseline["status"]) - {plugins.CORE})
    chosen = entry_points[0]
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", f" {chosen} ,")
    assert list(get_plugins().info) == [plugins.CORE, chosen, "extras"]
    assert module not in sys.modules


def test_an_allow_list_name_no_plugin_has_is_warned_about(monkeypatch, baseline):
    chosen = sorted(set(baseline["status"]) - {plugins.CORE})[0]
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", f"{chosen},zooo")
    with pytest.warns(PluginWarning, match=r"VAEZOO_LOAD_PLUGINS names 'zooo', which no installed plugin is called; "
                                           r"installed: .*\bcore\b"):
        assert list(get_plugins().info) == [plugins.CORE, chosen, "extras"]


def test_vaezoo_list_warns_in_one_line_of_an_allow_list_that_names_no_installed_plugin(monkeypatch, capsys):
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    installed = ", ".join(sorted({ep.name for ep in entry_points(group="vaezoo")}))
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "nosuch")
    assert main(["list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    warning, said = err.splitlines()
    assert warning == (f"warning: VAEZOO_LOAD_PLUGINS names 'nosuch', which no installed plugin is called; installed: "
                       f"{installed}")
    assert said.startswith("no card found: VAEZOO_LOAD_PLUGINS leaves out the installed plugins ")


def test_an_empty_allow_list_loads_the_core_without_a_warning(monkeypatch, capsys):
    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    assert main(["list", "--json"]) == 0
    out, err = capsys.readouterr()
    assert out == "[]\n" and "warning" not in err and err.startswith("no card found: ")  # says why, once


def test_plugins_load_once(baseline):
    assert get_plugins() is get_plugins()
    assert registry("architecture") is registry("architecture")
    assert baseline["status"][plugins.CORE] == "ok"
    assert all(status == "ok" for status in baseline["status"].values()), baseline["status"]


def test_a_plugin_that_raises_on_import_is_reported_and_the_rest_works(site, baseline):
    module = install_plugin(site, "broken", RAISES_ON_IMPORT)
    failure = "plugin 'broken' failed: import of '.*' raised RuntimeError: broken on import"
    with pytest.warns(PluginWarning, match=failure):
        info = get_plugins().info
    assert info["broken"].status == "failed" and "broken on import" in info["broken"].error
    assert {n: i.status for n, i in info.items() if n != "broken"} == baseline["status"]
    assert set(registry("architecture")) == baseline["architectures"]
    assert vaezoo.list_models() == baseline["models"]
    assert module not in sys.modules


def test_a_plugin_that_raises_in_a_hook_is_reported_and_registers_nothing(site, baseline):
    install_plugin(site, "hooky", RAISES_IN_HOOK)
    with pytest.warns(PluginWarning, match="hook vaezoo_register_architectures raised RuntimeError: broken in a hook"):
        architectures = set(registry("architecture"))
    assert architectures == baseline["architectures"]  # "half_registered" was not committed
    assert get_plugins().info["hooky"].status == "failed"
    assert vaezoo.list_models() == baseline["models"]


@pytest.mark.parametrize("copycat", ["aa_copycat", "zz_copycat"])  # loaded before and after the built-ins
def test_a_duplicate_name_is_refused_naming_both_plugins(site, baseline, copycat):
    install_plugin(site, copycat, REGISTERS_VAE_AGAIN)
    clash = f"architecture 'vae' is registered by both plugin 'core' and plugin '{copycat}'"
    with pytest.warns(PluginWarning, match=clash):
        arch = registry("architecture")
    assert arch.plugin_of("vae") == plugins.CORE
    assert set(arch) == baseline["architectures"]
    info = get_plugins().info
    assert info[copycat].status == "failed"
    assert {n: i.status for n, i in info.items() if n != copycat} == baseline["status"]
    assert "gaussian" in registry("latent family")  # the core keeps working


@pytest.mark.parametrize("refused_first", [True, False])
def test_a_refused_hook_costs_that_hook_only_whichever_ran_first(site, baseline, refused_first):
    install_plugin(site, "clashy", CLASHES_IN_ONE_HOOK)
    write_card(site / "cards", make_card(name="clashy-mnist"))
    with pytest.warns(PluginWarning, match="latent family 'gaussian' is registered by both plugin 'core'"):
        if refused_first:
            families = registry("latent family")
        metrics = registry("metric")
        models = vaezoo.list_models()
        if not refused_first:
            families = registry("latent family")
    assert "own_family" not in families and families.plugin_of("gaussian") == plugins.CORE
    assert metrics.plugin_of("own_metric") == "clashy"
    assert models == sorted(baseline["models"] + ["clashy-mnist"])
    info = get_plugins().info["clashy"]
    assert info.status == "failed" and info.error.count("latent family 'gaussian'") == 1


def test_a_registration_of_the_wrong_type_is_refused(site):
    install_plugin(site, "wrongtype", REGISTERS_A_NON_FAMILY)
    with pytest.warns(PluginWarning, match="expected a subclass of vaezoo.latents.base.LatentFamily"):
        families = registry("latent family")
    assert "not_a_family" not in families and "gaussian" in families


@pytest.mark.parametrize("name", ["objective", "reconstruction", "kl_z"])
def test_a_metric_named_like_a_loss_is_refused(site, name):
    """vaezoo eval records the losses beside the metrics: a metric 'objective' replaced the loss on the card."""
    install_plugin(site, "lossy", REGISTERS_A_LOSS_NAME.replace("{name}", name))
    with pytest.warns(PluginWarning, match=f"registered metric '{name}': the name is one of the losses vaezoo eval"):
        metrics = registry("metric")
    assert name not in metrics and "mig_chen" in metrics


def test_a_family_is_listed_under_the_name_it_is_registered_by(site):
    """new-plugin's template names its class Family: every family made from it was listed as family(N)."""
    from vaezoo.assemble import build_part
    from vaezoo.context import layout_text

    install_plugin(site, "wobbly", REGISTERS_A_FAMILY_CLASS_OF_ANOTHER_NAME)
    alone = build_part("latent family", {"type": "wobbly", "dim": 3})
    joint = build_part("latent family", {"type": "joint", "parts": [{"type": "wobbly", "name": "w", "dim": 2},
                                                                     {"type": "gaussian", "name": "g", "dim": 1}]})
    assert (layout_text(alone.layout()), layout_text(joint.layout())) == ("wobbly(3)", "wobbly(2) + gaussian(1)")


def test_a_card_section_named_like_a_card_field_is_refused(site):
    """A section 'metrics' was written over the card's metrics: the run's measured numbers were lost."""
    install_plugin(site, "sectclash", REGISTERS_A_SECTION_NAMED_LIKE_A_FIELD)
    with pytest.warns(PluginWarning, match="registered card section 'metrics': the name is one of a card's fields"):
        sections = registry("card section")
    assert "metrics" not in sections and "labels" in sections


def test_a_plugin_contributes_card_directories_and_metrics(site, baseline):
    install_plugin(site, "cardy", ADDS_CARDS)
    write_card(site / "cards", make_card(name="plugged-mnist"))
    assert vaezoo.list_models() == sorted(baseline["models"] + ["plugged-mnist"])
    assert registry("metric").plugin_of("constant_metric") == "cardy"
    assert get_plugins().info["cardy"].hooks == ["vaezoo_card_dirs", "vaezoo_register_metrics"]
    assert get_plugins().info["cardy"].version == "1.0"


def test_card_dirs_of_the_wrong_type_are_reported(site, baseline):
    install_plugin(site, "baddirs", BAD_CARD_DIRS)
    with pytest.warns(PluginWarning, match="vaezoo_card_dirs must return a list of paths"):
        assert vaezoo.list_models() == baseline["models"]
    assert get_plugins().info["baddirs"].status == "failed"


def test_plugins_command_shows_failures(monkeypatch, site, capsys, baseline):
    install_plugin(site, "broken", RAISES_ON_IMPORT)
    assert main(["plugins", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["broken"]["status"] == "failed"
    assert "RuntimeError: broken on import" in rows["broken"]["error"]
    assert {n: r["status"] for n, r in rows.items() if n != "broken"} == baseline["status"]
    assert "vaezoo_register_architectures" in rows["core"]["hooks"]
    assert rows["core"]["version"] == vaezoo.__version__
    builtins = {ep.name for ep in entry_points(group="vaezoo") if ep.dist.name == "vaezoo"}
    assert {n: (r["builtin"], r["distribution"] == "vaezoo") for n, r in rows.items() if n != "broken"} == {
        n: (n in builtins,) * 2 for n in baseline["status"]}  # third parties installed beside vaezoo are not
    assert (rows["broken"]["builtin"], rows["broken"]["distribution"][:12]) == (False, "fake_broken_")

    plugins.reset()
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["plugins"]) == 0
    table = capsys.readouterr().out
    line = next(line for line in table.splitlines() if "│ broken " in line)
    assert "failed: import of" in line and "broken on import" in line and "│ no " in line
    core = next(line for line in table.splitlines() if "│ core " in line)
    assert "│ vaezoo " in core and "│ yes " in core


def test_a_broken_plugin_warns_but_vaezoo_list_still_works(site, baseline):
    install_plugin(site, "broken", RAISES_ON_IMPORT)
    result = run_vaezoo("list", "--json", env=child_env(site.parent / "home", site=site))
    assert result.returncode == 0, result.stderr
    assert [row["name"] for row in json.loads(result.stdout)] == baseline["models"]
    assert "vaezoo plugin 'broken' failed" in result.stderr


def test_builtin_plugins_are_the_vaezoo_distributions_and_load_first(site, baseline):
    install_plugin(site, "aaa_first", ADDS_CARDS)  # sorts before every built-in
    info = get_plugins().info
    assert list(info)[0] == plugins.CORE
    builtin = [i.builtin for i in info.values()]
    assert builtin == sorted(builtin, reverse=True)  # every built-in before any third party
    assert [n for n, i in info.items() if not i.builtin][0] == "aaa_first"  # third parties by name
    assert all(i.builtin == (i.distribution == "vaezoo") for i in info.values())
    assert {"core", "zoo", "jointvae", "betatcvae"} <= {name for name, i in info.items() if i.builtin}
    assert not info["aaa_first"].builtin
    assert info["aaa_first"].distribution.startswith("fake_aaa_first_")


def test_two_third_parties_with_one_entry_point_name(site):
    first = install_plugin(site, "twin", ADDS_CARDS)
    second = install_plugin(site, "twin", ADDS_CARDS)
    kept, refused = sorted((first, second))  # the distributions' names decide
    with pytest.warns(PluginWarning, match=f"vaezoo plugin 'twin' refused: entry point 'twin' of distribution "
                                           f"'{refused}': plugin 'twin' of distribution '{kept}' has this name and "
                                           f"loaded first; uninstall one of them"):
        loaded = get_plugins()
    assert (loaded.info["twin"].distribution, loaded.info["twin"].status) == (kept, "ok")
    assert [(i.distribution, i.status) for i in loaded.refused] == [(refused, "refused")]


def test_the_allow_list_never_leaves_out_the_core(monkeypatch, baseline):
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "zoo")
    plugins.reset()
    assert list(get_plugins().info) == [plugins.CORE, "extras", "zoo"]
    assert set(registry("architecture")) == {"vae"}


def test_a_missing_core_entry_point_is_a_clear_error(monkeypatch):
    every = plugins.entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda group: [ep for ep in every(group=group) if ep.name != "core"])
    plugins.reset()
    with pytest.raises(VaezooError, match="vaezoo's own entry point 'core' .* is missing: the installation is "
                                          "incomplete; reinstall vaezoo"):
        get_plugins()
    plugins.reset()


def test_plugin_code_run_by_two_threads_at_once_leaves_stdout_as_it_was():
    """Each run sent stdout to stderr and put back what it had found: a run that began while another's was under way
    found stderr, and ending last, left every later print of the process on stderr."""
    import threading

    found = plugins.get_plugins()
    zoo = found.info["zoo"]
    stdout = sys.stdout
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        first_in.set()
        second_in.wait(10)

    def second():
        second_in.set()
        first_out.wait(10)

    one = threading.Thread(target=found._guarded, args=(zoo, "hook a", first))
    two = threading.Thread(target=found._guarded, args=(zoo, "hook b", second))
    one.start()
    first_in.wait(10)
    two.start()
    one.join(10)
    first_out.set()
    two.join(10)
    assert sys.stdout is stdout
