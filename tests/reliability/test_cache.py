"""The weights cache (``VAEZOO_HOME``) when it cannot be written: one line naming the path and the fix, nothing lost.

The tests run as root, whom permission bits do not stop, so a read-only, unwritable or full disk is made by
:func:`kit.refuse_writes` and :func:`kit.fill_disk`: the system calls under the cache fail with the
errno such a disk gives.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from kit import assert_one_line_error, cli, files_under, fill_disk, make_card, refuse_writes, serve_entry

import vaezoo
from vaezoo.errors import WeightsError
from vaezoo.store.downloads import cache_dir

WEIGHTS_PATH = "/tiny.safetensors"
WRITABLE = "set VAEZOO_HOME to a folder you can write to"


@pytest.fixture
def url_card(cards_dir, data_plugin, server):
    """A tiny card whose weights only ``server`` has; returns the served bytes."""
    serve_entry(server, WEIGHTS_PATH, cards_dir, make_card("tiny"), stem="tiny")
    return server.files[WEIGHTS_PATH]


@pytest.fixture
def target(url_card):
    """Where the cache keeps the tiny card's weights."""
    from vaezoo.entries.catalog import get_card

    return cache_dir() / f"{get_card('tiny-blobs').weights.sha256}.safetensors"


def _refused(capsys, message: str) -> None:
    """vaezoo.load raises exactly ``message``; ``vaezoo eval`` prints it as its one error line."""
    with pytest.raises(WeightsError) as err:
        vaezoo.load("tiny-blobs")
    assert str(err.value) == message
    code, out, stderr = cli(capsys, "eval", "tiny-blobs")
    assert code == 1 and out == ""
    assert assert_one_line_error(stderr) == f"error: {message}"


@pytest.mark.parametrize("file_at", ["VAEZOO_HOME", "VAEZOO_HOME/weights"])
def test_a_file_where_the_cache_folder_belongs(url_card, server, monkeypatch, tmp_path, capsys, file_at):
    monkeypatch.setenv("VAEZOO_HOME", str(tmp_path / "home"))
    blocker = tmp_path / "home" if file_at == "VAEZOO_HOME" else cache_dir()
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_bytes(b"not a folder")
    _refused(capsys, f"cannot create the weights cache {cache_dir()}: {blocker} is a file, not a folder; {WRITABLE}")
    assert blocker.read_bytes() == b"not a folder"
    assert server.gets == {}


@pytest.mark.parametrize("error", [errno.EROFS, errno.EACCES], ids=errno.errorcode.get)
def test_read_only_or_unwritable_home(url_card, server, monkeypatch, capsys, error):
    home = cache_dir().parent
    home.mkdir(parents=True, exist_ok=True)
    refuse_writes(monkeypatch, home, error)
    _refused(capsys, f"cannot create the weights cache {cache_dir()}: {os.strerror(error)}; {WRITABLE}")
    assert server.gets == {}


@pytest.mark.parametrize("error", [errno.EROFS, errno.EACCES], ids=errno.errorcode.get)
def test_read_only_or_unwritable_empty_cache(url_card, server, monkeypatch, capsys, target, error):
    cache_dir().mkdir(parents=True)
    refuse_writes(monkeypatch, cache_dir(), error)
    _refused(capsys, f"cannot create the lock file {target}.lock in the weights cache: {os.strerror(error)}; "
                     f"{WRITABLE}")
    assert server.gets == {}
    assert list(cache_dir().iterdir()) == []


def test_out_of_inodes(url_card, server, monkeypatch, capsys, target):
    """No file can be created (ENOSPC from open with O_CREAT), though the folder exists."""
    cache_dir().mkdir(parents=True)
    refuse_writes(monkeypatch, cache_dir(), errno.ENOSPC)
    _refused(capsys, f"cannot create the lock file {target}.lock in the weights cache: "
                     f"{os.strerror(errno.ENOSPC)}; free some space or {WRITABLE}")
    assert server.gets == {}


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EDQUOT], ids=errno.errorcode.get)
def test_disk_or_quota_full_while_downloading(url_card, server, monkeypatch, capsys, target, error):
    """The disk fills after 1000 bytes of the file: refused at once (not retried), no temporary file left."""
    fill_disk(monkeypatch, cache_dir(), error, room=1000)
    message = f"cannot write {target}: {os.strerror(error)}; free some space or {WRITABLE}"
    _refused(capsys, message)
    assert server.gets == {WEIGHTS_PATH: 2}  # one GET for vaezoo.load, one for vaezoo eval
    assert files_under(cache_dir()) == []


def test_a_folder_where_the_cache_file_belongs(url_card, server, capsys, target):
    (target / "keep").mkdir(parents=True)
    _refused(capsys, f"{target} is a folder where the weights cache keeps a file; remove that folder")
    assert (target / "keep").is_dir()
    assert server.gets == {}


def test_a_folder_where_the_lock_file_belongs(url_card, server, capsys, target):
    lock = target.with_name(target.name + ".lock")
    (lock / "keep").mkdir(parents=True)
    _refused(capsys, f"{lock} is a folder where the weights cache keeps a lock file; remove that folder")
    assert (lock / "keep").is_dir()
    assert server.gets == {}


@pytest.mark.parametrize("offline", [False, True])
def test_read_only_cache_serves_what_it_holds(url_card, server, monkeypatch, target, offline):
    vaezoo.load("tiny-blobs")
    for lock in cache_dir().glob("*.lock"):  # a read-only copy of a cache need not hold them
        lock.unlink()
    refuse_writes(monkeypatch, cache_dir().parent, errno.EROFS)
    if offline:
        monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    model = vaezoo.load("tiny-blobs")
    assert model.card.name == "tiny-blobs"
    assert server.gets == {WEIGHTS_PATH: 1}
    assert sorted(p.name for p in cache_dir().iterdir()) == [target.name]
    assert target.read_bytes() == url_card


def test_read_only_cache_holding_a_damaged_file(url_card, server, monkeypatch, capsys, target):
    """It cannot be fetched again, and it is not removed: one line, the file left as it was."""
    vaezoo.load("tiny-blobs")
    damaged = url_card[:-1] + bytes([url_card[-1] ^ 1])
    target.write_bytes(damaged)
    refuse_writes(monkeypatch, cache_dir().parent, errno.EROFS)
    _refused(capsys, f"the cached copy {target} of {server.url(WEIGHTS_PATH)} does not match the card (damaged, "
                     f"or another file), and the cache cannot replace it (its lock file {target}.lock cannot be "
                     f"created: {os.strerror(errno.EROFS)}); remove that file, or {WRITABLE}")
    assert target.read_bytes() == damaged
    assert server.gets == {WEIGHTS_PATH: 1}


def _refuse_reading(monkeypatch, path: Path, where: str) -> None:
    """Make ``path`` unreadable to this user as another user's umask 077 makes it (root reads any mode): opening
    the file fails with EACCES (``where`` "file"), or, where its folder may not be entered ("folder"), so does
    looking it up."""
    real_open, real_stat = os.open, os.stat

    def refused(name) -> bool:
        return os.path.abspath(name) == str(path)

    def fail(name):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(name))

    def open_(name, flags, mode=0o777, *, dir_fd=None):
        if refused(name):
            fail(name)
        return real_open(name, flags, mode, dir_fd=dir_fd)

    def stat_(name, *, dir_fd=None, follow_symlinks=True):
        if refused(name):
            fail(name)
        return real_stat(name, dir_fd=dir_fd, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(os, "open", open_)
    if where == "folder":
        monkeypatch.setattr(os, "stat", stat_)


@pytest.mark.parametrize("where,offline", [("file", False), ("file", True), ("folder", False)])
def test_a_cached_copy_this_user_may_not_read_is_named_and_kept(url_card, server, monkeypatch, capsys, target,
                                                                 where, offline):
    """A cache shared by two users, the file written by one whose umask (077) keeps it to them: the other is told
    so, and the file, which is not damaged, stays (it was taken for a damaged one, and, where the lock could be
    taken, refused as a file of the card's sha256 but of another size)."""
    vaezoo.load("tiny-blobs")
    before = os.lstat(target)
    _refuse_reading(monkeypatch, target, where)
    if offline:
        monkeypatch.setenv("VAEZOO_OFFLINE", "1")
    _refused(capsys, f"the cached copy {target} of {server.url(WEIGHTS_PATH)} cannot be read (Permission denied: "
                     f"another user's umask, such as 077, may keep it to its owner); ask its owner to share it "
                     f"('chmod -R a+rX {cache_dir()}'), or {WRITABLE}")
    assert target.read_bytes() == url_card and os.lstat(target).st_ino == before.st_ino
    assert server.gets == {WEIGHTS_PATH: 1}
