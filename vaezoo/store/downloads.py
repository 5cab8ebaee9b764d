"""Downloads into the cache: a weights file fetched from a URL, verified by its size and sha256 while it
streams, kept under its sha256 in :func:`cache_dir`; one download at a time per file across processes."""

from __future__ import annotations

import hashlib
import http.client
import math
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlparse

from vaezoo.errors import OutputError, WeightsError, setting_on
from vaezoo.store.checksums import Weights, read_verified, sha256_of
from vaezoo.store.files import FULL, atomic_save, folder_problem, remove_temporaries
from vaezoo.store.paths import home_path
from vaezoo.terminal import note, printable

if TYPE_CHECKING:
    pass

CHUNK = 1 << 20
RETRIES = 3
MAX_REDIRECTS = 5
LOCK_NOTICE = 0.5  # seconds spent waiting on another process's lock before saying so
DEADLINE_BASE, DEADLINE_RATE = 60.0, 100_000  # default deadline: 60 s plus 1 s per 100 kB of the card's size
CACHE_FIX = "set VAEZOO_HOME to a folder you can write to"


def cache_dir() -> Path:
    """Where downloaded weights are kept: ``VAEZOO_HOME`` or the platform's user cache directory."""
    if os.environ.get("VAEZOO_HOME"):
        return home_path(os.environ["VAEZOO_HOME"], "VAEZOO_HOME") / "weights"
    from platformdirs import user_cache_dir

    try:
        return Path(user_cache_dir("vaezoo")) / "weights"
    except RuntimeError as exc:  # no HOME, and no home folder in the system's user list
        raise WeightsError(f"cannot tell where the weights cache goes: {exc}; {CACHE_FIX}") from None


def cached_path(weights: Weights) -> Path:
    """Where the weights a card points to at a URL are kept once downloaded: named by their sha256 in
    :func:`cache_dir` (the file may not be there yet)."""
    return cache_dir() / f"{weights.sha256}.safetensors"


def check_url(url: str) -> None:
    """Allow https anywhere, and http only to the loopback host or when ``VAEZOO_ALLOW_HTTP=1``."""
    parsed = urlparse(url)
    if parsed.scheme == "https":
        return
    if parsed.scheme == "http" and (parsed.hostname in ("127.0.0.1", "localhost", "::1")
                                    or setting_on("VAEZOO_ALLOW_HTTP")):
        return
    if parsed.scheme == "http":
        raise WeightsError(f"weights URL '{url}' is not https; vaezoo downloads weights over https only "
                           f"(set VAEZOO_ALLOW_HTTP=1 to allow plain http)")
    raise WeightsError(f"weights URL '{url}' is not https; vaezoo downloads weights over https only (plain http "
                       f"where allowed), never {parsed.scheme or 'a URL without a scheme'}: name the weights at an "
                       f"https URL")


def download(url: str, weights: Weights) -> tuple[Path, bytes]:
    """Download ``url`` into the cache, safely across processes, verified as its bytes enter.

    A verified file already in the cache is served without taking the lock, so a
    read-only cache serves what it holds. Otherwise the file is streamed to a
    temporary file under a file lock (concurrent processes download it once),
    checked against the card's size and sha256, then renamed into place. The body
    may not exceed the card's size, every redirect must pass :func:`check_url`,
    and the whole download, waiting on another process's lock included, must end
    before the deadline (``VAEZOO_DOWNLOAD_DEADLINE``).

    Args:
        url: where the weights are; https, or http to the loopback host.
        weights: the card's weights entry (sha256 and size).

    Returns:
        The path of the file in the cache and its bytes: those hashed, either as they streamed in or as the
        cached copy was read (:func:`vaezoo.store.checksums.read_verified`), so a caller parses them and never
        reads or hashes the file again.

    Raises:
        WeightsError: the URL, the server, the cache folder or the deadline forbids it; one line naming which.
    """
    check_url(url)
    timeout, seconds = read_timeout(), _deadline(weights)
    deadline = time.monotonic() + seconds
    target = cached_path(weights)
    directory = target.parent
    if (data := _verified(target, weights, url)) is not None:
        return target, data
    if setting_on("VAEZOO_OFFLINE"):
        if target.exists():
            raise WeightsError(f"VAEZOO_OFFLINE=1 and the cached copy {target} of {url} does not match the card "
                               f"(damaged, or another file); unset VAEZOO_OFFLINE to download it again")
        raise WeightsError(f"VAEZOO_OFFLINE=1 and {url} is not in the cache {directory}; "
                           f"unset VAEZOO_OFFLINE to download it")
    _make_cache(directory)
    with _locked(Path(f"{target}.lock"), url, deadline, seconds, damaged=target if target.exists() else None):
        if (data := _verified(target, weights, url)) is not None:  # another process downloaded it meanwhile
            return target, data
        _remove_damaged(target, weights)
        remove_temporaries(target)  # of downloads killed midway: nobody else downloads it while this holds the lock
        for attempt in range(1, RETRIES + 1):
            try:
                data = _download_to(url, target, weights, min(timeout, deadline - time.monotonic()), deadline,
                                    seconds)
                return target, data
            except OutputError as exc:  # the cache folder, not the server, failed
                raise WeightsError(str(exc)) from None
            except (urllib.error.URLError, http.client.HTTPException, OSError, WeightsError, ValueError) as exc:
                if not isinstance(exc, WeightsError) and time.monotonic() >= deadline:
                    raise _deadline_error(url, seconds) from None
                if isinstance(exc, WeightsError | urllib.error.HTTPError | ValueError) or attempt == RETRIES:
                    raise _download_error(url, exc) from None
                time.sleep(min(0.5 * attempt, max(deadline - time.monotonic(), 0)))
    raise AssertionError("unreachable")


def _verified(target: Path, weights: Weights, url: str) -> bytes | None:
    """The bytes of ``target`` if it holds the card's file, else None; a folder in its place, or a file this user
    may not read, is an error."""
    try:
        if target.is_dir():
            raise WeightsError(f"{target} is a folder where the weights cache keeps a file; remove that folder")
        if not target.exists():
            return None
    except PermissionError:  # its folder may not be entered
        raise _unreadable_error(target, url) from None
    try:
        return read_verified(target, weights)
    except WeightsError:  # a damaged cache entry (vaezoo writes whole files only): fetched again under the lock
        if not _readable(target):
            raise _unreadable_error(target, url) from None
        return None


def _readable(path: Path) -> bool:
    """Whether this user may open ``path`` to read it (``os.access`` says yes to root whatever the mode)."""
    try:
        os.close(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))
    except PermissionError:
        return False
    return True


def _unreadable_error(target: Path, url: str) -> WeightsError:
    """The error of a cached copy this user may not read: it is not damaged, and replacing it would take another
    user's file away (a cache shared by users whose umask, such as 077, keeps each one's files to themselves). The
    fix it gives is the owner's: this user may not change the mode of another user's file."""
    return WeightsError(f"the cached copy {target} of {url} cannot be read (Permission denied: another user's umask, "
                        f"such as 077, may keep it to its owner); ask its owner to share it "
                        f"('chmod -R a+rX {target.parent}'), or {CACHE_FIX}")


def _remove_damaged(target: Path, weights: Weights) -> None:
    """Remove the cached file that failed verification against ``weights``, unless it is the file its name's
    sha256 promises: then the card's size is what is wrong, and another card's download stays."""
    if target.is_file() and sha256_of(target) == weights.sha256:
        raise WeightsError(f"the card gives the weights of sha256 {weights.sha256} as {weights.size:,} bytes, but the "
                           f"file with that sha256 ({target}) has {target.stat().st_size:,}; correct the card's size")
    try:
        target.unlink(missing_ok=True)
    except OSError as exc:
        raise WeightsError(f"the cached file {target} is damaged and cannot be removed ({exc.strerror}); "
                           f"remove it or {CACHE_FIX}") from None


def _make_cache(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WeightsError(f"cannot create the weights cache {directory}: {folder_problem(directory, exc)}; "
                           f"{_fix(exc)}") from None


def _fix(exc: OSError) -> str:
    """What to do about a cache folder that refused a write with ``exc``."""
    return f"free some space or {CACHE_FIX}" if exc.errno in FULL else CACHE_FIX


@contextmanager
def _locked(lock: Path, url: str, deadline: float, seconds: float, damaged: Path | None = None) -> Iterator[None]:
    """Hold the file lock ``lock``, saying so on stderr when another process holds it; wait until ``deadline``.

    ``damaged`` is the cached copy that failed verification, if any: a cache that cannot take the lock cannot
    replace it either, and the message says so.
    """
    from filelock import FileLock, Timeout

    if lock.is_dir():
        raise WeightsError(f"{lock} is a folder where the weights cache keeps a lock file; remove that folder")
    file_lock = FileLock(str(lock))
    try:
        try:
            file_lock.acquire(timeout=max(min(LOCK_NOTICE, deadline - time.monotonic()), 0))
        except Timeout:
            note(f"waiting for another vaezoo process downloading {url} (lock {lock})")
            file_lock.acquire(timeout=max(deadline - time.monotonic(), 0))
    except Timeout:
        raise WeightsError(f"another vaezoo process was still downloading {url} after {seconds:g} s (lock {lock}); "
                           f"wait for it to finish or raise VAEZOO_DOWNLOAD_DEADLINE (seconds)") from None
    except OSError as exc:
        if damaged is not None:
            raise WeightsError(f"the cached copy {damaged} of {url} does not match the card (damaged, or another "
                               f"file), and the cache cannot replace it (its lock file {lock} cannot be created: "
                               f"{exc.strerror or exc}); remove that file, or {_fix(exc)}") from None
        raise WeightsError(f"cannot create the lock file {lock} in the weights cache: {exc.strerror or exc}; "
                           f"{_fix(exc)}") from None
    try:
        yield
    finally:
        file_lock.release()


def _download_error(url: str, exc: Exception) -> WeightsError:
    if isinstance(exc, WeightsError):
        return exc
    if isinstance(exc, urllib.error.HTTPError):  # the server answered: retrying would not help
        return WeightsError(f"download of {url} failed: HTTP {exc.code} {exc.reason}")
    if isinstance(exc, ValueError):  # a malformed address, given or redirected to: retrying would not help
        return WeightsError(f"download of {url} failed: a malformed address ({exc}); fix the card's weights url")
    if isinstance(exc, TimeoutError) or "timed out" in str(exc):
        return WeightsError(f"download of {url} timed out; check the network or raise VAEZOO_TIMEOUT (seconds)")
    reason = getattr(exc, "reason", exc)
    return WeightsError(f"download of {url} failed after {RETRIES} attempts: {reason}; check the network and the "
                        f"server, then run again (what was received is not kept)")


def _deadline_error(url: str, seconds: float) -> WeightsError:
    return WeightsError(f"download of {url} did not finish within {seconds:g} s; check the network or raise "
                        f"VAEZOO_DOWNLOAD_DEADLINE (seconds; default {DEADLINE_BASE:g} plus 1 per "
                        f"{DEADLINE_RATE // 1000} kB of the file)")


MAX_SECONDS = 1_000_000.0
"""The longest timeout or deadline a setting may give (about 11 days): sockets and locks take no longer."""


def _seconds(name: str, default: float) -> float:
    """The environment variable ``name`` as a number of seconds in (0, :data:`MAX_SECONDS`]; ``default`` when
    unset."""
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_SECONDS:
        raise WeightsError(f"{name} must be a number of seconds above 0 and at most {MAX_SECONDS:,.0f}, "
                           f"got '{value}'")
    return seconds


def read_timeout() -> float:
    """``VAEZOO_TIMEOUT``: seconds one read from the server may wait (default 30): of a download, and of a push's
    answer from the Hub.

    Raises:
        WeightsError: it is no number of seconds above 0 and at most :data:`MAX_SECONDS`.
    """
    return _seconds("VAEZOO_TIMEOUT", 30.0)


def _deadline(weights: Weights) -> float:
    """``VAEZOO_DOWNLOAD_DEADLINE``: seconds the whole download may take (default 60 plus 1 per 100 kB)."""
    return _seconds("VAEZOO_DOWNLOAD_DEADLINE", DEADLINE_BASE + weights.size / DEADLINE_RATE)


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows at most :data:`MAX_REDIRECTS` redirects, each to a URL that :func:`check_url` allows."""

    max_repeats = max_redirections = MAX_REDIRECTS + 1  # urllib's own loop checks, in its words, never come first

    def __init__(self, url: str):
        self.url, self.hops = url, 0

    def http_error_302(self, req, fp, code, msg, headers):
        location = headers.get("Location", headers.get("URI"))
        if location is not None:  # checked before urllib's own scheme check, which would answer in its words
            self.hops += 1
            try:
                if self.hops > MAX_REDIRECTS:
                    raise WeightsError(f"download of {self.url} was redirected more than {MAX_REDIRECTS} times; "
                                       f"refusing to follow more")
                try:
                    check_url(urljoin(req.full_url, location))
                except WeightsError as exc:
                    raise WeightsError(f"download of {self.url} was redirected: {exc}") from None
            except WeightsError:
                fp.close()
                raise
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        fp.close()  # urllib would read the redirect's body to its end, with no bound
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _check_response(url: str, response, weights: Weights) -> None:
    """Refuse a response whose headers announce something other than the card's file as it is."""
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise WeightsError(f"the server sent {url} with Content-Encoding '{encoding}' although vaezoo asked "
                           f"for identity (uncompressed); serve the file as it is")
    length = response.headers.get("Content-Length")
    if length is not None and length.strip() != str(weights.size):
        raise WeightsError(f"the server announces {length.strip()} bytes (Content-Length) for {url} but the card "
                           f"says {weights.size}; refusing it")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _download_to(url: str, target: Path, weights: Weights, timeout: float, deadline: float, seconds: float) -> bytes:
    """Stream ``url`` into ``target`` atomically, checking size and sha256 as it comes; the bytes it received."""
    from rich.markup import escape
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    if timeout <= 0:
        raise _deadline_error(url, seconds)
    opener = urllib.request.build_opener(_CheckedRedirects(url))
    request = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})

    body = bytearray()

    def write(tmp: Path) -> None:
        digest, received = hashlib.sha256(), 0
        body.clear()  # an attempt cut short leaves nothing behind
        with opener.open(request, timeout=timeout) as response, Progress(
            "[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            transient=True, disable=not sys.stderr.isatty(),
        ) as progress:
            _check_response(url, response, weights)
            name = escape(printable(Path(urlparse(url).path).name))  # the column reads markup
            task = progress.add_task(f"downloading {name}", total=weights.size)
            fd = os.open(tmp, os.O_WRONLY)
            try:  # read1: one read per step, so the size and the deadline are checked between reads
                while chunk := response.read1(min(CHUNK, weights.size + 1 - received)):
                    received += len(chunk)
                    if received > weights.size:
                        raise WeightsError(f"the server sent more than the card's {weights.size} bytes for {url}; "
                                           f"refusing it")
                    if time.monotonic() > deadline:
                        raise _deadline_error(url, seconds)
                    digest.update(chunk)
                    body.extend(chunk)
                    _write_all(fd, chunk)
                    progress.update(task, advance=len(chunk))
            finally:
                os.close(fd)
        if received != weights.size:
            raise OSError(f"connection closed after {received} of {weights.size} bytes")
        if digest.hexdigest() != weights.sha256:
            raise WeightsError(f"download of {url} has sha256 {digest.hexdigest()}, not the card's "
                               f"{weights.sha256}; refusing it: the server holds other weights than the card states "
                               f"(ask the card's publisher, or correct the sha256 of a card you wrote)")

    atomic_save(target, write, fix=f"free some space or {CACHE_FIX}")
    return bytes(body)


