"""A zoo entry on disk: a card and the safetensors file it names. Writing one, finding its weights, verifying them.

An entry's folder holds ``NAME.toml`` and, beside it, ``NAME.safetensors``, or the card names its weights at a URL
and they are downloaded into the cache (:func:`vaezoo.store.downloads.cached_path`). Every writer of an entry (a run's
publication, a conversion, a Hub folder, ``save_pretrained``) goes through :func:`write_entry`; every reader of
one finds its weights through :func:`weights_file` or :func:`fetch_verified`.
"""

from __future__ import annotations

import os
import stat
import sysconfig
import tempfile
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.entries.catalog import (card_from_text, card_reference, check_card, checked_toml, differences,
                                    no_card_found, parse_card, read_card, read_cards, scan)
from vaezoo.entries.recipe import RECORDS, canonical, recipe
from vaezoo.entries.schema import Card, Weights
from vaezoo.errors import CardError, Phrase, VaezooError, WeightsError
from vaezoo.signals import Interrupted, StopSignals
from vaezoo.store.checksums import read_verified, sha256_of, verify
from vaezoo.store.downloads import cached_path, download
from vaezoo.store.files import (atomic_write, check_beside, commit, file_state, folder_problem, stage,
                                temporaries)
from vaezoo.store.locks import HOLDER_SUFFIX, card_lock, card_lock_file, folder_lock, folder_lock_file
from vaezoo.store.weights import parse_safetensors, safetensors_writer
from vaezoo.terminal import shell_join

if TYPE_CHECKING:
    import torch


def write_card(card: Card, path: Path) -> None:
    """Write ``card`` as TOML to ``path`` atomically."""
    atomic_write(path, checked_toml(card).encode())


def update_card(path: Path, change: Callable[[Card], Card]) -> Card:
    """Read the card at ``path``, apply ``change`` and write the result, all under the card's lock.

    The card is read again inside the lock, so an update another process wrote meanwhile is kept: two
    ``vaezoo eval --write`` (or ``seeds --write``) runs on one card both land. The file keeps what did not
    change (:func:`updated_card_text`): its comments, and the order and format of its keys and tables.

    Args:
        path: the card file.
        change: the card as it is now on disk -> the card to write.

    Returns:
        The card written.
    """
    path = Path(path)
    with card_lock(path):
        now, text = read_card(path)
        card = change(now)
        atomic_write(path, updated_card_text(text, now, card, path).encode(), UPDATE_FIX)
    return card


UPDATE_FIX = "the card is kept as it was; make room on its disk, then run the command again"
"""What the error of a card update that cannot be written says to do: a card is updated in place (``eval --write``,
``seeds --write``), there is no other output path to choose, and its folder was checked to take a new file before
anything was measured (:func:`check_writable`), so what is left is a full disk, a quota or a file size limit."""


def updated_card_text(text: str, now: Card, card: Card, path: Path) -> str:
    """The text of the card file ``path``, which holds ``text`` (the card ``now``), updated to hold ``card``.

    Only what changed is edited (:func:`vaezoo.entries.toml_update.updated_text`): the file's comments and the
    order and format of what did not change are kept. Where that text would not load back as ``card``
    exactly, or cannot be made, the text is ``card``'s own TOML (:meth:`~vaezoo.entries.schema.Card.toml`):
    a card is never written wrong. Either way its lines end as the file's do (CRLF stays CRLF).
    """
    from vaezoo.entries.toml_update import updated_text, with_line_ends  # an update alone loads tomlkit

    try:
        kept = updated_text(text, now.model_dump(exclude_none=True), card.model_dump(exclude_none=True))
        back = card_from_text(kept, path)
    except Exception:  # a layout tomlkit cannot edit, or text that does not load: the plain TOML, checked
        return with_line_ends(checked_toml(card), text)
    return kept if not differences(card, back) else with_line_ends(checked_toml(card), text)


def check_writable(card: Card) -> Path:
    """The local file of ``card``, which a command that records numbers on the card updates.

    Raises:
        CardError: ``card`` was downloaded (``card.source``), read from no file, is a file of an installed
            package (in Python's site-packages, or listed in the RECORD of vaezoo's or a plugin's distribution
            wherever pip put it: editing it would change the installed distribution under pip), is read-only (no
            write permission for anyone), or its folder does not take a new file (read-only, no permission, gone): said
            before anything is measured.
        OutputError: something other than a file vaezoo wrote (a folder, a link) stands where the card's lock file
            or its holder file belongs.
    """
    if card.source is not None:
        raise CardError(f"card {card.name} comes from {card.source}, not from a local card file; "
                        f"give the path of a copy to record metrics on")
    if card.path is None:
        raise CardError(f"card {card.name} was read from no file; give the path of a card file to record metrics on")
    installed = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    if any(card.path.resolve().is_relative_to(folder) for folder in installed) or _installed_by(card.path):
        raise CardError(f"card {card.name} is a file of an installed package ({card.path}); copy it with its weights "
                        f"and give the copy's path to record metrics on, or install the package editable")
    try:
        read_only = not os.stat(card.path).st_mode & 0o222  # a rename over it would pass the owner's protection
    except OSError:
        read_only = False  # gone since it was read: the update says so
    if read_only:
        raise CardError(f"card {card.name}: its file {card.path} is read-only; make it writable (chmod u+w) to record "
                        f"metrics on it, or give the path of a copy")
    try:  # the write replaces the file through a new one beside it, under a lock file beside it
        with StopSignals(defer=True) as held:  # a Ctrl-C or SIGTERM waits until the probe is gone: none is left
            fd, probe = tempfile.mkstemp(prefix=f".{card.path.name}.", suffix=".tmp", dir=card.path.parent)
            os.close(fd)
            os.unlink(probe)
    except FileNotFoundError:
        raise CardError(f"card {card.name}: its folder {card.path.parent} is gone (moved or removed since the card "
                        f"was read); nothing was written: give the card's path where it is now") from None
    except OSError as exc:
        raise CardError(f"card {card.name}: its folder {card.path.parent} takes no new file "
                        f"({folder_problem(card.path.parent, exc)}); copy the card with its weights where you can "
                        f"write and give the copy's path") from None
    if held.received is not None:
        raise Interrupted(held.received)
    lock = card_lock_file(card.path)
    for beside in (lock, Path(f"{lock}{HOLDER_SUFFIX}")):  # what card_lock opens: a folder there refuses it
        check_beside(beside)
    return card.path


def _installed_by(path: Path) -> str | None:
    """The distribution with ``vaezoo`` plugins (vaezoo's own included) that pip installed ``path`` as a file of
    (its RECORD lists it), wherever it installed it (``--target``, ``--user``); None for none."""
    from importlib.metadata import entry_points

    resolved, seen = path.resolve(), set()
    for entry in entry_points(group="vaezoo"):
        dist = entry.dist
        if dist is None or dist.name in seen:
            continue
        seen.add(dist.name)
        if any(f.name == resolved.name and Path(dist.locate_file(f)).resolve() == resolved for f in dist.files or ()):
            return dist.name
    return None


def _remedied(card: Card, exc: WeightsError) -> WeightsError:
    """``exc`` (the card's weights file is not what the card states) with what restores the file: reinstalling
    the distribution that installed it, where one did."""
    beside = card.source is None and card.path is not None and card.weights is not None and card.weights.file
    path = card.path.parent / card.weights.file if beside else None
    dist = _installed_by(path) if path is not None and path.is_file() else None
    if dist is None:
        return exc
    return WeightsError(f"{exc}; it is a file of the installed {dist}: reinstall it (pip install --force-reinstall "
                        f"--no-deps {dist})")


def weights_header(card: Card) -> dict[str, str]:
    """The safetensors header of the weights :func:`write_entry` writes: what made them, which never changes
    after, so that the file (and its sha256) depends on the tensors and their recipe alone, not on the folder
    they were written to or on numbers measured later.

    Returns:
        ``{"trained": canonical JSON of {"recipe": the card's recipe less its records
        (:data:`~vaezoo.entries.recipe.RECORDS`), "steps": the steps trained (None where the card does not
        know them)}}``: one key, as safetensors writes several in no fixed order.
    """
    return {"trained": canonical({"recipe": recipe(card, RECORDS), "steps": card.train.steps})}


def write_entry(card: Card, weights: Mapping[str, torch.Tensor] | bytes, folder: Path,
                fix: str | Phrase = "choose another output path") -> Path:
    """Write ``folder/NAME.safetensors`` and ``folder/NAME.toml``, the card naming the weights with their sha256
    and size.

    Both files are written beside their targets first, then renamed over them back to back (a stop signal
    once they are ready lets both renames finish), so that a folder holding an entry holds the old pair or the
    new one. A kill that no signal handler sees (SIGKILL, a power cut) between the two renames leaves new
    weights beside the old card and the new card staged: the next load of the card finishes the write
    (:func:`load_entry`). The folder loads like a zoo entry (``vaezoo.load(folder)``).

    Args:
        card: the card; its ``weights`` entry is replaced by the file written here.
        weights: a state dict (written with :func:`weights_header` as the safetensors header), or the bytes of
            a safetensors file already made (written as they are).
        folder: where the two files go; created if needed.
        fix: what the error of a folder that refuses the files tells the user to do (see
            :func:`vaezoo.store.files.atomic_save`).

    Returns:
        The card file's path.

    Raises:
        CardError: ``card`` would not load back (:func:`vaezoo.entries.catalog.check_card`); nothing is written.
    """
    check_card(card)  # its name becomes the files' names
    path = Path(folder) / f"{card.name}.safetensors"
    card_path = path.with_suffix(".toml")
    if isinstance(weights, bytes):
        staged = [(stage(path, lambda tmp: tmp.write_bytes(weights), fix), path)]
    else:
        staged = [(stage(path, safetensors_writer(weights, weights_header(card)), fix), path)]
    try:  # both files are made beside their targets, then renamed back to back: the pair changes together
        tmp = staged[0][0]
        written = Weights(file=path.name, sha256=sha256_of(tmp), size=tmp.stat().st_size)
        text = checked_toml(card.model_copy(update={"weights": written})).encode()
        staged.append((stage(card_path, lambda tmp: tmp.write_bytes(text), fix), card_path))
    except BaseException:
        staged[0][0].unlink(missing_ok=True)
        raise
    commit(staged, fix)
    return card_path


def local_path(card: Card) -> Path:
    """The weights file beside ``card``, a card read from a local file; refuses paths that leave the card's
    directory."""
    assert card.weights is not None and card.weights.file is not None and card.path is not None
    assert card.source is None, "a card from a Hub repository has its file there (huggingface.hub_weights)"
    directory = card.path.parent.resolve()
    try:
        path = (directory / card.weights.file).resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop, before Python 3.13
        raise WeightsError(f"{card.path}: weights file '{card.weights.file}' cannot be resolved ({exc}); "
                           f"put the card's safetensors file there") from None
    if directory not in path.parents:
        if directory in Path(os.path.normpath(directory / card.weights.file)).parents:  # named beside the card
            raise WeightsError(f"{card.path}: weights file '{card.weights.file}' is a link to {path}, outside the "
                               f"card's directory {directory}; put a copy of that file in the link's place")
        raise WeightsError(f"{card.path}: weights file '{card.weights.file}' is outside the card's "
                           f"directory {directory}; put the weights beside the card")
    if not path.is_file():
        if path.is_dir():
            problem = "is a folder, not a file"
        elif path.exists():
            problem = "is not a regular file (a FIFO or a device)"
        else:
            problem = "does not exist"
        verify_it = shell_join(["vaezoo", "verify", card_reference(card)])
        raise WeightsError(f"{card.path}: weights file {path} {problem}; put the card's safetensors file there, then "
                           f"check it with: {verify_it}")
    return path


def weights_file(card: Card) -> Path | None:
    """Where ``card``'s weights are on this machine, downloading none at a URL: the file beside the card (for a card
    from a Hub repository, its file in that repository, downloaded if need be), the download cache's copy of its
    URL, or huggingface_hub's of an ``hf://`` URL; None when the card has no weights or they are not
    downloaded yet.

    Raises:
        WeightsError: the card names a file beside it that is missing or outside its folder.
    """
    if card.weights is None:
        return None
    if card.weights.file is not None and card.source is not None:  # the file of its Hub repository
        from vaezoo.entries.huggingface import hub_weights

        return hub_weights(card)[0]
    if card.weights.file is not None:
        return local_path(card)
    if card.weights.url.startswith("hf://"):  # in huggingface_hub's cache, if anywhere
        from vaezoo.entries.huggingface import cached_file

        return cached_file(card.weights)
    path = cached_path(card.weights)
    return path if path.exists() else None


def verify_entries(cards: Iterable[Card]) -> list[tuple[str, str]]:
    """Whether each card's weights are what it states, downloading none at a URL (a Hub repository's card's are, as
    :func:`weights_file` says); a weights file that
    several cards state alike (the same sha256 and size of one unchanged file) is read and hashed once.

    Returns:
        ``(status, detail)`` per card: ``("ok", path)``; ``("FAILED", why)``; ``("no weights", "")``; or
        ``("not cached", url)`` for weights at a URL not downloaded yet.
    """
    hashed: dict[tuple, str | None] = {}  # (the file's stat, sha256, size) -> why it failed, or None
    results = []
    for card in cards:
        try:
            path = weights_file(card)
            if path is None:
                results.append(("no weights", "") if card.weights is None else ("not cached", card.weights.url))
                continue
            try:
                key = (*file_state(os.stat(path)), card.weights.sha256, card.weights.size)
            except OSError:
                key = (object(),)  # not hashed: verify() says what is wrong with the file
            if key not in hashed:
                try:
                    verify(path, card.weights)
                    hashed[key] = None
                except WeightsError as exc:
                    cut = card.source is None and _staged_card(card) is not None
                    hashed[key] = str(_remedied(card, exc)) + (
                        "; a write of the entry was cut short between its weights and its card: loading it "
                        "(vaezoo.load, vaezoo eval) finishes that write" if cut else "")
            results.append(("ok", str(path)) if hashed[key] is None else ("FAILED", hashed[key]))
        except WeightsError as exc:
            results.append(("FAILED", str(exc)))
    return results


SKIPPED = "SKIPPED"
""":func:`verify_names`' status of a card file that could not be read, so whose weights were not verified."""

ERROR = "ERROR"
""":func:`verify_names`' status of a name given among several that names no card that can be read."""


def verify_names(names: Iterable[str] | None = None) -> list[tuple[str, str, str]]:
    """:func:`verify_entries` of the cards ``names`` names (:func:`vaezoo.entries.catalog.read_cards`), or of every
    card in the zoo when ``names`` is empty or None: ``(card name, status, detail)`` per card. Among several names,
    one that names no card that can be read is a row too, :data:`ERROR`, the name as given and why (the others are
    verified); over the zoo, a card file that cannot be read (a :class:`~vaezoo.entries.catalog.CardWarning`) is
    a row, :data:`SKIPPED`, its detail naming the file and why: its weights were not verified, and the others are.

    Raises:
        CardError: no name given and no card found (a check that verified nothing passed without a word).
        VaezooError: one name given, which names no card that can be read.
    """
    if names:
        names = list(names)
        read = read_cards(names)
        verified = iter(verify_entries([card for card in read if isinstance(card, Card)]))
        return [(card.name, *next(verified)) if isinstance(card, Card) else (str(name), ERROR, str(card))
                for name, card in zip(names, read, strict=True)]
    found = scan()  # the skipped are rows, not warnings
    cards, skipped = list(found.cards.values()), found.skipped
    if not cards and not skipped:
        raise no_card_found("no weights file was verified")
    rows = [(card.name, status, detail) for card, (status, detail) in zip(cards, verify_entries(cards), strict=True)]
    return rows + [(bad.name, SKIPPED, f"{bad.path}: {bad.reason}") for bad in skipped]


def fetch(card: Card) -> Path:
    """The verified local copy of ``card``'s weights, downloading them into the cache if needed."""
    return fetch_verified(card)[0]


def fetch_verified(card: Card) -> tuple[Path, bytes]:
    """``card``'s weights file and its contents, whose size and sha256 are the card's; downloaded if needed.

    The bytes are verified once, where they enter: read and hashed in one pass from the file beside the card
    (:func:`vaezoo.store.checksums.read_verified`), or by the download that fetched them or read the cached
    copy. A file replaced after the check is never what is loaded: parse the bytes returned, not the path.
    """
    if card.weights is None:
        raise WeightsError(f"card '{card.name}' has no weights; train it with 'vaezoo train' (in Python, "
                           f"pretrained=False builds it untrained)")
    if weights_on_hub(card):
        from vaezoo.entries.huggingface import hub_weights

        return hub_weights(card)
    if card.weights.file is not None:
        path = local_path(card)
        return path, read_verified(path, card.weights)
    return download(card.weights.url, card.weights)


def weights_on_hub(card: Card) -> bool:
    """Whether ``card``'s weights are on the Hugging Face Hub, fetched through huggingface_hub: a file of its Hub
    repository, or at an ``hf://`` URL (False for a card without weights)."""
    if card.weights is None:
        return False
    if card.weights.file is not None:
        return card.source is not None
    return card.weights.url.startswith("hf://")


def load_entry(card: Card) -> tuple[Card, dict[str, torch.Tensor]]:
    """``card``'s weights as a state dict on the CPU, with the card they belong to.

    That card is ``card``, unless its run was published again (``vaezoo train --resume`` for more epochs)
    between the reading of ``card`` and of its weights: then the new weights do not match ``card``, and the
    card on disk is read again, under its lock (the publisher holds it while it writes the weights and the
    card), and returned with its weights. A write of the pair killed between its renames is finished there.

    Raises:
        WeightsError: the weights are not what the card on disk states.
    """
    try:
        return card, load_state_dict(card)
    except WeightsError as exc:
        now = _card_now(card)
        if now is None:
            raise _remedied(card, exc) from None
    return now, load_state_dict(now)


def _card_now(card: Card) -> Card | None:
    """The card file of ``card`` as it is now, once no process is writing it (a run's publication holds the card's
    lock, ``save_pretrained`` the folder's), with a write of the pair that a kill cut short between its two renames
    finished (:func:`_finish_write`); None if it still states the weights ``card`` states (or is gone, or
    unreadable), that is, when ``card``'s weights are not what it says.

    Raises:
        WeightsError: a write cut short so that this process cannot finish (the folder refuses the rename or the
            lock), naming why.
    """
    if card.path is None or card.source is not None or card.weights is None or card.weights.file is None:
        return None
    try:
        with ExitStack() as held:  # in the order the writers take them
            if card.path.resolve().parent.name and folder_lock_file(card.path.parent).exists():
                held.enter_context(folder_lock(card.path.parent))
            if card_lock_file(card.path).exists():
                held.enter_context(card_lock(card.path))
            now = parse_card(card.path)
            if now.weights == card.weights:
                _finish_write(now)
                now = parse_card(card.path)  # finished here, or by a load at the same time (no lock file to wait on)
    except (OSError, VaezooError) as exc:
        if _staged_card(card) is None:
            return None
        why = folder_problem(card.path.parent, exc) if isinstance(exc, OSError) else str(exc)
        raise WeightsError(f"{card.path}: a write of the entry was cut short between its weights and its card, and "
                           f"this load cannot finish it ({why}); load it where its folder can be written, or write "
                           f"the entry again") from None
    return now if now.weights != card.weights else None


def _finish_write(card: Card) -> None:
    """Finish a write of ``card``'s pair that a kill (SIGKILL, a power cut) cut short between its two renames: the
    card it staged (:func:`_staged_card`) is renamed over ``card``'s file, which then holds the new pair whole.
    Nothing is done where no write was cut short so, or another load renamed that card first.

    Call it only under the locks the writers hold.
    """
    staged = _staged_card(card)
    if staged is None:
        return
    try:
        os.replace(staged, card.path)
    except FileNotFoundError:  # another load's rename came first
        pass


def _staged_card(card: Card) -> Path | None:
    """The card :func:`write_entry` left staged beside ``card``'s file when it was killed between renaming the new
    weights over the old and the new card over ``card``: the staged card that states the weights file now there.
    None where there is none (the writer was killed before its renames, or the weights are damaged)."""
    if card.path is None or card.weights is None or card.weights.file is None:
        return None
    candidates = temporaries(card.path.parent, f".{card.path.name}.", ".tmp")
    weights = card.path.parent / card.weights.file
    try:  # the file a writer renamed there, not read otherwise: a FIFO would block, a link to /dev/zero never end
        if not candidates or weights.name != card.weights.file or not stat.S_ISREG(os.lstat(weights).st_mode):
            return None
        there = Weights(file=card.weights.file, sha256=sha256_of(weights), size=weights.stat().st_size)
    except OSError:
        return None
    for staged in candidates:
        try:
            meant = parse_card(staged)
            # staged before the card was last written: the card's file was updated since (seeds --write, say)
            newer = os.stat(staged).st_mtime_ns >= os.stat(card.path).st_mtime_ns
        except (OSError, VaezooError):
            continue  # cut short while it was written: the weights were not renamed yet
        if newer and meant.name == card.name and meant.weights == there:
            return staged
    return None


def load_state_dict(card: Card, device=None) -> dict[str, torch.Tensor]:
    """Fetch, verify and read ``card``'s weights as a state dict on ``device`` (``"auto"`` too:
    :func:`vaezoo.devices.usable_device`; default the CPU): the bytes verified are parsed."""
    path, data = fetch_verified(card)
    return parse_safetensors(data, path, device)
