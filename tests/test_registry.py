"""Registries: typed name -> object maps that refuse duplicates and explain unknown names."""

from __future__ import annotations

import pytest

from vaezoo.errors import CardError, DuplicateNameError, PluginError, UnknownNameError
from vaezoo.assemble import build_part as build
from vaezoo.context import BuildContext
from vaezoo.plugins import KINDS, registry
from vaezoo.registry import Registry, close_matches


def test_register_get_and_list_sorted():
    reg = Registry("widget")
    reg.register("beta", 2, plugin="p1")
    reg.register("alpha", 1, plugin="p2")
    assert reg["alpha"] == 1 and reg["beta"] == 2
    assert list(reg) == ["alpha", "beta"] and len(reg) == 2
    assert "alpha" in reg and "gamma" not in reg
    assert reg.plugin_of("beta") == "p1"


def test_duplicate_name_is_refused_naming_both_plugins():
    reg = Registry("widget")
    reg.register("gear", 1, plugin="first-plugin")
    with pytest.raises(DuplicateNameError, match="'gear'.*'first-plugin'.*'second-plugin'"):
        reg.register("gear", 2, plugin="second-plugin")
    assert reg["gear"] == 1


@pytest.mark.parametrize("name", ["", None, 3, "r10b.dotted", "a,b", "Spaced Name", "1st", "-x", "x\n"])
def test_invalid_names_are_refused(name):
    """A name with '.' or ',' could never be reached by --set METRIC.SETTING=VALUE or --metrics A,B."""
    with pytest.raises(PluginError, match="invalid name"):
        Registry("widget").register(name, 1, plugin="p")


@pytest.mark.parametrize("name", ["vae", "fashion_mnist", "jointvae-original", "C2"])
def test_names_of_letters_digits_underscores_and_hyphens_are_taken(name):
    registry = Registry("widget")
    registry.register(name, 1, plugin="p")
    assert registry[name] == 1


def test_the_check_refuses_objects_naming_plugin_and_kind():
    reg = Registry("widget", check=lambda obj: None if isinstance(obj, int) else "expected an int")
    with pytest.raises(PluginError, match="plugin 'p' registered widget 'w': expected an int"):
        reg.register("w", "not an int", plugin="p")


def test_unknown_name_lists_close_matches_and_the_known_names():
    reg = Registry("widget")
    for name in ("gaussian", "gumbel_categorical", "joint"):
        reg.register(name, name, plugin="p")
    with pytest.raises(UnknownNameError) as info:
        reg["gausian"]
    assert str(info.value) == ("unknown widget 'gausian'. Did you mean 'gaussian'? "
                               "Known: gaussian, gumbel_categorical, joint")
    assert isinstance(info.value, KeyError)
    assert close_matches("zzzz", ["gaussian", "joint"]) == ""
    # a family of names by its first word: difflib found none of them for 'dci'
    dci = ["mig_chen", "dci_informativeness", "dci_disentanglement", "dci_completeness", "sap_score"]
    assert close_matches("dci", dci) == (" Did you mean 'dci_completeness', 'dci_disentanglement', "
                                         "'dci_informativeness'?")
    assert close_matches("mi", ["mig_chen", "mig_dlib"]) == ""


def test_core_parts_are_registered_by_the_core():
    assert registry("architecture").plugin_of("vae") == "core"
    assert {"gaussian", "gumbel_categorical", "joint"} <= set(registry("latent family"))
    assert {"beta", "capacity", "total_correlation"} <= set(registry("regularizer"))
    assert {"conv_encoder", "conv_decoder", "mlp_encoder", "mlp_decoder"} <= set(registry("net"))
    assert {"bernoulli", "gaussian"} <= set(registry("likelihood"))
    for kind in KINDS:
        registry(kind)  # every kind fills without error


def test_build_a_part_from_a_spec():
    family = build("latent family", {"type": "gumbel_categorical", "categories": 5})
    assert family.categories == 5
    context = BuildContext(builder=build, image_size=16, channels=1, dataset_size=100)
    encoder = build("net", "mlp_encoder", context)  # the facts it takes come from the context, the others are dropped
    assert encoder.out_features == 1200 and encoder.net[0].in_features == 16 * 16


def test_a_spec_contradicting_the_data_names_both_values():
    context = BuildContext(builder=build, image_size=16, channels=1, dataset_size=100)
    with pytest.raises(CardError, match="given dataset_size = 50 but the dataset has 100"):
        build("regularizer", {"type": "total_correlation", "dataset_size": 50}, context)


@pytest.mark.parametrize("spec, error, message", [
    ({"categories": 5}, CardError, "needs a 'type' key"),
    ({"type": "gumbel_categorical", "categorie": 5}, CardError, "accepted arguments: categories, temperature"),
    ({"type": "gumbel"}, UnknownNameError, "Did you mean 'gumbel_categorical'"),
])
def test_bad_part_specs_get_clear_errors(spec, error, message):
    with pytest.raises(error, match=message):
        build("latent family", spec)
