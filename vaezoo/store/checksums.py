"""Whether a file is the one a card describes: its size and sha256.

:func:`read_verified` reads a file once and returns the very bytes it hashed, so what is loaded is what was
verified even if another process replaces the file in between (hash a path, then read it again, and a
swap between the two loads bytes that never passed).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Protocol

from vaezoo.errors import WeightsError

CHUNK = 1 << 20


class Weights(Protocol):
    """What a card says of a file: its size in bytes and its hex sha256 (:class:`vaezoo.entries.schema.Weights`
    is one; the store needs nothing else of a card)."""

    size: int
    sha256: str


def sha256_of(path: Path) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_verified(path: Path, weights: Weights) -> bytes:
    """The contents of ``path``, read once, refused unless their size and sha256 are the card's.

    At most ``weights.size + 1`` bytes are read, whatever the file claims, and anything but a regular file
    (a FIFO, a device, a symlink loop) is refused without blocking on it.

    Args:
        path: the weights file.
        weights: the card's weights entry.

    Returns:
        The bytes that were hashed: parse these, never the path again.

    Raises:
        WeightsError: the file cannot be read, is not a regular file, or its size or sha256 is not the card's.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise WeightsError(f"{path}: is not a regular file; put the card's safetensors file there")
            data = _read_at_most(file, weights.size + 1)
    except OSError as exc:
        raise WeightsError(f"{path}: cannot read the weights file ({exc.strerror or exc})") from None
    if len(data) > weights.size:
        raise WeightsError(f"{path}: size is more than the card's {weights.size} bytes; the file is not the one "
                           f"the card describes")
    if len(data) < weights.size:
        raise WeightsError(f"{path}: size is {len(data)} bytes but the card says {weights.size}; "
                           f"the file is truncated or not the one the card describes")
    actual = hashlib.sha256(data).hexdigest()
    if actual != weights.sha256:
        raise WeightsError(f"{path}: sha256 {actual} does not match the card's {weights.sha256}; "
                           f"refusing to load it")
    return data


def _read_at_most(file, limit: int) -> bytes:
    parts, left = [], limit
    while left and (chunk := file.read(min(CHUNK, left))):
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def verify(path: Path, weights: Weights) -> None:
    """Refuse ``path`` unless its size and sha256 are those the card states (see :func:`read_verified`)."""
    read_verified(path, weights)
