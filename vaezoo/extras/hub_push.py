"""Publishing to the Hugging Face Hub: a card, its weights, ``config.json`` and a Hub model card, in one commit;
or the whole zoo, one repository per entry, gathered in a Hub collection (staged for inspection without copying
its weights)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from vaezoo.context import LatentPart
from vaezoo.entries.catalog import card_reference, check_card, list_cards, no_card_found, one_scan, parse_card
from vaezoo.entries.entry import fetch, fetch_verified, write_card, write_entry
from vaezoo.entries.huggingface import COMMIT, hub, revision_problem, timed_out, translated
from vaezoo.entries.schema import HUB_PREFIX, Card, Weights
from vaezoo.errors import OutputError, VaezooError, WeightsError, setting_on
from vaezoo.extras.hub_card import hub_config, model_card
from vaezoo.store.checksums import sha256_of
from vaezoo.store.downloads import read_timeout
from vaezoo.store.files import atomic_write, folder_problem, named_in, new_folder_mode, temporaries
from vaezoo.store.locks import folder_lock
from vaezoo.terminal import note, shell_join, shell_quote

if TYPE_CHECKING:
    import torch
    from huggingface_hub import CommitInfo

COLLECTION_FILE = "collection.json"
MANIFEST_FILE = "manifest.json"
COLLECTION_TITLE = "vaezoo: disentangled VAEs"
NOTE_LIMIT = 500  # characters the Hub keeps of a collection item's note


def stage(card: Card, repo_id: str, folder: Path) -> list[Path]:
    """Write into ``folder`` what :func:`push` uploads: the card, its weights beside it, config.json and README.md.

    Args:
        card: the card to push; its weights are fetched and verified first.
        repo_id: ``OWNER/REPO``, for the README's usage lines.
        folder: where the files go; created if needed.

    Returns:
        The files written, card first.

    Raises:
        OutputError: the Hub would refuse ``repo_id`` (:func:`check_repo_id`), or huggingface_hub is missing.
        WeightsError: the card has no weights, or they do not verify.
    """
    check_repo_id(repo_id)  # said before any download, as huggingface_hub's absence is
    if card.weights is None:
        raise WeightsError(f"card '{card.name}' has no weights to push; train it first ('vaezoo train')")
    _, data = fetch_verified(card)  # the bytes verified are the bytes pushed
    return write_folder(card, data, folder, repo_id)


def repo_problem(repo_id: str) -> str | None:
    """Why the Hub would refuse ``repo_id`` as a repository ``OWNER/REPO``, as huggingface_hub's
    ``validate_repo_id`` checks it (each part of letters, digits, ``-``, ``_`` and ``.``, neither first nor last,
    at most 96 characters, no ``--`` or ``..``, no ending ``.git``); None where it takes it.

    Raises:
        OutputError: huggingface_hub is not installed.
    """
    hub(OutputError, "vaezoo push")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if repo_id.count("/") != 1:
        return "write OWNER/REPO"
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        return str(exc).replace(f": '{repo_id}'", "").rstrip(".")
    return None


def check_repo_id(repo_id: str) -> None:
    """Refuse ``repo_id`` where the Hub would (:func:`repo_problem`), before anything is staged or uploaded.

    Raises:
        OutputError: naming the problem; or huggingface_hub is not installed.
    """
    problem = repo_problem(repo_id)
    if problem is not None:
        raise OutputError(f"the Hub takes no repository named {repo_id} ({problem}); choose another OWNER/REPO")


def check_revision(revision: str | None) -> None:
    """Refuse a branch to commit to that is no branch name (:func:`~vaezoo.entries.huggingface.revision_problem`),
    or that is named as a commit is (huggingface_hub would take it for one when it is loaded, and the card would name
    a branch as its commit), before anything is staged or uploaded.

    Raises:
        OutputError: naming the problem.
    """
    if revision is not None and (problem := revision_problem(revision)) is not None:
        raise OutputError(problem)
    if revision is not None and COMMIT.fullmatch(revision):
        raise OutputError(f"branch '{revision}' is named as a commit is (40 hexadecimal digits): loading it, "
                          f"huggingface_hub would take it for a commit; choose another branch name")


def refuse_offline(name: str, repo_id: str, instead: str) -> None:
    """Refuse a push where the network is kept off (``VAEZOO_OFFLINE=1``, ``HF_HUB_OFFLINE=1``), before any request
    and before anything is staged: one line naming the setting, and ``instead``, what writes the files without it.

    Raises:
        OutputError: naming the setting; or huggingface_hub is not installed.
        VaezooError: ``VAEZOO_OFFLINE`` is neither on nor off.
    """
    huggingface_hub = hub(OutputError, "pushing to the Hugging Face Hub")
    if setting_on("VAEZOO_OFFLINE"):
        variable, said = "VAEZOO_OFFLINE", "VAEZOO_OFFLINE=1"
    elif huggingface_hub.constants.HF_HUB_OFFLINE:
        variable, said = "HF_HUB_OFFLINE", "HF_HUB_OFFLINE is set"
    else:
        return
    raise OutputError(f"cannot push '{name}' to {repo_id}: {said}, and a push needs the Hub; unset {variable} to push "
                      f"({instead} writes the files without the network)")


_DATA_ROOT = re.compile(r"""(?:^|\s+)--data-root(?:=|\s+)(?:[^\s'"\\$]+|'[^']*'|"[^"]*"|\$'(?:[^'\\]|\\.)*')+""")
"""A ``--data-root DIR`` of a recorded command, ``DIR`` one word as :func:`vaezoo.terminal.shell_quote` writes it."""


def on_hub(card: Card, repo_id: str) -> Card:
    """``card`` as the Hub repository ``repo_id`` holds it: each metric's ``vaezoo eval`` command names the
    repository (``hf-hub:OWNER/REPO``), where it named the card where it was measured, and gives no
    ``--data-root`` (paths of that machine, which a Hub user does not have; their data folder is their own)."""
    def hub_command(command: str) -> str:
        words = shlex.shlex(command, posix=True)
        words.whitespace_split, words.commenters = True, ""  # as shlex.split reads it
        try:
            named = [words.get_token() for _ in range(3)]
        except ValueError:
            return command
        if named[:2] != ["vaezoo", "eval"] or named[2] is None:
            return command
        # as written (shlex reads no $'...', a word shell_quote escaped), less the data folder of that machine
        rest = _DATA_ROOT.sub("", words.instream.read()).strip()
        return " ".join(["vaezoo", "eval", shell_quote(f"{HUB_PREFIX}{repo_id}", for_terminal=False),
                         *([rest] if rest else [])])

    metrics = {name: metric.model_copy(update={"command": hub_command(metric.command)})
               for name, metric in card.metrics.items()}
    return card.model_copy(update={"metrics": metrics})


def shared_data(card: Card, data: bytes | Mapping[str, torch.Tensor]
                ) -> tuple[Card, bytes | Mapping[str, torch.Tensor]]:
    """``card`` with its dataset's options as a card shared with others records them
    (:meth:`vaezoo.data.Dataset.published`: ``image_folder`` leaves out the path of the user's folder), and its
    weights ``data`` as a state dict where they change, so that the weights' header records the recipe of the card
    shared and not the options left out. Those left out are named on stderr, with their values.
    """
    from vaezoo.store.weights import parse_safetensors

    options = card.train.data.options
    shared = _shared_options(card)
    if shared == options:
        return card, data
    if left_out := {name: value for name, value in options.items() if name not in shared}:
        said = ", ".join(f"{card.train.data.name}'s {name} ({value})" for name, value in left_out.items())
        note(f"the card of '{card.name}' leaves out what names this machine's files: {said}; it records what "
             f"loads the model without them")
    train = card.train.model_copy(update={"data": card.train.data.model_copy(update={"options": shared})})
    state = parse_safetensors(data, f"the weights of '{card.name}'") if isinstance(data, bytes) else data
    return card.model_copy(update={"train": train}), state


def _shared_options(card: Card) -> dict[str, object]:
    """``card``'s dataset options as a card shared with others records them (:meth:`vaezoo.data.Dataset.published`)."""
    from vaezoo.plugins import registry

    return registry("dataset")[card.train.data.name].published(**card.train.data.options)


def write_folder(card: Card, data: bytes | Mapping[str, torch.Tensor] | None, folder: Path,
                 repo_id: str | None = None, readme: bool = True) -> list[Path]:
    """Write a model's Hub folder: the entry (``NAME.toml`` naming ``NAME.safetensors`` beside it, with its sha256
    and size: :func:`vaezoo.entries.entry.write_entry`), then ``config.json`` and ``README.md``. The folder is a
    card folder: ``vaezoo.load(folder)`` loads it (unless ``data`` is None).

    Args:
        card: the card; its ``weights`` entry is replaced by the file written here.
        data: the safetensors file's bytes, or a state dict to write as one; None: no weights file is written,
            and the card names ``NAME.safetensors`` with the sha256 and size ``card`` states (those of the bytes
            that would be uploaded).
        folder: where the files go; created if needed.
        repo_id: ``OWNER/REPO``, for the README's usage lines and the card's commands (:func:`on_hub`); None:
            a placeholder in the README, and the commands as they are.
        readme: write ``README.md`` too.

    Returns:
        The files written: card, weights (unless ``data`` is None), config.json and (with ``readme``) README.md;
        with ``data``, the card and the weights' header record the dataset's options as :func:`shared_data` gives
        them.
    """
    card = on_hub(card, repo_id) if repo_id is not None else card
    if data is not None:
        card, data = shared_data(card, data)
    if data is None:
        card_file = Path(folder) / f"{card.name}.toml"
        check_card(card)  # its name becomes the file's name
        weights = Weights(file=f"{card.name}.safetensors", sha256=card.weights.sha256, size=card.weights.size)
        write_card(card.model_copy(update={"weights": weights}), card_file)
    else:
        card_file = write_entry(card, data, folder)
    written = parse_card(card_file)
    config = folder / "config.json"
    facts = hub_config(written)
    atomic_write(config, (json.dumps(facts, indent=2) + "\n").encode())
    files = [card_file, *([card_file.with_suffix(".safetensors")] if data is not None else []), config]
    if readme:
        layout = written.latent or [LatentPart.model_validate(part) for part in facts["latent"]["structure"]]
        described = written.model_copy(update={"latent": layout})  # the README's
        atomic_write(folder / "README.md", model_card(described, repo_id).encode())
        files.append(folder / "README.md")
    return files


def stage_collection(cards: Iterable[Card], owner: str, folder: Path) -> list[Path]:
    """Stage the zoo as a Hub collection, for inspection, without copying its weights: ``folder/NAME/`` holds what
    :func:`stage` writes for the repository ``OWNER/NAME`` of each card with weights but the weights file;
    ``folder/manifest.json`` gives every file each repository would receive, with its size and sha256 (for the
    weights, the card's verified file they would be read from); ``folder/collection.json`` lists the repositories.

    The weights are verified, not copied: a copy would cost their size on disk, and a link would let an edit of
    the staged folder reach the installed file. Each entry is uploaded from the zoo (the command the manifest
    gives), which stages these files again.

    Args:
        cards: the cards; those without weights are left out.
        owner: the Hub user or organisation that would own the repositories and the collection.
        folder: where the folders go; created if needed.

    A card that cannot be staged (weights that do not verify, a name that is the collection's or the manifest's
    file, or that the Hub refuses as a repository's) is skipped, named on stderr; the others are staged.

    Returns:
        ``collection.json``, ``manifest.json``, then every staged file, card by card.

    Raises:
        OutputError: ``folder`` refuses the files.
    """
    hub(OutputError, "vaezoo push")  # said before any download: the model card needs huggingface_hub
    files, manifest, staged = [], {}, []
    with one_scan():  # each card's push command named after one read of the zoo, not one per card
        for card in cards:
            if card.weights is None:
                continue
            if card.name in (COLLECTION_FILE, MANIFEST_FILE):
                note(f"push --all: card {card.name} ({card.path}) skipped: its folder would take the place of the "
                     f"collection's {card.name}; rename the card to stage it")
                continue
            repo_id = f"{owner}/{card.name}"
            problem = repo_problem(repo_id)
            if problem is not None:
                note(f"push --all: card {card.name} ({card.path}) skipped: the Hub takes no repository named {repo_id} "
                     f"({problem}); rename the card to stage it")
                continue
            try:
                if _shared_options(card) != card.train.data.options:  # a push rewrites its weights' header
                    note(f"push --all: card {card.name} ({card.path}) skipped: its dataset's options name this "
                         f"machine's files, which a push leaves out of the card and of its weights' header; stage it "
                         f"alone with 'vaezoo push {card.name} {repo_id} --dry-run'")
                    continue
                source = fetch(card)  # verified: the bytes an upload reads are the card's
                written = write_folder(card, None, folder / card.name, repo_id)
            except OutputError:  # the folder refuses files: no other card fares better
                raise
            except VaezooError as exc:  # this card's own problem: the others are staged
                note(f"push --all: card {card.name} ({card.path}) skipped: {exc}")
                continue
            staged.append(card)
            shown = [_described(path) for path in written]
            shown.insert(1, {"path": f"{card.name}.safetensors", "size": card.weights.size,
                             "sha256": card.weights.sha256, "source": str(source)})
            manifest[repo_id] = {"folder": card.name, "push": shell_join(["vaezoo", "push", card_reference(card),
                                                                          repo_id], for_terminal=False), "files": shown}
            files += written
    collection = {"title": COLLECTION_TITLE, "namespace": owner,
                  "description": "Every model of the vaezoo zoo: disentangled VAEs with their cards, verified "
                                 "weights and the commands that measured their metrics.",
                  "items": [{"item_id": f"{owner}/{card.name}", "item_type": "model", "note": _note(card),
                             "folder": card.name} for card in staged]}
    index, listing = folder / COLLECTION_FILE, folder / MANIFEST_FILE
    atomic_write(listing, (json.dumps(manifest, indent=2) + "\n").encode())
    atomic_write(index, (json.dumps(collection, indent=2) + "\n").encode())
    return [index, listing, *files]


def _described(path: Path) -> dict[str, object]:
    """A staged file as the manifest gives it: its name, size and sha256."""
    return {"path": path.name, "size": path.stat().st_size, "sha256": sha256_of(path)}


def _note(card: Card) -> str:
    """A collection item's note: the card's summary, cut to what the Hub keeps."""
    from vaezoo.terminal import printable

    text = printable(card.summary)
    return text if len(text) <= NOTE_LIMIT else text[:NOTE_LIMIT - 1] + "…"


def push(card: Card, repo_id: str, folder: Path | None = None, private: bool = False,
         token: str | bool | None = None, commit_message: str | None = None,
         revision: str | None = None) -> CommitInfo:
    """Upload ``card``, its weights, config.json and a Hub model card to ``repo_id`` in one commit.

    Args:
        card: the card to push (its weights are fetched and verified).
        repo_id: ``OWNER/REPO``.
        folder: stage the files here (kept); default a temporary folder, removed afterwards.
        private: create the repository private (an existing one keeps its visibility).
        token: a Hub token; None for the one logged in.
        commit_message: default ``vaezoo push NAME``.
        revision: the branch to commit to, created from ``main`` if needed (default ``main``).

    Returns:
        huggingface_hub's ``CommitInfo`` (``.oid`` is the commit).

    Raises:
        OutputError: huggingface_hub is missing, or the Hub refused (not logged in, no such owner, offline).
    """
    refuse_offline(card.name, repo_id, "'vaezoo push --dry-run'")
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="vaezoo-push-") as tmp:
            return push(card, repo_id, Path(tmp), private, token, commit_message, revision)
    return upload(stage(card, repo_id, folder), repo_id, commit_message or f"vaezoo push {card.name}", private, token,
                  revision)


def upload(files: list[Path], repo_id: str, message: str, private: bool = False,
           token: str | bool | None = None, revision: str | None = None) -> CommitInfo:
    """Commit ``files`` (a staged model folder) to the root of ``repo_id`` on branch ``revision`` (default
    ``main``); the repository and the branch are created if needed.

    Other ``*.toml`` and ``*.safetensors`` files at its root (an earlier card and its weights) are removed in the
    same commit, so that it holds exactly one card.

    Raises:
        OutputError: ``revision`` is no branch name (:func:`check_revision`), or the Hub refused (not logged in, no
            such owner, offline).
    """
    huggingface_hub = hub(OutputError, "pushing to the Hugging Face Hub")
    name = next(f.stem for f in files if f.suffix == ".toml")
    refuse_offline(name, repo_id, "vaezoo.save_pretrained")
    check_revision(revision)
    seconds = read_timeout()
    api = huggingface_hub.HfApi(token=token)
    what = f"cannot push '{name}' to {repo_id}"
    with translated(OutputError, what, huggingface_hub), _reads_bounded(huggingface_hub, seconds, what):
        api.create_repo(repo_id, private=private, exist_ok=True)
        if revision is not None:
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        # the commit whose files are replaced: the Hub refuses the push if another lands on the branch meanwhile, which
        # would leave two cards (the other's, which this one did not see, and this one)
        # (the listing of the commit's files comes with it: huggingface_hub's listing of a tree takes no timeout)
        info = api.repo_info(repo_id, revision=revision, timeout=seconds)
        head = info.sha
        replaced = [p for p in (s.rfilename for s in info.siblings or ())
                    if "/" not in p and p.endswith((".toml", ".safetensors")) and p not in {f.name for f in files}]
        operations = [huggingface_hub.CommitOperationAdd(path_in_repo=f.name, path_or_fileobj=str(f)) for f in files]
        operations += [huggingface_hub.CommitOperationDelete(path_in_repo=p) for p in replaced]
        return api.create_commit(repo_id, operations, commit_message=message, revision=revision, parent_commit=head)


@contextmanager
def _reads_bounded(huggingface_hub: ModuleType, seconds: float, what: str) -> Iterator[None]:
    """Let each read of huggingface_hub's requests inside the block wait at most ``seconds`` for the Hub, and say so
    in one line (``what``: ...) when one waited longer.

    huggingface_hub's session has no timeout, and a commit's requests give none: a Hub that took the connection
    and never answered held a push until Ctrl-C. The session's default timeout is set for the block (for its
    other users' requests too, in other threads) and restored after it. A session without one (requests',
    huggingface_hub before 1.0) is left as it is: its requests take a timeout only one by one.
    """
    session = huggingface_hub.utils.get_session()
    transport = sys.modules[type(session).__module__.partition(".")[0]]
    if not hasattr(transport, "Timeout") or not hasattr(session, "timeout"):
        yield
        return
    before, session.timeout = session.timeout, transport.Timeout(seconds)
    try:
        yield
    except Exception as exc:
        if not timed_out(exc):
            raise
        raise OutputError(f"{what}: the Hub at {huggingface_hub.constants.ENDPOINT} did not answer a request within "
                          f"{seconds:g} s; the push may or may not have landed: check the repository, then push "
                          f"again, or give it longer (VAEZOO_TIMEOUT)") from None
    finally:
        session.timeout = before


@dataclass(frozen=True)
class PushReport:
    """What :func:`push_or_stage` did.

    Attributes:
        folder: where the staged files are: the ``out`` folder, or a temporary one (kept after a dry run).
        files: the files staged, under ``folder``; none after an upload without ``out``.
        repo: ``OWNER/REPO`` of one card, or None for the whole zoo.
        owner: the owner the whole zoo was staged for, or None.
        commit: the upload's commit (``commit.oid``, ``commit.commit_url``), or None for a dry run.
    """

    folder: Path | None
    files: list[Path]
    repo: str | None = None
    owner: str | None = None
    commit: CommitInfo | None = None


def push_or_stage(card: Card | None = None, repo_id: str | None = None, *, owner: str | None = None,
                  dry_run: bool = False, out: str | Path | None = None, private: bool = False,
                  commit_message: str | None = None, revision: str | None = None) -> PushReport:
    """What ``vaezoo push`` does: upload ``card`` to ``repo_id`` (:func:`push`), or with ``dry_run`` stage the files
    it would upload (:func:`stage`); with ``owner`` (and ``dry_run``), stage the whole zoo as that owner's Hub
    collection (:func:`stage_collection`).

    ``out`` keeps the staged files in a new or empty folder: they are staged in a hidden folder beside it, under
    its lock, and moved in whole, so that an error, a Ctrl-C or a kill leaves ``out`` as it was.

    Raises:
        OutputError: the arguments do not go together (one line saying which to give; a usage error, exit code 2
            in the CLI), the Hub would refuse
            ``repo_id`` or ``owner`` (:func:`check_repo_id`), ``revision`` is no branch name (:func:`check_revision`),
            or ``out`` is not a new or empty folder, or cannot be written.
        CardError: ``owner`` is given and no card is found.
    """
    if owner is not None and (card is not None or repo_id):
        raise OutputError.of_value("--all OWNER pushes the whole zoo; give no CARD or OWNER/REPO with it")
    if owner is None and not (card is not None and repo_id):
        raise OutputError.of_value("give CARD and OWNER/REPO (vaezoo push CARD OWNER/REPO), or --all OWNER --dry-run")
    if owner is not None and not dry_run:
        raise OutputError.of_value("--all stages the zoo with --dry-run only; upload each entry with "
                                   "'vaezoo push NAME OWNER/NAME'")
    if dry_run and (commit_message is not None or revision is not None):
        raise OutputError.of_value("--commit-message and --revision go with an upload; --dry-run commits nothing")
    if repo_id:
        check_repo_id(repo_id)  # before any folder is made: a dry run passed names the push then refused
        check_revision(revision)
        if not dry_run:
            refuse_offline(card.name, repo_id, "--dry-run")  # before --out is made
    elif (problem := repo_problem(f"{owner}/x")) is not None:
        raise OutputError(f"the Hub takes no user or organisation named {owner} ({problem}); choose another OWNER")
    zoo = list_cards() if owner is not None else []
    if owner is not None and not zoo:  # before any folder is made: an empty collection said nothing
        raise no_card_found("there is nothing to stage")

    def staged(folder: Path) -> PushReport:
        files = stage_collection(zoo, owner, folder) if owner is not None else stage(card, repo_id, folder)
        return PushReport(folder, files, repo_id, owner)

    def into(folder: Path | None) -> PushReport:
        if owner is not None or dry_run:
            if folder is not None:
                return staged(folder)
            folder = Path(tempfile.mkdtemp(prefix="vaezoo-push-"))  # kept, and named, once the files are staged
            try:
                return staged(folder)
            except BaseException:  # a staging that failed would leave its folder in the temporary folder, unnamed
                shutil.rmtree(folder, ignore_errors=True)
                raise
        commit = push(card, repo_id, folder, private=private, commit_message=commit_message, revision=revision)
        return PushReport(folder, [], repo_id, None, commit)

    if out is None:
        return into(None)
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--out {folder} is not an empty folder; give a new or empty one")

    def unwritable(exc: OSError) -> OutputError:  # its staging folder is vaezoo's to name, not the user's
        return OutputError(f"cannot write --out {folder}: {folder_problem(folder.parent, exc)}; choose a folder "
                           f"you can write in")

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(exc) from None
    with folder_lock(folder):  # its file beside the folder, which is uploaded whole; another staging waits
        if folder.is_dir() and any(folder.iterdir()):
            raise OutputError(f"--out {folder} is not an empty folder; give a new or empty one")
        for stale in temporaries(folder.parent, f".{folder.name}.", ".tmp"):  # a staging killed before it moved in
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        try:
            staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
        except OSError as exc:
            raise unwritable(exc) from None
        staging.chmod(stat.S_IMODE(folder.stat().st_mode) if folder.is_dir() else new_folder_mode())
        try:  # staged beside, then moved in whole
            with named_in(folder, staging):
                report = into(staging)
            if folder.is_dir():
                folder.rmdir()
            staging.rename(folder)
            return replace(report, folder=folder, files=[folder / f.relative_to(staging) for f in report.files])
        finally:
            shutil.rmtree(staging, ignore_errors=True)
