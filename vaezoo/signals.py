"""Stop signals of a training run: SIGINT (Ctrl-C), SIGTERM and SIGHUP (its terminal closed) end the step under
way, then the run. Every command stops on them as on Ctrl-C, so that what it was writing is cleaned up. A signal
the process was started ignoring stays ignored (``nohup vaezoo train ...`` goes on when its terminal closes).

While the loop runs (:class:`StopSignals` with ``defer``), the first signal is only noted: the loop ends the
step under way, writes a checkpoint of the step reached and raises :class:`Interrupted`. A second SIGINT
stops at once. Outside the loop every signal stops at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Self

if TYPE_CHECKING:
    import torch

__all__ = ["STOP_SIGNALS", "Interrupted", "StopSignals", "raise_if_stopped"]


class Interrupted(KeyboardInterrupt):
    """One of :data:`STOP_SIGNALS` stopped a run.

    Attributes:
        signal: the signal's number.
        step: the step of the checkpoint written when the loop stopped; None when the signal stopped the
            run outside the loop or a second SIGINT stopped it at once (the last checkpoint, if any, stays).
        checkpoint: the checkpoint file of the run.
        checkpoints: the checkpoint files of every run the command trains (one, or an ensemble's).
        reports: whether this process is the one that says where the run stopped: under torchrun, process 0
            alone (training sets it from :func:`vaezoo.training.launch.launch`); a lone process always.
    """

    def __init__(self, signum: int, step: int | None = None, checkpoint: Path | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signal, self.step, self.checkpoint = signum, step, checkpoint
        self.checkpoints = [checkpoint] if checkpoint is not None else []
        self.reports = True

    def __str__(self) -> str:
        """What stopped the run and, where the loop wrote one, the checkpoint holding it: the line a notebook shows
        under a cell whose ``train`` a stop signal ended."""
        from vaezoo.errors import printable

        said = f"stopped by {signal.Signals(self.signal).name}"
        if self.step is None:
            return said
        several = len(self.checkpoints) > 1
        return printable(f"{said} at step {self.step}; the checkpoint{'s' * several} "
                         f"{', '.join(map(str, self.checkpoints))} hold{'' if several else 's'} it; train again with "
                         f"resume=True to continue")


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that stop a run (Windows has no SIGHUP)."""


def exit_finished(code: int) -> NoReturn:
    """Exit a finished command with ``code``, the stop signals ignored from now on: the interpreter's shutdown
    (about a second, torch's and the threads') has nothing to clean up, and a Ctrl-C then would make a command that
    succeeded fail."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    sys.exit(code)


def stopped_words(signum: int) -> str:
    """What a command says when the stop signal ``signum`` ended it: ``interrupted`` (Ctrl-C) or ``stopped by
    SIGTERM``; its exit code is 128 + ``signum``, as shells give."""
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


_RAISING: list[StopSignals] = []
"""The :class:`StopSignals` in use that raise at once (not ``defer``): :func:`raise_if_stopped` reads them."""


def raise_if_stopped() -> None:
    """Raise :class:`Interrupted` again if a stop signal raised it once already: before a file is written, so that
    code which swallowed it (pydantic's validation turns it into a ValidationError, and every card then failed its
    name pattern) cannot have what it computed since written (a study wrote an empty table and removed its figures).

    Raises:
        Interrupted: the first stop signal a :class:`StopSignals` in use without ``defer`` raised.
    """
    for stops in _RAISING:
        if stops.received is not None:
            raise Interrupted(stops.received)


class StopSignals:
    """Handles :data:`STOP_SIGNALS` in the main thread while in use, those the process does not ignore, then gives
    back the previous handlers.

    With ``defer``, the first signal is only noted (``received``) for the loop to stop at the end of its
    step; a second SIGINT raises :class:`Interrupted` at once, a second SIGTERM or SIGHUP is ignored (the run
    is already stopping). Without ``defer`` every signal raises at once, and ``received`` keeps the first:
    code that swallows the raised :class:`Interrupted` (torch's C code does, when it strikes inside the
    import of numpy that torch's own import makes) cannot hide that a stop was asked for.
    """

    def __init__(self, defer: bool):
        self.defer = defer
        self.received: int | None = None
        self.previous: dict[int, object] = {}

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():  # Python handles signals there only
            # one the process ignores stays ignored: SIGHUP under nohup, SIGINT of a shell script's background job
            self.previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS
                             if signal.getsignal(s) is not signal.SIG_IGN}
            if not self.defer:
                _RAISING.append(self)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        if self in _RAISING:
            _RAISING.remove(self)

    def _handle(self, signum: int, frame) -> None:
        if self.defer and self.received is None:
            self.received = signum
        elif not self.defer or signum == signal.SIGINT:
            self.received = self.received or signum
            raise Interrupted(signum)

    def stop_requested(self, world: int, device: torch.device | str) -> int | None:
        """The signal that asks a run of ``world`` processes to stop, if any; under DDP (``world`` > 1) a signal
        on any rank stops every rank, agreed through a tensor on ``device`` (``"auto"`` too:
        :func:`vaezoo.devices.usable_device`)."""
        if world == 1:
            return self.received
        import torch
        import torch.distributed as dist

        from vaezoo.devices import usable_device

        flag = torch.tensor([self.received or 0], device=usable_device(device))
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item()) or None
