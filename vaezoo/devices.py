"""The devices this machine has, and the dtypes a model takes, checked before a model or a run is put on one."""

from __future__ import annotations

import operator
import os

import torch

from vaezoo.errors import DeviceError, DtypeError, in_brief

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
"""The dtypes a model's parameters may have."""

DTYPE_NAMES = {**{str(d).removeprefix("torch."): d for d in DTYPES}, "bf16": torch.bfloat16, "fp16": torch.float16}
"""Their names, as a string may give them."""


ACCELERATORS = ("cuda", "mps", "xpu")
"""The accelerator types ``auto`` looks for, in this order."""


def usable_device(device: str | torch.device | None) -> torch.device | None:
    """``device`` as a :class:`torch.device`: ``cpu``, or an accelerator this machine has (``cuda:1``, ``mps``,
    ``xpu``: any type whose ``torch.<type>`` module reports it available and counts its devices). ``"auto"`` is
    the first accelerator of :data:`ACCELERATORS` this machine has, else the CPU. An index (``0``, a numpy integer, a
    0-d integer tensor) is ``cuda:INDEX``, as torch's. None (no device chosen) stays None: the caller's default.

    Every public function of vaezoo and its built-in plugins that takes a ``device`` takes what this takes, and
    passes it through here before using it or handing it on to a part, so that no part of a plugin sees ``auto``.

    Raises:
        DeviceError: ``device`` is not a device, or this machine does not have it, or it is torch's meta device.
    """
    if device is None:
        return None
    if isinstance(device, bool) or not isinstance(device, (str, torch.device, int)):  # torch took np.int64(0) only
        device = _index(device)
    if device == "auto":
        return torch.device(next((kind for kind in ACCELERATORS if _count(kind)), "cpu"))
    try:
        found = torch.device(device)
    except (RuntimeError, TypeError):
        raise DeviceError(f"'{device}' is not a device; use cpu, cuda, cuda:1, mps or auto") from None
    if found.type == "meta":  # on every machine, and no device to compute on: "not available" was a wrong reason
        raise DeviceError(f"device '{device}' holds no values (torch's meta device), so no model is loaded or run "
                          f"there; use cpu, cuda, cuda:1, mps or auto")
    index = device if isinstance(device, int) else found.index  # torch keeps an int in 8 bits: 256 is cuda:0, 500 -12
    if found.type != "cpu" and not 0 <= (index or 0) < _count(found.type):
        have = ", ".join(["cpu"] + [f"{kind}:{i}" for kind in ACCELERATORS for i in range(_count(kind))])
        raise DeviceError(f"device '{device}' is not available on this machine, which has {have}")
    return found


def _index(device: object) -> int:
    """``device`` as the device index it is: a numpy integer, or a 0-d integer tensor or array (what the index of
    ``torch.device(0)`` takes); anything else (a bool, a float, a tensor of several values) is refused by name."""
    is_bool = isinstance(device, bool) or str(getattr(device, "dtype", "")) in ("bool", "torch.bool")
    if not is_bool and getattr(device, "ndim", 0) == 0:
        try:
            return operator.index(device)
        except TypeError:
            pass
    raise DeviceError(f"{in_brief(device, 60)} is not a device; use cpu, cuda, cuda:1, mps or auto")


def _count(kind: str) -> int:
    """How many devices of ``kind`` this machine has (0 for a kind torch has no module for)."""
    module = getattr(torch, kind, None)
    is_available, device_count = getattr(module, "is_available", None), getattr(module, "device_count", None)
    if not (callable(is_available) and callable(device_count)):
        return 0
    return device_count() if is_available() else 0


def usable_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """``dtype``, if a model's parameters may have it (one of :data:`DTYPES`, or its name: :data:`DTYPE_NAMES`).

    Raises:
        DtypeError: ``dtype`` is another dtype (complex, integer, float8) or not a dtype at all.
    """
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPE_NAMES:  # as transformers takes it
        return DTYPE_NAMES[dtype.removeprefix("torch.")]
    if dtype not in DTYPES:
        names = ", ".join(str(d) for d in DTYPES)
        raise DtypeError(f"dtype {dtype!r} cannot be a model's parameters' type; use one of {names} (or its name, "
                         f"'float16')")
    return dtype


def physical_memory() -> int | None:
    """Bytes of memory this machine has; None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
