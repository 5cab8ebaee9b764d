"""Writing files so that a crash never leaves one half-written."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vaezoo.errors import OutputError, Phrase
from vaezoo.signals import Interrupted, raise_if_stopped

FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the disk or the user's quota is full; a file size limit
TOO_MANY_OPEN = (errno.EMFILE, errno.ENFILE)  # the process's or the system's limit of open files: no file's fault


def atomic_save(path: Path, write: Callable[[Path], object], fix: str | Phrase = "choose another output path") -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, then rename it over ``path``.

    On any failure the temporary file is removed and ``path`` keeps its previous contents.

    Args:
        path: the file to write.
        write: writes the whole file at the path it is given.
        fix: what the error message tells the user to do when the folder refuses the file (a
            :class:`~vaezoo.errors.Phrase` when it names arguments of the call).

    Raises:
        OutputError: ``path`` is a folder, a FIFO, a socket or a device (which the rename would replace);
            ``path``'s folder cannot be created or written in (e.g. a file stands in its path, it is read-only),
            or its disk or quota is full or the file is over a size limit (``ENOSPC``/``EDQUOT``/``EFBIG``, also
            when raised inside ``write``, or behind the error a writer raised in its place).
    """
    commit([(stage(path, write, fix), Path(path))], fix)


def stage(path: Path, write: Callable[[Path], object], fix: str | Phrase = "choose another output path") -> Path:
    """The temporary file beside ``path`` that ``write`` filled, fsynced, with the permissions ``path`` will have:
    :func:`commit` puts it in place. On any failure it is removed; errors as :func:`atomic_save` raises them."""
    path = Path(path)
    check_target(path, fix)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError.about("cannot write {path}: {problem}; {fix}", path=path,
                                problem=folder_problem(path.parent, exc), fix=fix) from None
    os.close(fd)
    try:
        if _umask() & 0o200:  # writable by ``write``, which opens it by name, under a umask such as 277 (mkstemp: 0400)
            try:
                os.chmod(tmp, 0o600)
            except OSError as exc:
                raise OutputError.about("cannot write {path}: {problem}; {fix}", path=path,
                                        problem=folder_problem(path.parent, exc), fix=fix) from None
        try:
            write(Path(tmp))
        except Exception as exc:
            full = _full_disk(exc)
            if full is None:  # others are the writer's own (a network error, say): it reports them
                raise
            raise OutputError.about("cannot write {path}: {problem}; {fix}", path=path, problem=full.strerror,
                                    fix=fix) from None
        try:
            os.chmod(tmp, _mode_for(path))
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        except OSError as exc:
            raise OutputError.about("cannot write {path}: {problem}; {fix}", path=path,
                                    problem=folder_problem(path.parent, exc), fix=fix) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


@contextmanager
def named_in(folder: Path, staging: Path) -> Iterator[None]:
    """Name a file that cannot be written in the hidden ``staging`` folder (a full disk) at its place in ``folder``,
    where it was to go: the staging folder is gone by the time the error is read.

    Raises:
        OutputError: what the block raised, naming the path under ``folder``.
    """
    try:
        yield
    except OutputError as exc:
        path = exc.phrase.values.get("path") if exc.phrase is not None else None
        if path is None or not Path(path).is_relative_to(staging):
            raise
        raise OutputError.about(exc.phrase.template,
                                **{**exc.phrase.values, "path": folder / Path(path).relative_to(staging)}) from None


def check_target(path: Path, fix: str | Phrase = "choose another output path") -> None:
    """Refuse ``path`` as a file to write when a folder, a FIFO, a socket or a device stands there (which the rename
    of :func:`stage` would replace), a file stands where one of its folders belongs, or its name is longer than its
    folder takes with the temporary name :func:`stage` writes first: so that a command can say so before its work.

    Raises:
        OutputError: naming the path, what is wrong, and ``fix``.
    """
    path = Path(path)
    standing = _not_a_file(path)
    if standing:
        raise OutputError.about("cannot write {path}: it is {standing}, not a file; {fix}", path=path,
                                standing=standing, fix=fix)
    blocked = _in_the_way(path.parent)
    if blocked:
        raise OutputError.about("cannot write {path}: {blocked}; {fix}", path=path, blocked=blocked, fix=fix)
    folder = next((p for p in path.parents if p.is_dir()), None)
    longest = _name_max(folder) - len(TEMPORARY_AFFIXES)
    if len(os.fsencode(path.name)) > longest:
        raise OutputError.about("cannot write {path}: its name is {size} bytes, more than the {longest} a file name "
                                "may have there; {fix}", path=path, size=len(os.fsencode(path.name)),
                                longest=longest, fix=fix)


TEMPORARY_AFFIXES = ".." + "x" * 8 + ".tmp"
"""What :func:`stage`'s temporary file adds to the target's name (``.NAME.XXXXXXXX.tmp``)."""


def _name_max(folder: Path | None) -> int:
    """The longest file name, in bytes, that ``folder``'s file system takes (255 where it does not say)."""
    try:
        return os.pathconf(folder or ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _full_disk(exc: BaseException) -> OSError | None:
    """The full disk (:data:`FULL`) behind ``exc``: itself, or an error it was raised from or while handling (torch's
    zip writer replaces the ``OSError`` of a full disk with a ``RuntimeError`` of its own)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError) and exc.errno in FULL:
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def commit(staged: Sequence[tuple[Path, Path]], fix: str | Phrase = "choose another output path") -> None:
    """Rename each ``(temporary, target)`` of :func:`stage` over its target, in order and back to back, so that
    files that belong together (a card and its weights) change together but for that instant. An interruption
    (Ctrl-C) once they are ready lets the renames finish before it is raised; one that struck earlier and was
    swallowed (:func:`vaezoo.signals.raise_if_stopped`) is raised before any; on an error, the temporary files
    not renamed are removed."""
    try:
        raise_if_stopped()  # a stop signal that code swallowed: what it computed since is not written
    except Interrupted:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    moved = 0
    try:
        for tmp, target in staged:
            os.replace(tmp, target)
            moved += 1
    except OSError as exc:
        for tmp, _ in staged[moved:]:
            tmp.unlink(missing_ok=True)
        target = staged[moved][1]
        raise OutputError.about("cannot write {path}: {problem}; {fix}", path=target,
                                problem=folder_problem(target.parent, exc), fix=fix) from None
    except BaseException:
        for tmp, target in staged[moved:]:
            if os.path.lexists(tmp):  # renamed just before the interruption, or not yet
                os.replace(tmp, target)
        raise


FILE_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
              stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
"""What stands at a path that is no regular file or link, in words, by ``stat.S_IFMT`` of its mode."""


def file_state(info: os.stat_result) -> tuple[int, ...]:
    """What tells one state of a file from another (device, inode, size, modification and change times): a file
    rewritten, replaced or renamed over has another."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _not_a_file(path: Path) -> str | None:
    """What stands at ``path`` when it is neither a regular file nor a link (in words), else None."""
    try:
        return FILE_KINDS.get(stat.S_IFMT(os.lstat(path).st_mode))
    except OSError:
        return None


def folder_problem(folder: Path, exc: OSError) -> str:
    """Why ``folder`` could not hold a new file (``exc``): what stands in its path (:func:`_in_the_way`), or the
    system's reason, with the umask when it takes the owner's write permission (a folder vaezoo made is then one it
    cannot write in)."""
    reason = _in_the_way(folder) or exc.strerror or str(exc)
    mask = _umask()
    if exc.errno == errno.EACCES and mask & 0o200:
        return (f"{reason} (the umask {mask:03o} makes the files and folders vaezoo creates read-only to their owner; "
                f"set one such as 022 with 'umask 022')")
    return reason


def _in_the_way(folder: Path) -> str | None:
    """What stands where ``folder`` or a folder above it belongs, in words: a symbolic link to nothing (which mkdir
    calls 'File exists') or one of links that lead back to themselves, or a file; None when nothing does."""
    dangling = next((p for p in (folder, *folder.parents) if p.is_symlink() and not p.exists()), None)
    if dangling is not None:
        if _link_loop(dangling):
            return (f"{dangling} is a symbolic link to {os.readlink(dangling)}, and the links from there lead back "
                    f"in a loop")
        return f"{dangling} is a symbolic link to {os.readlink(dangling)}, which does not exist"
    blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
    return f"{blocker} is a file, not a folder" if blocker else None


def _link_loop(link: Path) -> bool:
    """Whether following the symbolic link ``link`` never ends (ELOOP): links that lead back to themselves."""
    try:
        os.stat(link)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _mode_for(path: Path) -> int:
    """The permissions the new file takes: those of the regular file it replaces (or that a link there names),
    else those open() would give (mkstemp makes 0600), so that a replaced file is no more and no less readable than
    it was. A link to a device gives nothing: /dev/null's 0666 would make the new file writable by everyone."""
    try:
        found = os.stat(path).st_mode
    except OSError:
        found = None
    return stat.S_IMODE(found) if found is not None and stat.S_ISREG(found) else 0o666 & ~_umask()


def new_folder_mode() -> int:
    """The permissions ``mkdir`` would give a new folder (``mkdtemp`` makes 0700): for a folder staged hidden and
    then moved into place."""
    return 0o777 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it where the system says it (Linux's ``/proc``): setting it to
    read it back would give a file another thread creates meanwhile the permissions of umask 0."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0)
        os.umask(mask)
        return mask


RANDOM = "[a-z0-9_]{8}"
"""The characters ``tempfile`` puts between a temporary file's prefix and suffix, as a regular expression."""


def remove_temporaries(*paths: Path) -> None:
    """Remove the temporary files that processes killed inside :func:`atomic_save` of ``paths`` left beside them,
    listing each folder once: a gallery of thousands of pictures would otherwise list its folder once per picture.

    Call it only where no other process can be writing ``paths`` (under the lock that guards them).
    """
    names: dict[Path, set[str]] = {}
    for path in map(Path, paths):
        names.setdefault(path.parent, set()).add(path.name)
    temporary = re.compile(r"\.(.+)\." + RANDOM + r"\.tmp", re.DOTALL)  # temporaries(folder, f".{name}.", ".tmp")
    for folder, targets in names.items():
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if (found := temporary.fullmatch(entry)) and found[1] in targets:
                stale = folder / entry
                if stale.is_file() and not stale.is_symlink():
                    stale.unlink(missing_ok=True)


def temporaries(folder: Path, prefix: str, suffix: str) -> list[Path]:
    """The entries of ``folder`` that ``tempfile.mkstemp``/``mkdtemp`` could have named with ``prefix`` and
    ``suffix`` (the prefix, eight of its random characters, the suffix), compared as text: a glob or regex character
    in a user's folder name matches only itself, so no other entry beside it is ever taken for one."""
    name = re.compile(re.escape(prefix) + RANDOM + re.escape(suffix))
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    return [Path(folder) / entry for entry in sorted(entries) if name.fullmatch(entry)]


SMALL_FILE = 1 << 20
"""The most bytes vaezoo reads of a small file it keeps beside a user's files (a lock's holder note, a record)."""


def read_beside(path: Path, limit: int = SMALL_FILE) -> bytes | None:
    """The bytes of a small file vaezoo keeps beside a user's files (a lock's holder note, the gallery's record, a
    staging manifest); None when there is none.

    The file is opened without following a link and without blocking, read only if it is a regular file, and read
    at most ``limit`` bytes: a link to the user's file, a FIFO that would never answer, a device or a huge file
    taken from a tarball or a clone is refused, not read.

    Raises:
        OutputError: one line naming the file, what it is and the fix (move it away).
    """
    try:
        fd = _open_beside(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):  # nothing there; a file in its folder's place: the writer names it
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        _check_kind(path, info)
        if info.st_size > limit:
            raise _not_ours(path, f"{info.st_size:,} bytes, more than the {limit:,} vaezoo writes there")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise _not_ours(path, f"more than the {limit:,} bytes vaezoo writes there")
    return data


def write_beside(path: Path, data: bytes) -> None:
    """Write ``data`` into the small file ``path`` vaezoo keeps beside a user's files (see :func:`read_beside`), in
    place: created if missing, opened without following a link and without blocking, and truncated only once it is
    known to be a regular file with no other name (a hard link to the user's file is refused too).

    Raises:
        OutputError: ``path`` is a link, a FIFO, a device, a folder or a file with other names; or it cannot be
            written.
    """
    try:
        fd = _open_beside(path, os.O_WRONLY | os.O_CREAT)
    except (FileNotFoundError, NotADirectoryError) as exc:  # no folder to create it in
        raise _not_ours(path, _open_problem(path, exc)) from None
    with os.fdopen(fd, "wb") as f:
        info = os.fstat(fd)
        _check_kind(path, info)
        if info.st_nlink > 1:
            raise _not_ours(path, f"a file with {info.st_nlink} names (hard links)")
        os.ftruncate(fd, 0)
        f.write(data)


def _open_beside(path: Path, flags: int) -> int:
    """``os.open`` of a file beside a user's, never following a link nor blocking on a FIFO.

    Raises:
        FileNotFoundError, NotADirectoryError: nothing is there (the caller says what that means).
        OSError: the path is too long, or the process or the system has as many files open as it may (the system's
            own words name it).
        OutputError: something other than a file vaezoo may open stands there.
    """
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG or exc.errno in TOO_MANY_OPEN:
            raise
        raise _unreachable_folder(path) or _not_ours(path, _open_problem(path, exc)) from None


def _unreachable_folder(path: Path) -> OutputError | None:
    """The error naming the folder of ``path`` where that folder itself cannot be reached (a loop of symbolic links,
    a folder that may not be searched), so that the file is not blamed; None where the folder can be."""
    folder = Path(path).parent
    try:
        os.stat(folder)
    except OSError as exc:
        return OutputError.about("cannot use the folder {folder}: {problem}; choose another folder", folder=folder,
                                 problem=exc.strerror or str(exc))
    return None


def check_beside(path: Path) -> None:
    """Refuse ``path``, a file vaezoo keeps beside a user's files, when something other than a regular file with one
    name stands there (see :func:`read_beside`); a missing file passes.

    Raises:
        OutputError: as :func:`write_beside` raises it.
    """
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise
        raise _unreachable_folder(path) or _not_ours(path, exc.strerror or str(exc)) from None
    if stat.S_ISLNK(info.st_mode):
        raise _not_ours(path, "a symbolic link")
    _check_kind(path, info)
    if info.st_nlink > 1:
        raise _not_ours(path, f"a file with {info.st_nlink} names (hard links)")


def _open_problem(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be opened without following links, in words."""
    if os.path.islink(path):
        return "a symbolic link"
    kind = _not_a_file(Path(path))
    return kind or exc.strerror or str(exc)


def _check_kind(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise _not_ours(path, FILE_KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file"))


def _not_ours(path: Path, what: str) -> OutputError:
    return OutputError.about("{path} is {what}, not a file vaezoo wrote; move it away and try again", path=path,
                             what=what)


def atomic_write(path: Path, data: bytes, fix: str | Phrase = "choose another output path") -> None:
    """Write ``data`` to ``path`` atomically; errors as :func:`atomic_save` raises them, ending with ``fix``."""
    atomic_save(path, lambda tmp: tmp.write_bytes(data), fix)


RECORD_LIMIT = 16 << 20
"""The most bytes of a :class:`WrittenRecord` read, and of a file it names (a zoo of 10,000 cards needs about 3 MB)."""


@dataclass(frozen=True)
class WrittenRecord:
    """The hidden record a command keeps in its output folder of the files it wrote there, ``{"files": {NAME:
    [SHA256, ...]}}``, each with the sha256 of what it held, so that the next run removes those it no longer writes
    (:meth:`remove_stale`): only those, and only while they hold what was written. Read and write it under the
    folder's run lock (:func:`vaezoo.store.locks.run_lock`).

    Attributes:
        file: the record's name in the folder (``.vaezoo-gallery.json``).
        writer: the command, as messages name it (``vaezoo gallery``).
        names: the names of the files the command writes: nothing else a record names is ever removed (not a page,
            not the record, not a user's file).
        kind: whether a file's name and bytes are of a kind the command writes (a PNG, an SVG with its mark).
    """

    file: str
    writer: str
    names: re.Pattern[str]
    kind: Callable[[str, bytes], bool]

    def owns(self, name: object) -> bool:
        """Whether ``name`` is one the command gives a file it writes (:attr:`names`)."""
        return isinstance(name, str) and self.names.fullmatch(name) is not None

    def read(self, directory: Path) -> dict[str, list[str]]:
        """The files the record in ``directory`` names, each with the sha256 of what it held: only names the command
        writes (:meth:`owns`); empty without a record, or with one that does not parse (then nothing is removed).

        Raises:
            OutputError: the record is a link, a FIFO, a device, over :data:`RECORD_LIMIT` bytes or nested deeper
                than a record is (read with :func:`read_beside`), in one line.
        """
        from vaezoo.store.limits import load_json

        path = Path(directory) / self.file
        data = read_beside(path, RECORD_LIMIT)
        if data is None:
            return {}
        try:
            files = load_json(data.decode("utf-8"), limit=3)["files"]
        except UnicodeDecodeError:
            return {}
        except ValueError as exc:
            if "nests deeper" not in str(exc):
                return {}
            raise OutputError.about("{path} is not a record {writer} wrote ({problem}); move it away and try "
                                    "again", path=path, writer=self.writer, problem=exc) from None
        except (LookupError, TypeError):
            return {}
        if not isinstance(files, dict):
            return {}
        return {name: [str(digest) for digest in digests] for name, digests in files.items()
                if self.owns(name) and isinstance(digests, list)}

    def write(self, directory: Path, files: dict[str, list[str]]) -> None:
        """Make the record in ``directory`` name ``files`` (each name with the digests of what it may hold)."""
        atomic_write(Path(directory) / self.file,
                     (json.dumps({"files": files}, indent=1, sort_keys=True) + "\n").encode())

    def remove_stale(self, directory: Path, stale: dict[str, list[str]]) -> dict[str, list[str]]:
        """Remove each file of ``stale`` (written earlier, not written again) from ``directory`` while it is what was
        written: a name the command writes, a regular file with no other name, of the command's :attr:`kind`, holding
        bytes the record gives. One replaced since (the user's own) stays. Returns those that could not be removed,
        for the next run to try again."""
        left = {}
        for name, digests in stale.items():
            target = Path(directory) / name
            try:
                if self.owns(name) and self.made_here(target, digests):
                    target.unlink()
            except OSError:
                left[name] = digests
        return left

    def made_here(self, path: Path, digests: list[str]) -> bool:
        """Whether ``path`` holds a file the command wrote, as its record gives it (one of ``digests``)."""
        try:
            data = read_beside(path, RECORD_LIMIT)
        except OutputError:  # a link, a FIFO, a huge file: not the command's
            return False
        if data is None or hashlib.sha256(data).hexdigest() not in digests or os.stat(path).st_nlink > 1:
            return False
        return self.kind(path.name, data)
