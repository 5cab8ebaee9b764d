"""Downloads and the cache against a local HTTP server: one download for many processes, no partial files,
no body past the card's size, no redirect the card's URL could not be, one deadline for everything."""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import multiprocessing
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from kit import assert_one_line_error, child_env, cli, files_under, make_card, serve_entry, write_card

import vaezoo
from vaezoo.errors import VaezooError, WeightsError
from vaezoo.store import downloads
from vaezoo.store.downloads import MAX_REDIRECTS, cache_dir

PROCESSES = 8
WEIGHTS_PATH = "/tiny.safetensors"


@pytest.fixture
def url_card(cards_dir, data_plugin, server):
    """A tiny card whose weights only ``server`` has; returns the served bytes."""
    serve_entry(server, WEIGHTS_PATH, cards_dir, make_card("tiny"), stem="tiny")
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
    assert server.request_headers[WEIGHTS_PATH]["Accept-Encoding"] == "identity"
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


@pytest.mark.slow
def test_connection_always_cut_is_a_clean_error(url_card, server, capsys):
    server.cut_after = len(url_card) // 2
    with pytest.raises(WeightsError, match="failed after 3 attempts") as err:
        vaezoo.load("tiny-blobs")
    assert server.url(WEIGHTS_PATH) in str(err.value)
    assert server.gets == {WEIGHTS_PATH: 3}
    assert _cached(url_card) == []
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, server.url(WEIGHTS_PATH), "failed after 3 attempts", "check the network")
    assert _cached(url_card) == []


@pytest.mark.parametrize("where", ["before the headers", "in the middle of the body"])
@pytest.mark.slow
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


@pytest.mark.parametrize("variable", ["VAEZOO_TIMEOUT", "VAEZOO_DOWNLOAD_DEADLINE"])
@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan", "1e10"])
def test_unusable_timeout_setting(url_card, server, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(WeightsError, match=f"{variable} must be a number of seconds above 0 and at most 1,000,000, "
                                           f"got '{value}'"):
        vaezoo.load("tiny-blobs")
    assert server.gets == {}


def test_damaged_cache_entry_is_fetched_again(url_card, server):
    vaezoo.load("tiny-blobs")
    (cached,) = _cached(url_card)
    (cache_dir() / cached).write_bytes(url_card[:-1] + bytes([url_card[-1] ^ 1]))
    vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 2}
    assert _cached(url_card) == [cached]


def test_a_card_with_another_cards_sha256_and_a_wrong_size_leaves_that_cards_file(url_card, server, monkeypatch):
    from vaezoo.entries.catalog import get_card

    vaezoo.load("tiny-blobs")
    [cached] = _cached(url_card)
    card_path = get_card("tiny-blobs").path
    good = card_path.read_text()
    card_path.write_text(good.replace(f"size = {len(url_card)}", f"size = {len(url_card) + 1}"))
    with pytest.raises(WeightsError, match=rf"as {len(url_card) + 1:,} bytes, but the file with that sha256 .* has "
                                           rf"{len(url_card):,}; correct the card's size"):
        vaezoo.load("tiny-blobs")
    card_path.write_text(good)
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    vaezoo.load("tiny-blobs")  # from the cache, still there
    assert _cached(url_card) == [cached] and server.gets == {WEIGHTS_PATH: 1}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_during_a_download_leaves_no_temporary_file(url_card, server, cards_dir, data_plugin, tmp_path,
                                                                  signum):
    server.cut_after, server.stall = len(url_card) // 2, 30.0  # half the file, then a long pause
    home = tmp_path / "home"
    child = subprocess.Popen([sys.executable, "-m", "vaezoo", "eval", "tiny-blobs", "--metrics", "elbo"],
                             env=child_env(home, cards_dir, data_plugin), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not list((home / "weights").glob("*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list((home / "weights").glob("*.tmp")), "the download never started"
        child.send_signal(signum)
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 128 + signum
    assert_one_line_error(stderr, f"stopped by {signal.Signals(signum).name}")
    assert [p.name for p in (home / "weights").iterdir() if not p.name.endswith(".lock")] == []


def test_the_temporary_file_of_a_download_killed_midway_goes_with_the_next_download(url_card, server):
    """SIGKILL leaves the half-written ``.SHA.safetensors.XXXXXXXX.tmp``; it stayed in the cache for good."""
    from vaezoo.entries.catalog import get_card

    name = f"{get_card('tiny-blobs').weights.sha256}.safetensors"
    cache_dir().mkdir(parents=True)
    killed = cache_dir() / f".{name}.k1ll3d00.tmp"
    killed.write_bytes(url_card[: len(url_card) // 2])
    other = cache_dir() / f".{'0' * 64}.safetensors.a1b2c3d4.tmp"  # another file's download: not this lock's
    other.write_bytes(b"half")
    vaezoo.load("tiny-blobs")
    assert not killed.exists() and other.exists() and server.gets == {WEIGHTS_PATH: 1}


def test_wrong_bytes_from_the_server_are_not_kept(url_card, server):
    server.files[WEIGHTS_PATH] = bytes(reversed(url_card))
    with pytest.raises(WeightsError, match="refusing it: the server holds other weights than the card states "
                                           r"\(ask the card's publisher"):
        vaezoo.load("tiny-blobs")
    assert _cached(url_card) == []


def test_missing_on_the_server(url_card, server):
    del server.files[WEIGHTS_PATH]
    with pytest.raises(WeightsError, match="Not Found"):
        vaezoo.load("tiny-blobs")
    assert _cached(url_card) == []


@pytest.mark.parametrize("on", ["1", "yes", "TRUE", "On"])
def test_offline_with_an_empty_cache(url_card, server, monkeypatch, capsys, on):
    """VAEZOO_OFFLINE=yes went online: only "1" was read as on."""
    monkeypatch.setenv("VAEZOO_OFFLINE", on)
    with pytest.raises(WeightsError, match="VAEZOO_OFFLINE=1"):
        vaezoo.load("tiny-blobs")
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "VAEZOO_OFFLINE=1", "not in the cache")
    assert server.gets == {}


def test_an_offline_setting_that_is_neither_on_nor_off_is_refused_before_going_online(url_card, server, monkeypatch,
                                                                                        capsys):
    monkeypatch.setenv("VAEZOO_OFFLINE", "maybe")
    with pytest.raises(VaezooError, match=r"^VAEZOO_OFFLINE='maybe' is neither on nor off; set it to 1 "):
        vaezoo.load("tiny-blobs")
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "VAEZOO_OFFLINE='maybe' is neither on nor off")
    assert server.gets == {}


@pytest.mark.parametrize("variable", ["VAEZOO_OFFLINE", "VAEZOO_ALLOW_HTTP", "VAEZOO_PROGRESS", "HF_HUB_OFFLINE",
                                      "HF_HUB_DISABLE_PROGRESS_BARS"])
@pytest.mark.parametrize("argv", [["list"], ["info", "tiny-blobs"], ["plugins"]])
def test_an_on_off_variable_that_is_neither_is_refused_by_any_command_up_front(cards, monkeypatch, capsys, variable,
                                                                                argv):
    # read only where a download or a progress line reads it: 'VAEZOO_OFFLINE=maybe vaezoo list' passed, and the
    # mistake showed in a later command (huggingface_hub reads any word but its on words as off, and goes online)
    write_card(cards, make_card("tiny", name="tiny-blobs"))
    monkeypatch.setenv(variable, "Maybe\x1b[2J")
    code, out, stderr = cli(capsys, *argv)
    assert (code, out) == (1, "")
    assert_one_line_error(stderr, f"{variable}='Maybe\\x1b[2J' is neither on nor off; set it to 1 (or yes, true, on) "
                                  f"or 0 (or no, false, off), or unset it")
    monkeypatch.setenv(variable, " Off ")
    assert cli(capsys, *argv)[0] == 0


def test_offline_with_a_damaged_copy_in_the_cache_says_so(url_card, server, monkeypatch):
    vaezoo.load("tiny-blobs")
    [cached] = [cache_dir() / name for name in _cached(url_card)]
    cached.write_bytes(b"x" * len(url_card))
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    with pytest.raises(WeightsError, match=rf"VAEZOO_OFFLINE=1 and the cached copy {re.escape(str(cached))} of .* "
                                           r"does not match the card \(damaged, or another file\); unset "
                                           r"VAEZOO_OFFLINE to download it again"):
        vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 1}


def test_offline_with_a_filled_cache(url_card, server, monkeypatch):
    vaezoo.load("tiny-blobs")
    monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 1}


# --- the card's size bounds the body ----------------------------------------------------------------------

@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_endless_body_is_cut_at_the_cards_size(url_card, server, capsys, framing):
    """No Content-Length, then the file followed by zeros forever: reading stops one byte past the card's size."""
    server.framing, server.endless = framing, True
    started = time.monotonic()
    with pytest.raises(WeightsError, match=f"the server sent more than the card's {len(url_card)} bytes"):
        vaezoo.load("tiny-blobs")
    assert time.monotonic() - started < 10
    assert server.gets == {WEIGHTS_PATH: 1}  # refused, not retried
    assert _cached(url_card) == []
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "more than the card's", server.url(WEIGHTS_PATH))
    assert _cached(url_card) == []


@pytest.mark.parametrize("announced", ["larger", "smaller"])
def test_content_length_other_than_the_cards_size_is_refused_before_reading(url_card, server, announced):
    length = 10**12 if announced == "larger" else len(url_card) - 1
    server.headers["Content-Length"] = str(length)
    announces = rf"announces {length} bytes \(Content-Length\) for .* but the card says {len(url_card)}; refusing it"
    with pytest.raises(WeightsError, match=announces):
        vaezoo.load("tiny-blobs")
    assert server.gets == {WEIGHTS_PATH: 1}
    assert _cached(url_card) == []


def test_chunked_body_of_the_right_size_loads(url_card, server):
    server.framing = "chunked"
    vaezoo.load("tiny-blobs")
    assert _cached(url_card) != []


# --- one deadline for the whole download ------------------------------------------------------------------

@pytest.mark.parametrize("how", ["a byte every 0.2 s", "no headers for 5 s"])
def test_deadline_cuts_a_slow_server(url_card, server, monkeypatch, how):
    """Each read is well within VAEZOO_TIMEOUT (30 s by default); the deadline still ends the download."""
    from filelock import FileLock

    monkeypatch.setenv("VAEZOO_DOWNLOAD_DEADLINE", "1.5")
    if how == "a byte every 0.2 s":
        server.trickle = 0.2
    else:
        server.delay = 5.0
    started = time.monotonic()
    with pytest.raises(WeightsError, match=r"did not finish within 1\.5 s; .* raise VAEZOO_DOWNLOAD_DEADLINE"):
        vaezoo.load("tiny-blobs")
    assert 1.5 <= time.monotonic() - started < 4
    assert server.gets == {WEIGHTS_PATH: 1}  # no retry after the deadline
    assert _cached(url_card) == []
    (lock,) = cache_dir().glob("*.lock")
    released = FileLock(str(lock))
    released.acquire(timeout=0)  # raises Timeout if the failed download still held it
    released.release()


def _hold(lock_path):
    """Take ``lock_path``'s flock as another process's filelock would; returns the open file."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    holder = open(lock_path, "a")
    fcntl.flock(holder, fcntl.LOCK_EX)
    return holder


def test_waiting_on_another_download_is_said_and_bounded(url_card, server, monkeypatch, capsys):
    monkeypatch.setenv("VAEZOO_DOWNLOAD_DEADLINE", "1.5")
    lock = cache_dir() / f"{_sha256(url_card)}.safetensors.lock"
    holder = _hold(lock)
    try:
        started = time.monotonic()
        with pytest.raises(WeightsError) as err:
            vaezoo.load("tiny-blobs")
        assert 1.5 <= time.monotonic() - started < 4
    finally:
        holder.close()
    assert str(err.value) == (f"another vaezoo process was still downloading {server.url(WEIGHTS_PATH)} after 1.5 s "
                              f"(lock {lock}); wait for it to finish or raise VAEZOO_DOWNLOAD_DEADLINE (seconds)")
    waiting = f"waiting for another vaezoo process downloading {server.url(WEIGHTS_PATH)} (lock {lock})"
    assert capsys.readouterr().err.splitlines() == [waiting]
    assert server.gets == {}


def test_waiting_ends_with_the_file_the_other_process_downloaded(url_card, server, capsys, monkeypatch):
    target = cache_dir() / f"{_sha256(url_card)}.safetensors"
    holder = _hold(target.with_name(target.name + ".lock"))
    waiting = threading.Event()
    said = downloads.note
    monkeypatch.setattr(downloads, "note", lambda text: (said(text), waiting.set()))

    def finish_other_download():  # once the load waits for the lock, however long a loaded machine took to get there
        waiting.wait(timeout=120)
        target.write_bytes(url_card)
        holder.close()

    other = threading.Thread(target=finish_other_download)
    other.start()
    vaezoo.load("tiny-blobs")
    other.join()
    assert "waiting for another vaezoo process downloading" in capsys.readouterr().err
    assert server.gets == {}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- redirects --------------------------------------------------------------------------------------------

def test_redirects_within_the_rules_are_followed(url_card, server):
    """Five hops (the most allowed), relative and absolute, all to the loopback host."""
    hops = [f"/hop{i}" for i in range(MAX_REDIRECTS)]
    for here, there in zip(hops, [*hops[1:], WEIGHTS_PATH]):
        server.redirects[here] = there if here != hops[0] else server.url(there)
    _point_card_at(server, hops[0])
    vaezoo.load("tiny-blobs")
    assert server.gets == {**{hop: 1 for hop in hops}, WEIGHTS_PATH: 1}
    assert server.request_headers[WEIGHTS_PATH]["Accept-Encoding"] == "identity"
    assert len(_cached(url_card)) == 1


@pytest.mark.parametrize("location", ["http://example.org/tiny.safetensors", "file:///etc/passwd",
                                      "ftp://127.0.0.1/tiny.safetensors", "http://127.0.0.1.example.org/x",
                                      "gopher://localhost/x"])
def test_redirect_to_a_url_the_card_could_not_hold_is_refused(url_card, server, capsys, location):
    server.redirects["/moved"] = location
    _point_card_at(server, "/moved")
    with pytest.raises(WeightsError) as err:
        vaezoo.load("tiny-blobs")
    assert str(err.value).startswith(f"download of {server.url('/moved')} was redirected: weights URL '{location}' "
                                     f"is not https")
    # file: and ftp: were told to set VAEZOO_ALLOW_HTTP=1, which allows plain http only
    assert ("VAEZOO_ALLOW_HTTP=1" in str(err.value)) == location.startswith("http:")
    assert server.gets == {"/moved": 1}  # refused, not retried
    assert _cached(url_card) == []
    code, _, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1
    assert_one_line_error(stderr, "was redirected", location)


@pytest.mark.parametrize("location", ["http://[::1/tiny.safetensors", "https://" + "a" * 70 + ".org/x"])
def test_redirect_to_a_malformed_address_is_one_line_and_not_retried(url_card, server, capsys, location):
    server.redirects["/moved"] = location
    _point_card_at(server, "/moved")
    with pytest.raises(WeightsError, match=r"failed: a malformed address \(.*\); fix the card's weights url"):
        vaezoo.load("tiny-blobs")
    assert server.gets == {"/moved": 1} and _cached(url_card) == []


@pytest.mark.parametrize("shape", ["a chain one hop too long", "a loop"])
def test_too_many_redirects_are_refused(url_card, server, shape):
    if shape == "a loop":
        server.redirects["/hop0"] = "/hop0"
    else:
        hops = [f"/hop{i}" for i in range(MAX_REDIRECTS + 1)]
        server.redirects.update(zip(hops, [*hops[1:], WEIGHTS_PATH]))
    _point_card_at(server, "/hop0")
    with pytest.raises(WeightsError, match=f"was redirected more than {MAX_REDIRECTS} times"):
        vaezoo.load("tiny-blobs")
    assert sum(server.gets.values()) == MAX_REDIRECTS + 1 and WEIGHTS_PATH not in server.gets
    assert _cached(url_card) == []


def _point_card_at(server, path: str) -> None:
    """Rewrite the tiny card so that its weights URL is ``path`` on ``server``."""
    from vaezoo.entries.catalog import get_card

    card_path = get_card("tiny-blobs").path
    card_path.write_text(card_path.read_text().replace(server.url(WEIGHTS_PATH), server.url(path)))


# --- Content-Encoding -------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["gzip", "br", "x-custom"])
def test_encoded_body_is_refused(url_card, server, encoding):
    server.files[WEIGHTS_PATH] = gzip.compress(url_card)
    server.headers["Content-Encoding"] = encoding
    with pytest.raises(WeightsError) as err:
        vaezoo.load("tiny-blobs")
    assert str(err.value) == (f"the server sent {server.url(WEIGHTS_PATH)} with Content-Encoding '{encoding}' "
                              f"although vaezoo asked for identity (uncompressed); serve the file as it is")
    assert server.request_headers[WEIGHTS_PATH]["Accept-Encoding"] == "identity"
    assert server.gets == {WEIGHTS_PATH: 1}
    assert _cached(url_card) == []


def test_identity_encoding_is_accepted(url_card, server):
    server.headers["Content-Encoding"] = "identity"
    vaezoo.load("tiny-blobs")
    assert len(_cached(url_card)) == 1
