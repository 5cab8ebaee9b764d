"""Weights: resolve a card's file or URL, download into the cache, verify sha256, load, save.

vaezoo reads safetensors only and never unpickles a file it downloaded or found.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from vaezoo.errors import WeightsError

if TYPE_CHECKING:
    import torch

    from vaezoo.cards import Card, Weights

CHUNK = 1 << 20
RETRIES = 3


def cache_dir() -> Path:
    """Where downloaded weights are kept: ``VAEZOO_HOME`` or the platform's user cache directory."""
    if os.environ.get("VAEZOO_HOME"):
        return Path(os.environ["VAEZOO_HOME"]).expanduser() / "weights"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("vaezoo")) / "weights"


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, weights: Weights) -> None:
    """Refuse ``path`` unless its size and sha256 are those the card states."""
    size = path.stat().st_size
    if size != weights.size:
        raise WeightsError(f"{path}: size is {size} bytes but the card says {weights.size}; "
                           f"the file is truncated or not the one the card describes")
    actual = sha256_of(path)
    if actual != weights.sha256:
        raise WeightsError(f"{path}: sha256 {actual} does not match the card's {weights.sha256}; "
                           f"refusing to load it")


def local_path(card: Card) -> Path:
    """The weights file beside ``card``; refuses paths that leave the card's directory."""
    assert card.weights is not None and card.weights.file is not None and card.path is not None
    directory = card.path.parent.resolve()
    path = (directory / card.weights.file).resolve()
    if directory not in path.parents:
        raise WeightsError(f"{card.path}: weights file '{card.weights.file}' is outside the card's "
                           f"directory {directory}; put the weights beside the card")
    if not path.is_file():
        raise WeightsError(f"{card.path}: weights file {path} does not exist; run 'vaezoo verify {card.name}' "
                           f"after restoring it")
    return path


def check_url(url: str) -> None:
    """Allow https anywhere, and http only to the loopback host or when ``VAEZOO_ALLOW_HTTP=1``."""
    parsed = urlparse(url)
    if parsed.scheme == "https":
        return
    if parsed.scheme == "http" and (parsed.hostname in ("127.0.0.1", "localhost", "::1")
                                    or os.environ.get("VAEZOO_ALLOW_HTTP") == "1"):
        return
    raise WeightsError(f"weights URL '{url}' is not https; vaezoo downloads weights over https only "
                       f"(set VAEZOO_ALLOW_HTTP=1 to allow plain http)")


def fetch(card: Card) -> Path:
    """The verified local copy of ``card``'s weights, downloading them into the cache if needed."""
    if card.weights is None:
        raise WeightsError(f"card '{card.name}' has no weights; load it with pretrained=False")
    if card.weights.file is not None:
        path = local_path(card)
        verify(path, card.weights)
        return path
    return download(card.weights.url, card.weights)


def download(url: str, weights: Weights) -> Path:
    """Download ``url`` into the cache, safely across processes, and verify it.

    The file is streamed to a temporary file, checked against the card's sha256
    and size, then renamed into place, under a file lock so that concurrent
    processes download it once.
    """
    from filelock import FileLock

    check_url(url)
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{weights.sha256}.safetensors"
    with FileLock(str(target) + ".lock"):
        if target.exists():
            try:
                verify(target, weights)
                return target
            except WeightsError:  # a damaged cache entry (vaezoo writes whole files only): fetch it again
                target.unlink()
        if os.environ.get("VAEZOO_OFFLINE") == "1":
            raise WeightsError(f"VAEZOO_OFFLINE=1 and {url} is not in the cache {directory}; "
                               f"unset VAEZOO_OFFLINE to download it")
        for attempt in range(1, RETRIES + 1):
            try:
                _download_to(url, target, weights)
                return target
            except (urllib.error.URLError, http.client.HTTPException, OSError, WeightsError) as exc:
                if isinstance(exc, WeightsError | urllib.error.HTTPError) or attempt == RETRIES:
                    raise _download_error(url, exc) from None
                time.sleep(0.5 * attempt)
    raise AssertionError("unreachable")


def _download_error(url: str, exc: Exception) -> WeightsError:
    if isinstance(exc, WeightsError):
        return exc
    if isinstance(exc, urllib.error.HTTPError):  # the server answered: retrying would not help
        return WeightsError(f"download of {url} failed: HTTP {exc.code} {exc.reason}")
    if isinstance(exc, TimeoutError) or "timed out" in str(exc):
        return WeightsError(f"download of {url} timed out; check the network or raise VAEZOO_TIMEOUT (seconds)")
    reason = getattr(exc, "reason", exc)
    return WeightsError(f"download of {url} failed after {RETRIES} attempts: {reason}")


def _timeout() -> float:
    """``VAEZOO_TIMEOUT``: seconds a download may wait for the server (default 30)."""
    value = os.environ.get("VAEZOO_TIMEOUT", "30")
    try:
        timeout = float(value)
    except ValueError:
        timeout = math.nan
    if not 0 < timeout < math.inf:
        raise WeightsError(f"VAEZOO_TIMEOUT must be a positive number of seconds, got '{value}'")
    return timeout


def _download_to(url: str, target: Path, weights: Weights) -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from vaezoo.files import atomic_save

    timeout = _timeout()

    def write(tmp: Path) -> None:
        digest, received = hashlib.sha256(), 0
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out, Progress(
            "[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            transient=True, disable=not sys.stderr.isatty(),
        ) as progress:
            task = progress.add_task(f"downloading {Path(urlparse(url).path).name}", total=weights.size)
            while chunk := response.read(CHUNK):
                digest.update(chunk)
                out.write(chunk)
                received += len(chunk)
                progress.update(task, advance=len(chunk))
        if received != weights.size:
            raise OSError(f"connection closed after {received} of {weights.size} bytes")
        if digest.hexdigest() != weights.sha256:
            raise WeightsError(f"download of {url} has sha256 {digest.hexdigest()}, not the card's "
                               f"{weights.sha256}; refusing it")

    atomic_save(target, write)


def load_state_dict(card: Card, device=None) -> dict[str, torch.Tensor]:
    """Fetch, verify and read ``card``'s weights as a state dict on ``device``."""
    return read_safetensors(fetch(card), device)


def read_safetensors(path: Path, device=None) -> dict[str, torch.Tensor]:
    """Read a safetensors file; anything else (a pickle, a corrupt header) is refused with a clear error."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=str(device) if device is not None else "cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise WeightsError(f"{path} is not a readable safetensors file ({exc})") from None


def save_weights(state_dict: dict[str, torch.Tensor], path: Path, metadata: dict | None = None) -> None:
    """Write a state dict as safetensors, atomically; ``metadata`` is stored as JSON strings in the header."""
    from safetensors.torch import save_file

    from vaezoo.files import atomic_save

    header = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()}
    tensors = {k: v.detach().contiguous().cpu() for k, v in state_dict.items()}
    atomic_save(Path(path), lambda tmp: save_file(tensors, str(tmp), metadata=header))


def read_metadata(path: Path) -> dict[str, str]:
    """The metadata header of a safetensors file."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})
