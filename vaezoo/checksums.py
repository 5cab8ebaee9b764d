"""Whether a file is the one a card describes: its size and sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.errors import WeightsError

if TYPE_CHECKING:
    from vaezoo.cards import Weights

CHUNK = 1 << 20


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
