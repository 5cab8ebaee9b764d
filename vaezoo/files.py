"""Writing files so that a crash never leaves one half-written."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from vaezoo.errors import OutputError


def atomic_save(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, then rename it over ``path``.

    Raises:
        OutputError: ``path``'s folder cannot be created or written in (e.g. a file stands in its path).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {_reason(path.parent, exc)}; choose another output path") from None
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the permissions open() would
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _reason(folder: Path, exc: OSError) -> str:
    """Why ``folder`` cannot hold a new file: a file standing in its path, or the system's reason."""
    blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    return f"{blocker} is a file, not a folder" if blocker else exc.strerror or str(exc)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    atomic_save(path, lambda tmp: tmp.write_bytes(data))
