"""The progress of a training run on stderr: a live bar on a terminal, a plain line every few steps in logs.

Both show the epoch, the step, the loss and its terms, the KL of each latent part, the regularizers'
targets (e.g. capacities), images/s and the time left. ``VAEZOO_PROGRESS=0`` turns both off, as it
does for :mod:`vaezoo.terminal`.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Callable
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from vaezoo.errors import setting_on
from vaezoo.terminal import PLAIN_INTERVAL, printable, status_console


LONGEST_SILENCE = 60.0
"""The most seconds between two progress lines when stderr is not a terminal, however few steps were made: a slow
run's log (seconds a step) still gets a line a minute, where a CI service stops a job silent for ten."""

_LONGEST_ETA = datetime.timedelta.max.total_seconds() - 1
"""The longest time left a ``timedelta`` holds, in seconds: a run of 10^20 epochs has more left."""


class Reporter:
    """Training progress on stderr: a live display on a terminal; otherwise a line every ``every`` steps, at most
    one every ``interval`` seconds (a fast run's log gets a line every 10 s, not every 200 steps) and at least one
    every ``longest`` seconds (a slow run's log gets a line a minute, not one every 200 steps).

    Values come as a callable read only when shown, so the loop does not wait for every step's numbers.
    Their names come from plugins (regularizers' terms): they are shown as text, never as markup.

    Args:
        total: the run's last step.
        start: the step the run starts from (a resumed run starts past 0).
        per_epoch: steps per epoch; None where the runs shown differ in it (an ensemble's sweep of ``batch_size``),
            which leaves the epoch out.
        every: steps between lines when stderr is not a terminal.
        interval: the fewest seconds between two such lines (the last step's line is always shown).
        longest: the most seconds between two such lines, at the first step that ends past them.
        refresh: seconds between updates of the values on a terminal.
        console: a rich console (default: :func:`vaezoo.terminal.status_console`, on stderr); the live display is
            shown where it is interactive (a terminal that redraws), the lines elsewhere.
    """

    def __init__(self, total: int, start: int, per_epoch: int | None, every: int = 200, refresh: float = 0.5,
                 console: Console | None = None, interval: float = PLAIN_INTERVAL, longest: float = LONGEST_SILENCE):
        self.console = console or status_console()
        self.total, self.start, self.per_epoch, self.every, self.refresh = total, start, per_epoch, every, refresh
        self.interval, self.longest = interval, longest
        self.epochs = None if per_epoch is None else math.ceil(total / per_epoch)
        self.t0 = self.shown = time.perf_counter()
        self.images = 0
        self.quiet = not setting_on("VAEZOO_PROGRESS", default=True)
        self.display = _Display(self.console, total, start) if self.console.is_interactive and not self.quiet else None

    def update(self, step: int, images: int, values: Callable[[], dict[str, float]]) -> None:
        """Record that ``step`` is done after ``images`` more images; show ``values()`` when it is time to."""
        self.images += images
        if self.quiet:
            return
        now = time.perf_counter()
        last = step == self.total
        if self.display is not None:
            self.display.advance_to(step)
            if now - self.shown < self.refresh and not last:
                return
        else:
            due = step % self.every == 0 and now - self.shown >= self.interval
            if not (due or last or now - self.shown >= self.longest):
                return
        self.shown = now
        epoch = "" if self.epochs is None else f"epoch {(step - 1) // self.per_epoch + 1}/{self.epochs} "
        rate = f"{self.images / max(now - self.t0, 1e-9):.0f} img/s"
        terms = printable("  ".join(f"{k} {v:.4g}" for k, v in values().items()))
        if self.display is not None:
            self.display.show(epoch, rate, terms)
        else:
            left = (self.total - step) * (now - self.t0) / max(step - self.start, 1)
            eta = datetime.timedelta(seconds=round(left)) if left < _LONGEST_ETA else "over 999,999,999 days"
            self.console.print(f"{epoch}step {step}/{self.total} | {terms} | {rate} | eta {eta}",
                               markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop the live display, leaving its last state on screen."""
        if self.display is not None:
            self.display.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Display(Progress):
    """A progress bar (epoch, step, images/s, ETA) with the latest values on a line below it."""

    def __init__(self, console: Console, total: int, start: int):
        self.values = Text()  # before Progress.__init__, which may already render
        super().__init__(TextColumn("{task.fields[epoch]}"), BarColumn(), TextColumn("step"), MofNCompleteColumn(),
                         TextColumn("{task.fields[rate]}"), TextColumn("eta"), TimeRemainingColumn(), console=console)
        self.task = self.add_task("training", total=total, completed=start, epoch="", rate="")
        self.start()

    def advance_to(self, step: int) -> None:
        self.update(self.task, completed=step)

    def show(self, epoch: str, rate: str, values: str) -> None:
        self.values = Text(values)
        self.update(self.task, epoch=epoch, rate=rate)

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        yield self.values
