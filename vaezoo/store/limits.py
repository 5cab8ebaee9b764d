"""Bounds on what a small file may ask for: nesting depth, inflated archive records, expanded or foreign tensors.

A few kilobytes can describe gigabytes (a zip record that inflates, a tensor whose strides repeat one
element) or a structure nested deeper than Python's stack (TOML tables, a JSON recipe). These checks look
at what a file declares before it is read or used, so the refusal costs no more memory than the file.
This module does not import torch at its top: ``vaezoo list`` reads cards with it.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MAX_DEPTH = 64
"""The deepest nesting of tables and lists vaezoo reads in a card or a recipe."""


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether dicts and lists nest in ``value`` more than ``limit`` levels deep (checked without recursion)."""
    todo = [(value, 0)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            if level >= limit:
                return True
            todo.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def load_json(text: str, limit: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``, refused when it nests more than ``limit`` levels deep.

    Raises:
        ValueError: not JSON, or nested too deeply (json's own RecursionError included).
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"it nests deeper than {limit} levels") from None
    if too_deep(value, limit):
        raise ValueError(f"it nests deeper than {limit} levels")
    return value


def check_torch_zip(path: Path) -> None:
    """Refuse a ``torch.save`` zip file whose records declare more bytes than the file holds.

    ``torch.save`` stores its records uncompressed, so together they are never larger than the file;
    ``torch.load`` allocates each record's declared size before reading it. A file of another format (the
    legacy one) is left to ``torch.load``. An empty file is refused: ``torch.load`` says only ``EOFError``.

    Raises:
        ValueError: naming the record and its declared size, or that the file is empty.
    """
    size = Path(path).stat().st_size
    if size == 0:
        raise ValueError("it is an empty file (0 bytes)")
    if not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"it is not a readable torch zip file ({exc})") from None
    total = 0
    for record in records:
        total += record.file_size
        if total > size:
            raise ValueError(f"its record {record.filename!r} inflates to {record.file_size:,} bytes, beyond the "
                             f"file's {size:,} (torch.save stores records uncompressed)")


def not_dense(tensors: Mapping[str, torch.Tensor]) -> list[str]:
    """Names of the tensors that are not dense tensors in CPU memory: sparse, quantized or nested ones, or ones on
    the meta device, which ``torch.load(weights_only=True)`` returns as they were saved and no state dict of a
    model's parameters holds."""
    return [name for name, t in tensors.items() if not _dense(t)]


def expanded(tensors: Mapping[str, torch.Tensor]) -> list[str]:
    """Names of the dense tensors (:func:`not_dense` names the others) that span more bytes than their storage
    holds: stride-0 or overlapping views, which copying (``contiguous``, ``clone``, saving) would expand."""
    return [name for name, t in tensors.items()
            if _dense(t) and t.numel() * t.element_size() > t.untyped_storage().nbytes()]


def unusable(tensors: Mapping[str, torch.Tensor]) -> str | None:
    """What makes ``tensors`` no model's state dict, as words that follow what holds them ("holds tensors that ...",
    naming them): tensors :func:`not_dense` or :func:`expanded` names; None when there are none."""
    if foreign := not_dense(tensors):
        return (f"holds tensors that are not dense tensors in CPU memory (sparse, quantized or on the meta device) "
                f"{foreign}")
    if views := expanded(tensors):
        return f"holds tensors that span more bytes than they store (stride-0 or overlapping views) {views}"
    return None


def _dense(t: torch.Tensor) -> bool:
    import torch

    return t.layout == torch.strided and not (t.is_quantized or t.is_nested) and t.device.type == "cpu"
