"""Downloads and the cache against a local HTTP server: one download for many processes, no partial files."""

from __future__ import annotations

import multiprocessing
import time

import pytest
from faultkit import assert_one_line_error, cli, files_under, save_tiny_weights, tiny_card, weights_entry, write_toml

import vaezoo
from vaezoo.errors import WeightsError
from vaezoo.weights import cache_dir

PROCESSES = 8
WEIGHTS_PATH = "/tiny.safetensors"


@pytest.fixture
def url_card(cards_dir, tmp_path, server):
    """A tiny card whose weights are served by ``server``; returns the served bytes."""
    source = save_tiny_weights(tmp_path / "served.safetensors", tiny_card())
    server.files[WEIGHTS_PATH] = source.read_bytes()
    write_toml(cards_dir / "tiny.toml", tiny_card(**weights_entry(source, url=server.url(WEIGHTS_PATH))))
    return server.files[WEIGHTS_PATH]


def _cached(payload: bytes) -> list[str]:
    """Files in the weights cache (lock files aside); asserts each is a complete copy of ``payload``."""
    if not cache_dir().exists():
        return []
    names = files_under(cache_dir())
    for name in names:
        assert (cache_dir() / name).read_bytes() == payload, f"{name} in the cache is not the served file"
    return names


def test_download_then_cache_hit(url_card, server):
    vaezoo.load("tiny-blobs")
    vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 1}
    assert len(_cached(url_card)) == 1


def _load_when_started(start, results) -> None:
    start.wait()
    try:
        vaezoo.load("tiny-blobs")
        results.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test with it
        results.put(f"{type(exc).__name__}: {exc}")


def test_eight_processes_download_once(url_card, server):
    server.delay = 0.5  # keep the first download open while the others reach the lock
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_load_when_started, args=(start, results)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert outcomes == ["ok"] * PROCESSES
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    assert server.gets == {WEIGHTS_PATH: 1}
    assert len(_cached(url_card)) == 1


def test_connection_cut_once_is_retried(url_card, server):
    server.cut_after, server.cut_times = len(url_card) // 2, 1
    vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 2}
    assert len(_cached(url_card)) == 1


def test_connection_always_cut_is_a_clean_error(url_card, server, capsys):
    server.cut_after = len(url_card) // 2
    with pytest.raises(WeightsError, match="failed after 3 attempts") as err:
        vaezoo.load("tiny-blobs")
    assert server.url(WEIGHTS_PATH) in str(err.value)
    assert server.gets == {WEIGHTS_PATH: 3}
    assert _cached(url_card) == []
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, server.url(WEIGHTS_PATH), "failed after 3 attempts")
    assert _cached(url_card) == []


@pytest.mark.parametrize("where", ["before the headers", "in the middle of the body"])
def test_slow_server_times_out(url_card, server, monkeypatch, where):
    monkeypatch.setenv("VAEZOO_TIMEOUT", "0.3")
    if where == "before the headers":
        server.delay = 2.0
    else:
        server.cut_after, server.stall = len(url_card) // 2, 2.0
    started = time.monotonic()
    with pytest.raises(WeightsError, match="timed out") as err:
        vaezoo.load("tiny-blobs")
    assert "VAEZOO_TIMEOUT" in str(err.value) and server.url(WEIGHTS_PATH) in str(err.value)
    assert time.monotonic() - started < 10
    assert _cached(url_card) == []


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_unusable_timeout_setting(url_card, server, monkeypatch, value):
    monkeypatch.setenv("VAEZOO_TIMEOUT", value)
    with pytest.raises(WeightsError, match=f"VAEZOO_TIMEOUT must be a positive number of seconds, got '{value}'"):
        vaezoo.load("tiny-blobs")
    assert server.gets == {}


def test_damaged_cache_entry_is_fetched_again(url_card, server):
    vaezoo.load("tiny-blobs")
    (cached,) = _cached(url_card)
    (cache_dir() / cached).write_bytes(url_card[:-1] + bytes([url_card[-1] ^ 1]))
    vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 2}
    assert _cached(url_card) == [cached]


def test_wrong_bytes_from_the_server_are_not_kept(url_card, server):
    server.files[WEIGHTS_PATH] = bytes(reversed(url_card))
    with pytest.raises(WeightsError, match="refusing it"):
        vaezoo.load("tiny-blobs")
    assert _cached(url_card) == []


def test_missing_on_the_server(url_card, server):
    del server.files[WEIGHTS_PATH]
    with pytest.raises(WeightsError, match="Not Found"):
        vaezoo.load("tiny-blobs")
    assert _cached(url_card) == []


def test_offline_with_an_empty_cache(url_card, server, monkeypatch, capsys):
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    with pytest.raises(WeightsError, match="VAEZOO_OFFLINE=1"):
        vaezoo.load("tiny-blobs")
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "VAEZOO_OFFLINE=1", "not in the cache")
    assert server.gets == {}


def test_offline_with_a_filled_cache(url_card, server, monkeypatch):
    vaezoo.load("tiny-blobs")
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 1}
