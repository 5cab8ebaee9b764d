"""Files vaezoo keeps beside a user's files (lock files and their holder notes, the gallery's record, staging
folders), as a tarball or a clone may leave them: links to the user's files, FIFOs, huge or deeply nested ones.
Each is opened without following links, only if it is a regular file, and read within a size and depth bound
(``vaezoo.store.files.read_beside``/``write_beside``); anything else is one line. And vaezoo deletes only what it
can prove it made."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from kit import assert_one_line_error, cli, make_card, write_card, write_entry

from vaezoo.entries.catalog import parse_card
from vaezoo.errors import OutputError, VaezooError
from vaezoo.extras import gallery
from vaezoo.store import files, locks
from vaezoo.store.files import SMALL_FILE, atomic_save, read_beside, temporaries, write_beside

PRECIOUS = b"the user's own file\n"


@contextmanager
def deadline(seconds: float = 10):
    """Fail instead of hanging: a FIFO opened for reading blocks until a writer comes."""
    def stop(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _plant(path: Path, kind: str, user_file: Path) -> None:
    """Put at ``path`` what a hostile tarball holds there: a link to ``user_file``, a FIFO, or a hard link."""
    user_file.write_bytes(PRECIOUS)
    if kind == "symlink":
        path.symlink_to(user_file)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        os.link(user_file, path)


KINDS = ["symlink", "fifo", "hardlink"]
SAID = {"symlink": "is a symbolic link", "fifo": "is a FIFO", "hardlink": "is a file with 2 names (hard links)"}


# --- the helper ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_write_beside_never_writes_through_what_stands_there(tmp_path, kind):
    note = tmp_path / "note"
    _plant(note, kind, tmp_path / "mine.txt")
    with deadline(), pytest.raises(OutputError) as err:
        write_beside(note, b"process 1 on host\n")
    assert str(err.value) == f"{note} {SAID[kind]}, not a file vaezoo wrote; move it away and try again"
    assert (tmp_path / "mine.txt").read_bytes() == PRECIOUS


def test_read_beside_refuses_links_fifos_devices_and_huge_files_unread(tmp_path):
    (tmp_path / "mine.txt").write_bytes(PRECIOUS)
    (tmp_path / "link").symlink_to(tmp_path / "mine.txt")
    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    with open(tmp_path / "huge", "wb") as f:
        f.truncate(10**9)  # sparse: a gigabyte that costs nothing on disk
    said = {"link": "is a symbolic link", "zero": "is a symbolic link", "fifo": "is a FIFO",
            "huge": f"is 1,000,000,000 bytes, more than the {SMALL_FILE:,} vaezoo writes there"}
    for name, what in said.items():
        with deadline(), pytest.raises(OutputError, match=what):
            read_beside(tmp_path / name)
    assert read_beside(tmp_path / "missing") is None and read_beside(tmp_path / "mine.txt") == PRECIOUS


# --- lock files and their holder notes ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", ["run", "card"])
def test_a_planted_holder_note_is_refused_and_the_user_file_kept(tmp_path, kind, which):
    """``train --out``, ``gallery`` (run_lock) and ``eval --write``, ``seeds --write`` (card_lock) wrote
    "process PID on HOST" through a link, and hung on a FIFO while holding the card's lock."""
    folder = tmp_path / "run"
    folder.mkdir()
    card = write_card(folder, make_card("tiny", name="tiny"))
    lock = folder / locks.RUN_LOCK if which == "run" else locks.card_lock_file(card)
    note = Path(f"{lock}{locks.HOLDER_SUFFIX}")
    _plant(note, kind, tmp_path / "mine.txt")
    def held():
        return locks.run_lock(folder) if which == "run" else locks.card_lock(card)

    with deadline(), pytest.raises(OutputError) as err:
        with held():
            pytest.fail("took a lock whose holder note is not vaezoo's")
    assert str(err.value) == f"{note} {SAID[kind]}, not a file vaezoo wrote; move it away and try again"
    assert (tmp_path / "mine.txt").read_bytes() == PRECIOUS and os.path.lexists(note)
    note.unlink()
    with held():
        assert note.read_text().startswith(f"process {os.getpid()} on ")  # a regular note: written as before


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_planted_lock_file_is_refused(tmp_path, kind):
    folder = tmp_path / "run"
    folder.mkdir()
    _plant(folder / locks.RUN_LOCK, kind, tmp_path / "mine.txt")
    with deadline(), pytest.raises(OutputError, match=f"{locks.RUN_LOCK} {SAID[kind]}, not a file vaezoo wrote"):
        with locks.run_lock(folder):
            pytest.fail("took a lock file that is not vaezoo's")
    assert (tmp_path / "mine.txt").read_bytes() == PRECIOUS


HOLD = """
import os, sys, time
from pathlib import Path
from vaezoo.store.locks import HOLDER_SUFFIX, RUN_LOCK, run_lock
with run_lock(Path(sys.argv[1])):
    note = Path(sys.argv[1]) / f"{RUN_LOCK}{HOLDER_SUFFIX}"
    note.unlink()
    os.mkfifo(note)
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_fifo_holder_note_of_a_held_lock_names_another_process_without_hanging(tmp_path):
    folder = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        with deadline(), pytest.raises(VaezooError, match="is in use by another process; wait for it"):
            with locks.run_lock(folder):
                pytest.fail("entered a folder another process holds")
    finally:
        process.kill()
        process.wait()


@pytest.mark.slow
def test_eval_write_and_train_out_refuse_a_linked_holder_note_in_one_line(tmp_path, capsys, data_plugin):
    card, _, _ = write_entry(tmp_path / "cards", make_card("tiny", name="tiny"))
    _plant(locks.card_lock_file(card).with_name(f"{locks.card_lock_file(card).name}{locks.HOLDER_SUFFIX}"),
           "symlink", tmp_path / "mine.txt")
    before = card.read_bytes()
    code, out, err = cli(capsys, "eval", str(card), "--metrics", "elbo", "--write")
    assert code == 1 and card.read_bytes() == before
    assert_one_line_error(err, "is a symbolic link, not a file vaezoo wrote; move it away")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    _plant(out_dir / f"{locks.RUN_LOCK}{locks.HOLDER_SUFFIX}", "fifo", tmp_path / "mine.txt")
    with deadline(60):
        code, out, err = cli(capsys, "train", str(card), "--out", str(out_dir), "--max-steps", "1")
    assert code == 1 and (tmp_path / "mine.txt").read_bytes() == PRECIOUS
    assert_one_line_error(err, "is a FIFO, not a file vaezoo wrote; move it away")


# --- the gallery's record ------------------------------------------------------------------------------------------

@pytest.fixture
def zoo(cards, data_plugin, monkeypatch) -> Path:
    """The test's cards only (one tiny entry: a gallery of no card is refused), with the extras' commands (gallery,
    push) and the kit's datasets."""
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core,extras,testdata")
    write_entry(cards, make_card("tiny"))
    return cards


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "pages"
    site.mkdir()
    return site


@pytest.mark.parametrize("kind", ["symlink", "fifo", "huge", "deep"])
def test_a_hostile_gallery_record_is_one_line_with_bounded_memory(tmp_path, capsys, zoo, kind):
    """A 1 GB record used 2.5 GB of memory; a deeply nested one ended in a RecursionError traceback; a FIFO hung."""
    site = _site(tmp_path)
    record = site / gallery.RECORD
    if kind == "huge":
        with open(record, "wb") as f:
            f.truncate(10**9)
    elif kind == "deep":
        record.write_text('{"files": ' + "[" * 100_000 + "]" * 100_000 + "}")
    else:
        _plant(record, kind, tmp_path / "mine.txt")
    with deadline(30):
        code, out, err = cli(capsys, "gallery", str(site), "--no-data")
    assert code == 1 and "Traceback" not in err and "RecursionError" not in err
    said = {"symlink": "is a symbolic link, not a file vaezoo wrote", "fifo": "is a FIFO, not a file vaezoo wrote",
            "huge": "is 1,000,000,000 bytes, more than the", "deep": "is not a record vaezoo gallery wrote"}[kind]
    assert_one_line_error(err, str(record), said, "move it away")
    assert not (site / "index.html").exists()
    if kind in ("symlink", "fifo"):
        assert (tmp_path / "mine.txt").read_bytes() == PRECIOUS


# --- deleting only what vaezoo made --------------------------------------------------------------------------------

def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def test_the_gallery_removes_no_file_its_record_names_unless_a_gallery_draws_such_a_file(tmp_path, zoo):
    """A record (taken from a tarball) naming ``notes.txt``, ``index.html`` and a user's PNG-named text file with
    their sha256: the gallery removed them all and exited 0 with no page."""
    site = _site(tmp_path)
    mine = {"notes.txt": b"", "index.html": b"", "README": b"mine", "x.sample.png": b"not a png",
            ".vaezoo-gallery.json.bak": b"{}"}
    for name, data in mine.items():
        (site / name).write_bytes(data)
    (site / gallery.RECORD).write_text(json.dumps({"files": {n: [_digest(d)] for n, d in mine.items()}}))
    (site / "index.html").write_text(f'<meta name="generator" content="{gallery.GENERATOR} 0">')
    page = (site / "index.html").read_bytes()
    mine["index.html"] = page
    (site / gallery.RECORD).write_text(json.dumps({"files": {n: [_digest(d)] for n, d in mine.items()}}))
    assert gallery.build_gallery(site, use_data=False) == site / "index.html"
    assert (site / "index.html").read_bytes() != page  # the new page: it was not removed after being written
    for name, data in mine.items():
        if name != "index.html":
            assert (site / name).read_bytes() == data, name


def test_the_gallery_removes_its_own_stale_pictures_only_while_they_are_its_own(tmp_path, zoo):
    site = _site(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + b"drawn"
    (site / "gone.sample.png").write_bytes(png)
    (site / "kept.sample.png").write_bytes(png)
    os.link(site / "kept.sample.png", tmp_path / "users-name-for-it.png")  # another name: not only the gallery's
    (site / gallery.RECORD).write_text(json.dumps({"files": {n: [_digest(png)] for n in
                                                             ("gone.sample.png", "kept.sample.png")}}))
    gallery.build_gallery(site, use_data=False)
    assert not (site / "gone.sample.png").exists() and (tmp_path / "users-name-for-it.png").read_bytes() == png


def test_temporaries_match_only_names_tempfile_gives(tmp_path):
    for name in (".out*.abcdefgh.tmp", ".out-mine.keep.tmp", ".outx.abcdefgh.tmp", ".out*.abc.tmp"):
        (tmp_path / name).mkdir()
    assert [p.name for p in temporaries(tmp_path, ".out*.", ".tmp")] == [".out*.abcdefgh.tmp"]


def test_push_dry_run_out_with_glob_characters_removes_nothing_beside_it(tmp_path, capsys, zoo):
    """``--out 'a*'`` cleaned up with the pattern ``.a*.*.tmp`` and removed the user's ``.abc.keep.tmp``."""
    pytest.importorskip("huggingface_hub")
    card, _, _ = write_entry(zoo, make_card("tiny", name="tiny"))
    for pattern in ("a*", "b[xy]", "c?"):
        beside = {"a*": ".abc.keep.tmp", "b[xy]": ".bx.keep1234.tmp", "c?": ".cd.12345678.tmp"}[pattern]
        (tmp_path / beside).mkdir()
        (tmp_path / beside / "mine.txt").write_bytes(PRECIOUS)
        code, out, err = cli(capsys, "push", str(card), "owner/tiny", "--dry-run", "--out", str(tmp_path / pattern))
        assert code == 0, err
        assert (tmp_path / beside / "mine.txt").read_bytes() == PRECIOUS
        assert (tmp_path / pattern / "tiny.toml").is_file() and parse_card(tmp_path / pattern / "tiny.toml")


def test_a_file_written_over_a_link_to_a_device_takes_a_new_files_permissions(tmp_path):
    # `vaezoo show -o out.png` where out.png linked to /dev/null made a PNG that everyone could write (0666)
    (tmp_path / "out.png").symlink_to("/dev/null")
    (tmp_path / "kept.png").write_bytes(b"old")
    (tmp_path / "kept.png").chmod(0o640)
    mask = os.umask(0o022)
    try:
        for name in ("out.png", "kept.png"):
            atomic_save(tmp_path / name, lambda tmp: tmp.write_bytes(b"new"))
    finally:
        os.umask(mask)
    assert (tmp_path / "out.png").read_bytes() == b"new" and not (tmp_path / "out.png").is_symlink()
    assert oct((tmp_path / "out.png").stat().st_mode & 0o777) == oct(0o644)
    assert oct((tmp_path / "kept.png").stat().st_mode & 0o777) == oct(0o640)  # a regular file keeps its own


def test_a_file_is_written_under_a_umask_that_takes_the_owners_write_permission(tmp_path):
    """Under umask 277 mkstemp made the temporary file 0400, and the writer, which opens it by name, was refused
    (vaezoo train: 'Permission denied: OUT/.checkpoint.pt.XXXX.tmp'; the tests run as root, which the mode does not
    stop, so the writer checks it)."""
    def write(tmp: Path) -> None:
        assert tmp.stat().st_mode & 0o200, oct(tmp.stat().st_mode)
        tmp.write_bytes(b"data")

    mask = os.umask(0o277)
    try:
        atomic_save(tmp_path / "out.bin", write)
    finally:
        os.umask(mask)
    assert (tmp_path / "out.bin").read_bytes() == b"data"
    assert oct((tmp_path / "out.bin").stat().st_mode & 0o777) == oct(0o400)  # the umask's mode, once written


def test_a_file_system_that_refuses_to_change_a_files_mode_under_such_a_umask_is_one_line(tmp_path, monkeypatch):
    """A mount that takes no chmod (a vfat or CIFS folder, say) refused the temporary file's 0600 with the raw
    PermissionError naming the hidden file; it is the output's error, naming the file to be written, and nothing
    is left beside it."""
    def refuse(path, mode):
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(os, "chmod", refuse)
    mask = os.umask(0o277)
    try:
        with pytest.raises(OutputError) as caught:
            atomic_save(tmp_path / "out.bin", lambda tmp: tmp.write_bytes(b"data"))
    finally:
        os.umask(mask)
    message = str(caught.value)
    assert "\n" not in message and f"cannot write {tmp_path / 'out.bin'}: Operation not permitted" in message
    assert list(tmp_path.iterdir()) == []


def test_the_umask_is_read_without_being_set(monkeypatch):
    """Setting the umask to 0 to read it back gave a file another thread created meanwhile umask 0's permissions;
    where the system says the umask, it is read from there."""
    mask = os.umask(0o027)
    try:
        set_to = []
        monkeypatch.setattr(os, "umask", lambda value: set_to.append(value) or 0o027)
        assert files._umask() == 0o027
        assert set_to == []
    finally:
        monkeypatch.undo()
        os.umask(mask)
