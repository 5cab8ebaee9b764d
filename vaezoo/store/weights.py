"""safetensors read and written: a state dict's tensors checked against the model's and loaded into it, its digest,
and a writer for atomic saves.

vaezoo reads safetensors only and never unpickles a file it downloaded or found. Which file a card names, and
where it is, is :mod:`vaezoo.entries.entry`'s; fetching one is :mod:`vaezoo.store.downloads`'.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.errors import WeightsError
from vaezoo.store.files import atomic_save

if TYPE_CHECKING:
    import torch


def parse_safetensors(data: bytes, source: Path | str, device=None) -> dict[str, torch.Tensor]:
    """The tensors of safetensors ``data`` (read from ``source``, named in messages) on ``device`` (``"auto"``
    too: :func:`vaezoo.devices.usable_device`; default the CPU).

    Raises:
        DeviceError: ``device`` is not one this machine has.
        WeightsError: ``data`` is not a safetensors file (a pickle, a corrupt header).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load

    from vaezoo.devices import usable_device

    device = usable_device(device)

    try:
        tensors = load(data)
    except (SafetensorError, ValueError) as exc:
        raise WeightsError(f"{source} is not a readable safetensors file ({exc})") from None
    return tensors if device is None else {name: t.to(device) for name, t in tensors.items()}


def is_safetensors(path: Path) -> bool:
    """Whether the file at ``path`` begins as a safetensors file does: an 8-byte little-endian header size that the
    rest of the file holds, then the header's JSON object. False for a file that cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(9)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") <= size - 8


def read_safetensors(path: Path, device=None) -> dict[str, torch.Tensor]:
    """Read a safetensors file onto ``device`` (``"auto"`` too: :func:`vaezoo.devices.usable_device`; default the
    CPU); anything else (a pickle, a corrupt header) is refused with a clear error.

    Raises:
        DeviceError: ``device`` is not one this machine has.
        WeightsError: ``path`` is not a readable safetensors file.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from vaezoo.devices import usable_device

    device = usable_device(device)
    try:
        return load_file(str(path), device=str(device) if device is not None else "cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise WeightsError(f"{path} is not a readable safetensors file ({exc})") from None


def load_weights(module: torch.nn.Module, state_dict: dict[str, torch.Tensor], source: str) -> None:
    """Load ``state_dict`` into ``module`` (a model, a regularizer's training part), refused in one line unless it
    is the module's: a mismatch lists the missing and unexpected keys and the wrong shapes, and tensors that cannot
    be its values are named (:func:`check_tensors`).

    Raises:
        WeightsError: naming ``source`` and what does not fit.
    """
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    shapes = [f"{k}: {tuple(state_dict[k].shape)} != {tuple(v.shape)}"
              for k, v in expected.items() if k in state_dict and state_dict[k].shape != v.shape]
    if missing or unexpected or shapes:
        found = {"missing keys": missing, "unexpected keys": unexpected, "wrong shapes": shapes}
        parts = [f"{what} {_first(names)}" for what, names in found.items() if names]
        raise WeightsError(f"{source} does not fit the model: {'; '.join(parts)}")
    check_tensors(state_dict, expected, source)
    module.load_state_dict(state_dict)


def _first(items: list[str], shown: int = 10) -> str:
    """``items`` as a list, the first ``shown`` of them and the count of the others: a state dict of 20,000 stray
    keys made a 449 kB line."""
    return str(items) if len(items) <= shown else f"{items[:shown]} and {len(items) - shown:,} more"


def check_tensors(state_dict: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], source: str) -> None:
    """Refuse tensors that have the model's names and shapes but cannot be its values.

    A file can match its card's sha256 and still hold integers or booleans where
    the model has floating-point parameters or buffers (``load_state_dict`` would
    silently convert them), or NaN and infinite values, which make every output
    NaN. Only names present in both dicts are checked.

    Args:
        state_dict: the tensors read from ``source``.
        expected: the model's own state dict.
        source: what the tensors come from, for the message (e.g. ``"weights of 'jointvae-mnist'"``).

    Raises:
        WeightsError: naming every tensor that is not floating point where the model's is, or holds NaN or inf.
    """
    kinds, non_finite = [], []
    for name, tensor in state_dict.items():
        own = expected.get(name)
        if own is None:
            continue
        if own.is_floating_point() and not tensor.is_floating_point():
            kinds.append(f"{name}: {_dtype(tensor)} where the model has {_dtype(own)}")
        elif tensor.is_floating_point() and not tensor.isfinite().all():
            non_finite.append(name)
    parts = [f"not floating point {kinds}" if kinds else "",
             f"NaN or inf values in {non_finite}" if non_finite else ""]
    if kinds or non_finite:
        raise WeightsError(f"{source} cannot be the model's values: {'; '.join(p for p in parts if p)}; "
                           f"refusing to load them")


def tensors_digest(state_dict: dict[str, torch.Tensor]) -> str:
    """The sha256 of a state dict's names, dtypes, shapes and values, wherever its tensors are."""
    import torch

    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name].detach().contiguous().cpu()
        digest.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _dtype(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def save_weights(state_dict: dict[str, torch.Tensor], path: Path, metadata: dict | None = None) -> None:
    """Write a state dict as safetensors, atomically; ``metadata`` is stored as JSON strings in the header."""
    atomic_save(Path(path), safetensors_writer(state_dict, metadata))


def safetensors_writer(state_dict: Mapping[str, torch.Tensor],
                       metadata: dict | None = None) -> Callable[[Path], object]:
    """What writes ``state_dict`` as a safetensors file at the path it is given (:func:`vaezoo.store.files.stage`)."""
    from safetensors.torch import save

    header = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (metadata or {}).items()}
    tensors = {k: v.detach().contiguous().cpu() for k, v in state_dict.items()}
    # The bytes, then Python's write: a full disk is an OSError, where safetensors' own file writer raises its
    # SafetensorError with the system's message in its text.
    return lambda tmp: tmp.write_bytes(save(tensors, metadata=header))
