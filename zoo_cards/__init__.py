"""The vaezoo zoo: cards (TOML) and their safetensors weights, contributed as a plugin."""

from pathlib import Path

from vaezoo.hookspecs import hookimpl


@hookimpl
def vaezoo_card_dirs():
    return [Path(__file__).parent]
