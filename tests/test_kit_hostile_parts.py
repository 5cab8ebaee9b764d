"""The conformance kit on parts that break their contract in ways a careless plugin author writes: each failure is a
ConformanceError naming the part and the rule, its text printable (a plugin's message cannot drive the terminal)."""

from __future__ import annotations

import pytest
from kit import install_plugin

from vaezoo import testing
from vaezoo.testing import ConformanceError

PLUGIN = '''
import vaezoo
from vaezoo.data.synthetic import Synthetic


class DictInfo(Synthetic):
    def info(self, split="train", image_size: int = 16, channels: int = 1, size: int = 64):
        return {"size": size, "image_size": image_size}


def loud(context, image_size, channels, dim: int = 3):
    raise RuntimeError("\\x1b[2J\\x1b[31mcleared\\x1b[0m\\rover\\nsecond line")


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    register("dict_info", DictInfo())


@vaezoo.hookimpl
def vaezoo_register_architectures(register):
    register("loud", loud)
'''


@pytest.fixture
def hostile(site):
    install_plugin(site, "hostile", PLUGIN)


def test_a_dataset_whose_info_is_no_data_info_is_a_conformance_error_naming_it(hostile):
    """info() returning a dict raised AttributeError ('dict' object has no attribute 'size') out of the kit."""
    with pytest.raises(ConformanceError) as error:
        testing.check_dataset("dict_info", image_size=16)
    assert str(error.value) == ("dataset 'dict_info' of plugin 'hostile': info('train') returned a dict, not a "
                                "vaezoo.data.DataInfo")


def test_what_a_part_raises_is_quoted_with_its_control_characters_escaped(hostile):
    """The message of a builder's exception went into the ConformanceError as it was: its ESC sequences cleared and
    coloured the terminal pytest reports on, its carriage return overwrote the line."""
    with pytest.raises(ConformanceError) as error:
        testing.check_architecture("loud", image_size=16, channels=1, train=False)
    message = str(error.value)
    assert message.startswith("architecture 'loud' of plugin 'hostile': building with ")
    assert message.endswith(r"raised RuntimeError: \x1b[2J\x1b[31mcleared\x1b[0m\rover\nsecond line")
    assert message.isprintable()
