"""Where this process stands in a launch of several (``torchrun``): the variables torchrun sets, checked, and the
meeting of the processes before their process group starts.

torchrun sets ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in each process's
environment. The same variables left in a shell by an earlier job (or set by hand) make a lone ``vaezoo train``
one process of a launch whose peers never come: torch's own rendezvous then waits half an hour in C code, where
neither Ctrl-C nor SIGTERM reaches Python. Here the values are checked first (one line naming the variable), and
a process that must wait for its peers waits in Python, saying once what it waits for, so that a stop signal
ends it at once.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta

from vaezoo.errors import TrainingError, first_line
from vaezoo.terminal import note

__all__ = ["PEERS_TIMEOUT", "Launch", "launch", "meet", "part", "said_by_another", "set_apart", "start_alike"]

PEERS_TIMEOUT = 30 * 60.0
"""Seconds a process waits for the other processes of its launch before giving up (torch's own default)."""

SAY_AFTER = 5.0
"""Seconds of waiting for the other processes before saying what the process waits for."""

_UNSET = ("unset WORLD_SIZE, RANK and the other variables torchrun sets (left from an earlier job?) to train in one "
          "process, or launch the run with torchrun")


_ALIKE = [True]
"""Whether this process has done only what every process of its launch does alike (reading its command line, the
card, the options), not yet its rank's own part (its device, its meeting with the others): :func:`set_apart`."""


def start_alike() -> None:
    """Note that this process starts a command, which every process of its launch does alike until it sets apart
    (:func:`set_apart`): a command before it in this process (an earlier ``vaezoo.cli.main``) may have set apart."""
    _ALIKE[0] = True


def set_apart() -> None:
    """Note that this process now does its rank's own part: an error from here on is its own to say."""
    _ALIKE[0] = False


def said_by_another() -> bool:
    """Whether an error of this process is one that another process of its launch says as well, word for word, so
    that this one stays quiet: under torchrun (every process it starts runs one command line in one environment,
    but for its ranks) each machine's first process (``LOCAL_RANK`` 0) speaks for the others, until they set
    apart (:func:`set_apart`). Not where ``WORLD_SIZE`` says one process: torchrun's variables left in a shell
    would silence the only process there is."""
    return (_ALIKE[0] and bool(os.environ.get("TORCHELASTIC_RUN_ID"))
            and os.environ.get("WORLD_SIZE", "1").strip() not in ("", "1")
            and os.environ.get("LOCAL_RANK", "0").strip() not in ("", "0"))


@dataclass(frozen=True)
class Launch:
    """This process's place in its launch: ``rank`` of ``world`` processes, ``local`` on its machine."""

    rank: int = 0
    world: int = 1
    local: int = 0

    @property
    def main(self) -> bool:
        """Whether this process speaks for the run (rank 0)."""
        return self.rank == 0


def launch() -> Launch:
    """This process's place in its launch, as the environment gives it (one process when ``WORLD_SIZE`` is unset).

    Raises:
        TrainingError: ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK`` or ``MASTER_PORT`` is not a whole number in its
            range, or ``RANK``, ``MASTER_ADDR`` or ``MASTER_PORT`` is missing where ``WORLD_SIZE`` is above 1.
    """
    world = _whole("WORLD_SIZE", 1, 1)
    if world == 1:
        return Launch()
    rank = _whole("RANK", None, 0, world - 1)
    local = _whole("LOCAL_RANK", 0, 0)
    if not os.environ.get("MASTER_ADDR", "").strip():
        raise TrainingError(f"WORLD_SIZE={world} in the environment makes this one of {world} processes, but "
                            f"MASTER_ADDR (where they meet) is not set; {_UNSET}")
    _whole("MASTER_PORT", None, 1, 65535)
    return Launch(rank, world, local)


def _whole(name: str, default: int | None, least: int, most: int | None = None) -> int:
    """The environment variable ``name`` as a whole number from ``least`` to ``most``; ``default`` where unset."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        if default is not None:
            return default
        raise TrainingError(f"WORLD_SIZE={os.environ['WORLD_SIZE'].strip()} in the environment makes this one of "
                            f"several processes, but {name} is not set; {_UNSET}")
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least or most is not None and value > most:
        bound = f"from {least} to {most}" if most is not None else f"of at least {least}"
        raise TrainingError(f"{name}={text!r} in the environment is not a whole number {bound}; torchrun sets it "
                            f"for each process it starts: {_UNSET}")
    return value


def meet(where: Launch):
    """A store that every process of the launch has reached (a collective wait), for ``init_process_group``.

    Under torchrun its agent hosts the store, otherwise rank 0 does, at ``MASTER_ADDR:MASTER_PORT``. Either way
    each process waits for the others in Python: the process group's own wait for a process that never comes
    (killed while it started) is in C, where torchrun's SIGTERM does not reach it for the 30 seconds torchrun
    gives before it kills.

    Raises:
        TrainingError: rank 0 cannot host the store there (the port is taken), or the other processes did not
            all come within :data:`PEERS_TIMEOUT` seconds.
    """
    import torch.distributed as dist

    host, port = os.environ["MASTER_ADDR"].strip(), int(os.environ["MASTER_PORT"])
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    deadline, said = time.monotonic() + PEERS_TIMEOUT, agent  # torchrun started them all: no word on a slow one
    if agent:
        store = dist.TCPStore(host, port, where.world, is_master=False, timeout=timedelta(seconds=PEERS_TIMEOUT))
    elif where.main:
        try:
            store = dist.TCPStore(host, port, where.world, is_master=True, wait_for_workers=False,
                                  timeout=timedelta(seconds=PEERS_TIMEOUT))
        except (RuntimeError, ValueError) as exc:
            raise TrainingError(f"process 0 of {where.world} cannot open the processes' meeting point at "
                                f"{host}:{port} (MASTER_ADDR, MASTER_PORT): {first_line(exc) or type(exc).__name__}; "
                                f"choose a free MASTER_PORT") from None
    else:
        while not _listening(host, port):  # process 0 may not have started yet; torch's client would retry in C
            said = _waiting(where, host, port, deadline, said)
        store = dist.TCPStore(host, port, where.world, is_master=False, timeout=timedelta(seconds=PEERS_TIMEOUT))
    arrived = f"vaezoo/arrived/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"  # torchrun's restarts
    store.add(arrived, 1)
    while store.add(arrived, 0) < where.world:
        said = _waiting(where, host, port, deadline, said)
    _MEETING[:] = [(store, where)]
    return store


_MEETING: list = []
"""The store of this process's meeting (:func:`meet`) and its place there, kept past the process group for
:func:`part`."""

PART_TIMEOUT = 60.0
"""Seconds process 0 keeps the meeting point for the others to part (:func:`part`)."""


def part() -> None:
    """Once this process's group is destroyed: say so at the meeting point, and on process 0, which hosts it when
    torchrun does not, keep it until every process has (at most :data:`PART_TIMEOUT` seconds).

    The store goes with process 0's process group: kept until every process has destroyed its own, none finds
    it gone while tearing its group down.
    """
    if not _MEETING:
        return
    [(store, where)] = _MEETING
    _MEETING.clear()
    parted = f"vaezoo/parted/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    store.add(parted, 1)
    deadline = time.monotonic() + PART_TIMEOUT
    while where.main and store.add(parted, 0) < where.world and time.monotonic() < deadline:
        time.sleep(0.05)


def _waiting(where: Launch, host: str, port: int, deadline: float, said: bool) -> bool:
    """Wait a moment longer for the other processes: say once, after :data:`SAY_AFTER` seconds, what for; give up
    at ``deadline``. Whether it was said."""
    now = time.monotonic()
    if now > deadline:
        raise TrainingError(f"process {where.rank} of {where.world} waited {PEERS_TIMEOUT / 60:g} minutes at "
                            f"{host}:{port} for the other processes, which did not all come; start them with the "
                            f"same MASTER_ADDR and MASTER_PORT, or {_UNSET}")
    if not said and now > deadline - PEERS_TIMEOUT + SAY_AFTER:
        note(f"process {where.rank} of {where.world} (RANK={where.rank}, WORLD_SIZE={where.world} in the "
             f"environment) waits at {host}:{port} for the other processes of this run; start them, or {_UNSET}")
        said = True
    time.sleep(0.2)
    return said


def _listening(host: str, port: int) -> bool:
    """Whether something listens at ``host:port`` (an address that does not resolve: not yet)."""
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True
