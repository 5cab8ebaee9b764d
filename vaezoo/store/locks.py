"""File locks that keep two vaezoo processes from losing each other's work.

Two kinds of writer share files: runs (``vaezoo train``, ``vaezoo convert``, ``vaezoo gallery``) write a
whole folder, and card updates (``eval --write``, ``seeds --write``) rewrite one card file. A run takes
its folder's lock with :func:`run_lock` and a second run into the same folder is refused at once, in one
line naming the holder. A card update reads, changes and writes the card under the card's lock
(:func:`card_lock`; :func:`vaezoo.entries.entry.update_card`), waiting for the other writer, so that both
updates land; a run published again holds it while it writes its weights and card.

A folder written to be uploaded whole (``save_pretrained``'s, ``push --out``'s) is written under :func:`folder_lock`,
whose file stands beside the folder.
The locks are ``filelock`` locks on hidden files beside what they guard (``DIR/.vaezoo.lock``,
``DIR/.NAME.toml.lock``, ``.DIR.lock``); the operating system frees them when their process ends, however it ends.

Within one process, :data:`GENERATORS` keeps two threads' seeded work from drawing on each other's streams.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vaezoo.errors import OutputError, VaezooError
from vaezoo.terminal import note, printable, shell_quote

RUN_LOCK = ".vaezoo.lock"
"""The lock file of a run folder."""
HOLDER_SUFFIX = ".holder"
"""Beside a lock file, the file naming its holder (the lock file itself is truncated by every try)."""
CARD_WAIT = 600.0
"""Seconds a card update waits for another process's update of the same card."""
NOTICE = 0.5
"""Seconds waited on a card's lock before saying so on stderr."""
HOLDER_LIMIT = 4096
"""The most bytes read of a holder note (its holder's description, with its command line, is one line)."""


def _holder(lock: Path) -> str:
    """Who holds ``lock``, as its holder wrote it; ``another process`` when that cannot be read."""
    from vaezoo.store.files import read_beside

    try:
        text = (read_beside(Path(f"{lock}{HOLDER_SUFFIX}"), HOLDER_LIMIT) or b"").decode("utf-8", "replace").strip()
    except (OSError, VaezooError):  # not a note vaezoo wrote: the holder is not known
        text = ""
    return printable(text) if text else "another process"


def _describe_self() -> str:
    command = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))
    return (f"process {os.getpid()} on {socket.gethostname()} ({command or 'python'}), since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}")


@contextmanager
def _held(lock: Path, guarded: Path, timeout: float, refused: Callable[[str], VaezooError],
          notice: str | None = None, unwritable: Callable[[OSError], Exception] | None = None) -> Iterator[None]:
    """Hold the file lock ``lock`` of ``guarded`` for the block, its holder file naming this process.

    Waits up to ``timeout`` seconds (0: not at all), saying ``notice`` on stderr after :data:`NOTICE` seconds;
    then raises ``refused(holder)``. When the lock file cannot be made, raises ``unwritable(error)``, or by
    default an error naming the lock file.
    """
    from filelock import FileLock, Timeout

    from vaezoo.store.files import check_beside, write_beside

    holder = Path(f"{lock}{HOLDER_SUFFIX}")
    check_beside(lock)  # a link, FIFO or device a tarball left there is refused before it is opened
    file_lock = FileLock(str(lock))
    try:
        try:
            file_lock.acquire(timeout=min(timeout, NOTICE) if notice else timeout)
        except Timeout:
            if not notice or timeout <= NOTICE:
                raise
            note(f"{notice} (held by {_holder(lock)})")
            file_lock.acquire(timeout=timeout - NOTICE)
    except Timeout:
        raise refused(_holder(lock)) from None
    except OSError as exc:
        if exc.errno == errno.EACCES and _read_only(lock):  # left so by a run under a umask such as 277
            raise OutputError(f"cannot lock {guarded}: its lock file {lock} is read-only; make it writable with "
                              f"'chmod u+w {shell_quote(str(lock))}' and run again") from None
        raise _unwritable(exc, guarded, f"its lock file {lock} cannot be created", unwritable) from None
    try:
        write_beside(holder, (_describe_self() + "\n").encode("utf-8", "backslashreplace"))  # argv: any bytes
    except OSError as exc:  # a full disk
        holder.unlink(missing_ok=True)
        file_lock.release()
        raise _unwritable(exc, guarded, f"its lock's holder file {holder} cannot be written", unwritable) from None
    except BaseException:
        file_lock.release()
        raise
    try:
        yield
    finally:
        # the folder may be gone, or a file in its place: the block's own error, if any, is the one to tell
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            holder.unlink()
        file_lock.release()


@contextmanager
def run_lock(folder: Path, what: str = "{out}") -> Iterator[None]:
    """Hold the lock of the run folder ``folder`` for the block; refuse at once if another process holds it.

    ``folder`` is created if missing. How ``vaezoo train`` uses it: take the lock of ``out`` before
    checking the folder (its ``_prepare_out``) and hold it until the run's card is written or the run stops,
    resumed runs included::

        with run_lock(out):
            _prepare_out(out, name, resume)
            ...  # train, checkpoint, write NAME.safetensors and NAME.toml

    A second ``vaezoo train`` into the same ``--out`` (or a second copy of a printed ``--resume`` command)
    then stops before reading anything, with one line naming the first. The lock is freed when the block
    ends or the process dies (SIGKILL included), so a killed run can be resumed at once.

    Args:
        folder: the run folder.
        what: how messages name the folder: ``"{out}"``, the argument ``out`` (see :class:`vaezoo.errors.Phrase`),
            or words (``"output path"``).

    Raises:
        VaezooError: another process holds the folder: ``out DIR is in use by process PID on HOST
            (COMMAND), since TIME; wait for it to finish, or choose another out``.
        OutputError: the lock file cannot be created there.
    """
    from vaezoo.store.files import folder_problem

    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError.about(f"cannot write in {what} {{folder}}: {{problem}}; choose another {what}",
                                folder=folder, problem=folder_problem(folder, exc)) from None
    try:
        with _held(folder / RUN_LOCK, folder, 0, lambda holder: VaezooError.about(
                f"{what} {{folder}} is in use by {{holder}}; wait for it to finish, or choose another {what}",
                folder=folder, holder=holder),
                unwritable=lambda exc: OutputError.about(
                    f"cannot write in {what} {{folder}}: {{problem}}; choose another {what}", folder=folder,
                    problem=folder_problem(folder, exc))):
            yield
    finally:
        _remove_if_unused(made, folder)


def _remove_if_unused(made: list[Path], folder: Path) -> None:
    """Remove the folders ``run_lock`` made (innermost first) if nothing but the lock file was written."""
    try:
        if made and os.listdir(folder) == [RUN_LOCK]:
            (folder / RUN_LOCK).unlink()
        for path in made:
            path.rmdir()
    except OSError:  # something was written there (or another run took the folder): it stays
        return


def refuse_finished_run(out: Path, name: str, what: str = "{out}") -> None:
    """Refuse ``out`` if it holds a run already: a card (``*.toml``), ``NAME.safetensors`` or a checkpoint.
    ``NAME.safetensors`` alone is named as what a run stopped between writing its weights and its card leaves.

    ``what`` names the folder in messages, as for :func:`run_lock`.

    Raises:
        OutputError: naming the files found.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError.about(f"{what} {{path}} is a file, not a folder; choose another {what}", path=out)
    found = sorted(p.name for p in out.glob("*.toml")) + [
        # checkpoint.pt: vaezoo.entries.checkpoints.CHECKPOINT
        f for f in (f"{name}.safetensors", "checkpoint.pt") if (out / f).exists()]
    if found == [f"{name}.safetensors"]:  # the weights are renamed into place just before their card
        raise OutputError.about(f"{what} {{path}} holds {{weights}} without its card {{card}} (a run stopped between "
                                f"writing the two, or another file of that name); remove that file, or choose "
                                f"another {what}", path=out, weights=found[0], card=f"{name}.toml")
    if found:
        raise OutputError.about(f"{what} {{path}} already holds {{found}}, the files of another run; choose "
                                f"another {what}", path=out, found=", ".join(found))


@contextmanager
def folder_lock(folder: Path, wait: float = CARD_WAIT) -> Iterator[None]:
    """Hold the lock of the model folder ``folder`` (``save_pretrained``'s, ``push --out``'s, ``new-plugin``'s
    package's) for the block, waiting up to ``wait`` seconds for another process writing it. Its lock file stands
    beside the folder (``.FOLDER.lock``, beside the real folder where a link names it), not in it: the folder is
    uploaded whole.

    Where no file can be made beside the folder (its parent is read-only, as a container's mounted volume's
    often is), the block runs without the lock.

    Raises:
        VaezooError: the other process still held it after ``wait`` seconds, naming it.
    """
    folder = Path(os.path.realpath(folder))  # one lock per real folder, however a link names it
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        try:
            if folder.name:  # the root folder has no folder beside it
                held.enter_context(_held(
                    folder_lock_file(folder), folder, wait, lambda holder: VaezooError(
                        f"folder {folder} was still being written by {holder} after {wait:g} s; try again "
                        f"when it is done"), notice=f"waiting for another vaezoo process writing {folder}",
                    unwritable=lambda exc: _NoRoom()))
        except _NoRoom:  # a read-only parent (a container's volume): the folder is written unguarded
            pass
        yield


def _read_only(lock: Path) -> bool:
    """Whether ``lock`` is a regular file its owner may not write (a lock file cannot be opened to lock it)."""
    try:
        mode = lock.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) and not mode & stat.S_IWUSR


def _unwritable(exc: OSError, guarded: Path, why: str, unwritable: Callable[[OSError], Exception] | None) -> Exception:
    """The error of a lock of ``guarded`` whose file cannot be made (``exc``; ``why`` says which file):
    ``unwritable``'s, or one naming the files and what to do."""
    from vaezoo.store.files import FULL, TOO_MANY_OPEN

    if exc.errno in TOO_MANY_OPEN:  # no folder's fault: any other would fail alike
        return OutputError(f"cannot lock {guarded}: {exc.strerror or exc} (this process may hold {_open_files_limit()} "
                           f"files open, and a training holds a lock file open for each run folder it writes, one per "
                           f"--seeds and --sweep run); raise the limit with 'ulimit -n', or open fewer files at once "
                           f"(train fewer runs together)")
    if unwritable is not None:
        return unwritable(exc)
    fix = "make room on its disk, then run again" if exc.errno in FULL else "choose a folder you can write in"
    return OutputError(f"cannot write {guarded}: {exc.strerror or exc} ({why}); {fix}")


def _open_files_limit() -> str:
    """How many files this process may hold open ('ulimit -n'), in words."""
    try:
        import resource
    except ImportError:  # Windows
        return "only so many"
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "any number of" if soft == resource.RLIM_INFINITY else f"{soft:,}"


def folder_lock_file(folder: Path) -> Path:
    """The lock file of the model folder ``folder`` (:func:`folder_lock`): ``.FOLDER.lock`` beside the real
    folder."""
    folder = Path(os.path.realpath(folder))
    return folder.with_name(f".{folder.name}.lock")


class _NoRoom(Exception):
    """No lock file can be made beside a folder."""


def card_lock_file(path: Path) -> Path:
    """The lock file of the card file ``path``: ``.NAME.toml.lock`` beside it."""
    return Path(path).with_name(f".{Path(path).name}.lock")


@contextmanager
def card_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the card file ``path`` for the block, waiting up to :data:`CARD_WAIT` seconds for
    another process's update of it (said on stderr after half a second).

    Raises:
        VaezooError: the other process still held it after :data:`CARD_WAIT` seconds, naming it.
    """
    path = Path(path)
    with _held(card_lock_file(path), path, CARD_WAIT, lambda holder: VaezooError(
            f"card {path} was still being updated by {holder} after {CARD_WAIT:g} s; try again when it is done"),
            notice=f"waiting for another vaezoo process updating {path}"):
        yield


class _SeededWork:
    """A re-entrant lock of the threads of one process (:data:`GENERATORS`) whose waiters say on stderr, the first
    time one waits longer than :data:`NOTICE` seconds, which thread holds it: a wait that never ends names what it
    waits for, and a thread waiting its turn metric after metric says so once."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._holder = ""
        self._told = threading.local()

    def __enter__(self) -> None:
        if not self._lock.acquire(timeout=NOTICE):
            if not getattr(self._told, "waited", False):
                self._told.waited = True
                note(f"waiting for thread {self._holder!r} to finish its seeded work (training, or measuring a "
                     f"metric): torch's global generators serve one thread at a time")
            self._lock.acquire()
        self._holder = threading.current_thread().name

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()


GENERATORS = _SeededWork()
"""Held by a training run and by an evaluation (each metric measured) for their whole length, so that they run one
at a time in a process. torch's global random generators belong to the process: such work seeds them, draws from
them and gives the caller's state back, and two threads doing so at once drew from each other's streams (an
evaluation of one card on 4 threads gave 12 values, none the one the card records; two seeded runs on 2 threads
trained apart from the same run alone). The threads one evaluation starts for itself, and worker processes, are
not held back; the thread that holds it may take it again (a run evaluates its model at its end). A thread an
evaluation starts that itself measures a metric or trains waits for that evaluation: if the evaluation waits for it,
neither ends (a thread cannot be told to be the evaluation's own rather than another's, which must wait); the
waiting thread says so on stderr."""
