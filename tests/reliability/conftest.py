"""Fixtures of the reliability suite: a card directory, a plugin site, a local HTTP server."""

from __future__ import annotations

import pytest
from faultkit import TINY_DATASET_PLUGIN, FileServer, install_plugin


@pytest.fixture
def cards_dir(tmp_path, monkeypatch):
    """An empty card directory on ``VAEZOO_CARDS_PATH``."""
    directory = tmp_path / "cards"
    directory.mkdir()
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(directory))
    return directory


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on ``sys.path`` where fake plugins are installed; plugins reload after each install."""
    from vaezoo import plugins

    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    plugins.reset()
    return directory


@pytest.fixture
def tiny_data(site):
    """The plugin site with the synthetic ``tiny_blobs`` dataset installed."""
    from vaezoo import plugins

    install_plugin(site, "tinydata", TINY_DATASET_PLUGIN)
    plugins.reset()
    return site


@pytest.fixture
def server():
    """A :class:`faultkit.FileServer` on 127.0.0.1; tests put bytes in ``server.files``."""
    srv = FileServer({})
    yield srv
    srv.close()
