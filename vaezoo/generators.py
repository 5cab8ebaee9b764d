"""torch's global random generators belong to the process: vaezoo's seeded work (a metric's draws, a training run)
seeds them, draws from them and gives the caller's state back. Two threads doing so at once drew from each other's
streams, and put back each other's states: an evaluation of one card on 4 threads gave 12 values, none the one
the card records, and two seeded runs on 2 threads trained apart from the same run alone. Such work holds
:data:`HELD`, so that it runs one at a time in a process; the threads one evaluation starts for itself, and worker
processes, are not held back.
"""

from __future__ import annotations

import threading

__all__ = ["HELD"]

HELD = threading.RLock()
"""Held by a training run and by an evaluation (each metric measured) for their whole length; the thread that holds
it may take it again (a run evaluates its model at its end)."""
