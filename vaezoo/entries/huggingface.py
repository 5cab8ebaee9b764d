"""The Hugging Face Hub: cards and weights from Hub repositories, and pushing a card to one.

A Hub repository holds one vaezoo card (a TOML file at its root) and the weights it names; it is asked
for as ``hf-hub:OWNER/REPO`` or ``hf-hub:OWNER/REPO@REVISION``. A card anywhere may also name weights as
``hf://OWNER/REPO/PATH`` or ``hf://OWNER/REPO@REVISION/PATH``. huggingface_hub (the optional extra
``vaezoo[hub]``) makes every transfer, so its cache, its endpoint (``HF_ENDPOINT``), its offline mode
(``HF_HUB_OFFLINE``) and its tokens apply; vaezoo still checks each weights file against the card's size
before downloading it and against its sha256 before anything reads it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from types import ModuleType
from urllib.parse import unquote

from vaezoo.entries.schema import HF_URL, HUB_PREFIX, Card, Weights
from vaezoo.errors import CardError, VaezooError, WeightsError, setting_on

INSTALL = 'pip install "vaezoo[hub]"'
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # OWNER/REPO
_NAME = re.compile(rf"{HUB_PREFIX}(?P<repo>{REPO_ID.pattern})(?:@(?P<revision>[^\s@]+))?")
COMMIT = re.compile(r"[0-9a-f]{40}")  # a commit's hash, which names no branch or tag
NAMED_CARDS = 10  # a root holding more cards is said to, with the first ones named

@dataclass(frozen=True)
class Download:
    """How huggingface_hub fetches a Hub model's files, as its own functions take it.

    Attributes:
        cache_dir: huggingface_hub's cache folder; None for its default (``HF_HUB_CACHE``).
        force_download: download again even what the cache holds.
        local_files_only: use what the cache holds and never ask the Hub.
        token: a Hub token (or False for none); None for the one logged in (``HF_TOKEN``).
    """

    cache_dir: str | os.PathLike[str] | None = None
    force_download: bool = False
    local_files_only: bool = False
    token: str | bool | None = None


_DOWNLOAD: ContextVar[Download] = ContextVar("vaezoo_hub_download", default=Download())


def _options() -> Download:
    """The download options in force: the caller's, with ``VAEZOO_OFFLINE=1`` keeping to the cache as
    ``local_files_only`` does."""
    options = _DOWNLOAD.get()
    return replace(options, local_files_only=True) if _vaezoo_offline() else options


def _vaezoo_offline() -> bool:
    return setting_on("VAEZOO_OFFLINE")


def _no_fresh_copy() -> str:
    """Why no fresh copy may be downloaded, when the caller or the environment keeps to the cache; else ""."""
    if _DOWNLOAD.get().local_files_only:
        return "local_files_only is set"
    return "VAEZOO_OFFLINE=1" if _vaezoo_offline() else ""


@contextmanager
def downloading(options: Download) -> Iterator[None]:
    """Fetch every Hub card and weights file inside the block with ``options`` (see :class:`Download`)."""
    reset = _DOWNLOAD.set(options)
    try:
        yield
    finally:
        _DOWNLOAD.reset(reset)


def hub(error: type[VaezooError], subject: str) -> ModuleType:
    """huggingface_hub, or ``error`` saying that ``subject`` needs the ``hub`` extra."""
    try:
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.errors
    except ImportError:
        raise error(f"{subject} needs huggingface_hub, which is not installed; install it with {INSTALL}") from None
    except ValueError as exc:  # raised as it reads its settings, e.g. an HF_HUB_DOWNLOAD_TIMEOUT that is no integer
        quoted = [f"{name}={value!r}" for name, value in sorted(os.environ.items())
                  if name.startswith(("HF_", "HUGGINGFACE_")) and value and repr(value) in str(exc)]
        if quoted:  # the setting whose value the error quotes
            raise error(f"huggingface_hub cannot start with {', '.join(quoted)} ({exc}); correct or unset it") from None
        raise error(f"huggingface_hub cannot start: {exc}; check its settings (HF_ENDPOINT, HF_HOME)") from None
    return huggingface_hub


def revision_problem(revision: str) -> str | None:
    """Why ``revision`` is no branch, tag or commit name: a part (between slashes) that is empty or starts with
    ``.``, which git takes in no branch or tag name, and which a URL reads as a folder (``..`` would ask for the
    repository itself, that is its main branch), or a space or control character (pasted with the name), which git
    takes in none either; None where it may be one."""
    if any(c.isspace() or not c.isprintable() for c in revision):
        return (f"revision {revision!r} is no branch, tag or commit name (it holds a space or a control character); "
                f"give a branch, a tag or a commit")
    if any(not part or part.startswith(".") for part in revision.split("/")):
        return (f"revision '{revision}' is no branch, tag or commit name (a part of it is empty or starts with '.'); "
                f"give a branch, a tag or a commit")
    return None


def parse_name(name: str) -> tuple[str, str | None]:
    """``(repo_id, revision)`` of ``hf-hub:OWNER/REPO[@REVISION]``; the revision is None when not given."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise CardError(f"'{name}' is not a Hub model; write hf-hub:OWNER/REPO or hf-hub:OWNER/REPO@REVISION")
    if match["revision"] is not None and (problem := revision_problem(match["revision"])) is not None:
        raise CardError(f"{name}: {problem}")
    return match["repo"], match["revision"]


def card_file(name: str, max_bytes: int) -> tuple[Path, str]:
    """The card file of the Hub repository ``hf-hub:OWNER/REPO[@REVISION]``, downloaded into huggingface_hub's cache,
    and where it comes from (:func:`vaezoo.entries.catalog.get_card` reads it).

    Only the repository's root ``*.toml`` files are downloaded here; the weights follow when a model loads
    (:func:`hub_weights`). A revision that is not a commit hash (a branch, a tag) is resolved to its commit,
    which the card keeps as its :attr:`~vaezoo.entries.schema.Card.source`. Offline (``HF_HUB_OFFLINE=1``) the cache
    answers, a branch or tag at the commit it last had.

    Args:
        name: ``"hf-hub:OWNER/REPO"`` or ``"hf-hub:OWNER/REPO@REVISION"``.
        max_bytes: the most a card file may hold: a root card the Hub lists as larger is refused undownloaded.

    Returns:
        ``(path, source)``: the file in the cache, and ``hf-hub:OWNER/REPO@COMMIT``, the card's ``source``.

    Raises:
        CardError: huggingface_hub is missing, the repository or revision cannot be had, or its root holds
            no card or several.
    """
    repo_id, revision = parse_name(name)
    huggingface_hub = hub(CardError, f"'{name}' (a Hugging Face Hub repository)")
    options = _options()
    with _quiet("_snapshot_download", "_tree_cache", "file_download"), translated(
            CardError, f"cannot fetch the card of {name}", huggingface_hub):
        listed, unanswered = _refuse_listed_cards(name, repo_id, revision, max_bytes, options, huggingface_hub)
        try:  # where the Hub gave no answer, the cache answers: huggingface_hub waits on its API with no deadline
            folder = Path(huggingface_hub.snapshot_download(  # at the commit listed: the Hub is not asked again
                repo_id, revision=listed or revision, allow_patterns="*.toml", ignore_patterns="*/*",
                cache_dir=options.cache_dir, force_download=options.force_download,
                local_files_only=options.local_files_only or unanswered is not None, token=options.token))
        except huggingface_hub.errors.LocalEntryNotFoundError as exc:
            if unanswered is None:
                raise
            raise exc from unanswered
    commit = folder.name  # huggingface_hub keeps a revision's files in snapshots/COMMIT
    if listed is not None and listed != revision:
        _remember_revision(folder, revision or huggingface_hub.constants.DEFAULT_REVISION, commit)
    tomls = sorted(folder.glob("*.toml"))
    if len(tomls) != 1:
        raise CardError(_not_one_card(name, [p.name for p in tomls], commit))
    return tomls[0], f"{HUB_PREFIX}{repo_id}@{commit}"


def _not_one_card(name: str, cards: list[str], commit: str) -> str:
    """Why ``name``, whose root holds ``cards`` at ``commit``, is no model: it must hold exactly one."""
    shown = ", ".join(cards[:NAMED_CARDS]) + (f" and {len(cards) - NAMED_CARDS} more" if len(cards) > NAMED_CARDS
                                              else "")
    found = f"{len(cards)} *.toml files: {shown}" if len(cards) > NAMED_CARDS else shown or "no *.toml file"
    return f"{name} must hold exactly one vaezoo card at its root, found {found} (commit {commit})"


def _refuse_listed_cards(name: str, repo_id: str, revision: str | None, max_bytes: int, options: Download,
                         huggingface_hub: ModuleType) -> tuple[str | None, BaseException | None]:
    """Refuse, before anything is downloaded, a repository whose root the Hub lists with several cards or with a
    card larger than ``max_bytes``, the most a card may hold.

    The card is checked again once downloaded (a Hub may list other sizes than it serves). Nothing is asked where
    huggingface_hub keeps to its cache (offline, ``local_files_only``, a commit already cached). The Hub is given
    ``HF_HUB_ETAG_TIMEOUT`` seconds to answer, as for a file's metadata.

    Returns:
        ``(commit, unanswered)``: the commit the Hub listed, which the card is downloaded at (asking the Hub for the
        revision again would double the requests of every load), or None where it was not asked or answered with
        an error; and the transport's error where the Hub gave no answer (closed, silent, unreachable), for the
        cache to answer, else None (an answer with an error is left to ``snapshot_download``, which asks again and
        says why).
    """
    constants = huggingface_hub.constants
    if options.local_files_only or constants.HF_HUB_OFFLINE:
        return None, None
    if revision is not None and COMMIT.fullmatch(revision) and not options.force_download and (
            Path(options.cache_dir or constants.HF_HUB_CACHE).expanduser() / f"models--{repo_id.replace('/', '--')}"
            / "snapshots" / revision).is_dir():
        return None, None
    try:  # one request, which huggingface_hub does not retry: a Hub that is down is not waited for twice
        info = huggingface_hub.HfApi(token=options.token).model_info(
            repo_id, revision=revision, files_metadata=True, timeout=constants.HF_HUB_ETAG_TIMEOUT)
    except (OSError, ValueError, *huggingface_hub.errors.HfHubHTTPError.__bases__) as exc:
        answered = isinstance(exc, huggingface_hub.errors.HfHubHTTPError)
        raised_by_transport = type(exc).__module__.partition(".")[0] == _transport(huggingface_hub.errors).__name__
        return None, exc if not answered and raised_by_transport else None
    cards = {sibling.rfilename: sibling.lfs.size if sibling.lfs else sibling.size for sibling in info.siblings or []
             if "/" not in sibling.rfilename and sibling.rfilename.endswith(".toml")}
    if len(cards) > 1:
        raise CardError(_not_one_card(name, sorted(cards), info.sha))
    for path, size in cards.items():
        if isinstance(size, int) and size > max_bytes:
            raise CardError(f"{name}: the Hub lists its card {path} at {size:,} bytes, more than the {max_bytes:,} a "
                            f"card may have; it is not a card file (commit {info.sha})")
    return info.sha, None


def _remember_revision(snapshot: Path, revision: str, commit: str) -> None:
    """Record in huggingface_hub's cache (``refs/REVISION``, beside ``snapshots/COMMIT``) that ``revision`` is at
    ``commit``, as ``snapshot_download`` records a branch or tag it resolved: the card was downloaded at its commit,
    and offline (``HF_HUB_OFFLINE=1``) the branch or tag is read from this record. A cache that cannot keep it
    costs only that, as in huggingface_hub."""
    ref = snapshot.parent.parent / "refs" / revision
    try:
        if not ref.is_file() or ref.read_text() != commit:
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(commit)
    except OSError:
        pass


def hub_weights(card: Card) -> tuple[Path, bytes]:
    """The Hub weights of ``card`` and their bytes, verified as they are read
    (:func:`vaezoo.store.checksums.read_verified`): ``card.weights.file`` in the card's Hub repository (same
    commit), or the file at its ``hf://`` URL.

    Downloads them into huggingface_hub's cache unless a copy there already matches the card.

    Raises:
        WeightsError: huggingface_hub is missing, the file's path leaves its repository, or the file cannot be had
            or is not the card's file.
    """
    assert card.weights is not None
    repo_id, revision, filename = _location(card)
    return _download(repo_id, revision, filename, card.weights)


def _location(card: Card) -> tuple[str, str | None, str]:
    """``(repo_id, revision, filename)`` of ``card``'s Hub weights."""
    assert card.weights is not None
    if card.weights.file is None:
        return _url_parts(card.weights)
    assert card.source is not None, "a card's file is on the Hub only in the card's own Hub repository"
    repo_id, commit = parse_name(card.source)
    return repo_id, commit, _in_repo(card.weights.file)


def _url_parts(weights: Weights) -> tuple[str, str | None, str]:
    """``(repo_id, revision, filename)`` of weights at ``hf://OWNER/REPO[@REVISION]/PATH``."""
    match = HF_URL.fullmatch(weights.url or "")
    assert match is not None, "the card's schema checks hf:// URLs"
    revision = unquote(match["revision"]) if match["revision"] else None  # as in HfFileSystem: refs%2Fpr%2F1
    if revision is not None and (problem := revision_problem(revision)) is not None:
        raise WeightsError(f"weights URL '{weights.url}': {problem}")
    return match["repo"], revision, _in_repo(match["path"])


def _in_repo(path: str) -> str:
    """``path``, a file's path inside a repository; one that would leave it is refused."""
    parts = PurePosixPath(path)
    if parts.is_absolute() or ".." in parts.parts or "\\" in path:
        raise WeightsError(f"weights path '{path}' leaves its Hub repository; name a file inside the repository")
    return path


def _download(repo_id: str, revision: str | None, filename: str, weights: Weights) -> tuple[Path, bytes]:
    """``filename`` of ``repo_id`` at ``revision`` in huggingface_hub's cache, downloaded if the cache lacks it, and
    its bytes, whose size and sha256 are the card's: read and hashed once.

    A cached copy that matches the card is served without asking the Hub (so offline too, and with
    ``local_files_only``), unless ``force_download`` asks for a fresh one; otherwise the Hub's announced size must
    be the card's before the download starts.
    """
    from vaezoo.store.checksums import read_verified

    huggingface_hub = hub(WeightsError, f"weights on the Hugging Face Hub ({repo_id}/{filename})")
    where = f"{repo_id}@{revision or 'main'}/{filename}"
    options = _options()
    cached = _cached(repo_id, revision, filename, huggingface_hub)
    damaged = None
    if isinstance(cached, str) and not options.force_download:
        try:
            return Path(cached), read_verified(Path(cached), weights)
        except WeightsError as exc:  # a damaged copy, or the branch moved: ask the Hub again
            damaged = exc
    with _quiet("file_download"), translated(WeightsError, f"cannot download {where}", huggingface_hub), \
            _damaged_copy(damaged, where, huggingface_hub):
        if options.local_files_only:
            raise huggingface_hub.errors.LocalEntryNotFoundError(where)
        url = huggingface_hub.hf_hub_url(repo_id, filename, revision=revision)
        size = huggingface_hub.get_hf_file_metadata(url, token=options.token).size
        if size != weights.size:
            raise WeightsError(f"the Hub announces {size} bytes for {where} but the card says {weights.size}; "
                               f"refusing it")
        path = Path(huggingface_hub.hf_hub_download(repo_id, filename, revision=revision, cache_dir=options.cache_dir,
                                                    token=options.token, force_download=isinstance(cached, str)))
    return path, read_verified(path, weights)


def cached_file(weights: Weights) -> Path | None:
    """Where huggingface_hub's cache holds weights at an ``hf://`` URL, without asking the Hub; None when it does not.

    Raises:
        WeightsError: huggingface_hub is missing, or the URL's path is not one a repository can hold.
    """
    repo_id, revision, filename = _url_parts(weights)
    huggingface_hub = hub(WeightsError, f"weights on the Hugging Face Hub ({repo_id}/{filename})")
    cached = _cached(repo_id, revision, filename, huggingface_hub)
    return Path(cached) if isinstance(cached, str) else None


def _cached(repo_id: str, revision: str | None, filename: str, huggingface_hub: ModuleType) -> object:
    """huggingface_hub's answer for a cached file: its path (a str), or what it returns when it has none."""
    where = f"{repo_id}@{revision or 'main'}/{filename}"
    with translated(WeightsError, f"cannot look up {where} in huggingface_hub's cache", huggingface_hub):
        return huggingface_hub.try_to_load_from_cache(repo_id, filename, cache_dir=_DOWNLOAD.get().cache_dir,
                                                      revision=revision)


def _cache_problem(exc: OSError, constants: ModuleType) -> str | None:
    """What is wrong with huggingface_hub's cache folder, when ``exc`` is about it (a full disk, or a file beneath the
    cache or ``HF_HOME``), and what to do; None otherwise."""
    cache = Path(_DOWNLOAD.get().cache_dir or constants.HF_HUB_CACHE).expanduser()
    path = Path(exc.filename) if isinstance(exc.filename, str) else None
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    if not (full or path and (path.is_relative_to(cache) or path.is_relative_to(constants.HF_HOME))):
        return None
    setting = "cache_dir" if _DOWNLOAD.get().cache_dir is not None else "HF_HOME (or HF_HUB_CACHE)"
    return (f"huggingface_hub's cache {cache} cannot be written ({f'{path}: ' if path else ''}{exc.strerror}); "
            f"{'free some space or ' if full else ''}set {setting} to a folder you can write to")


@contextmanager
def _damaged_copy(damaged: WeightsError | None, where: str, huggingface_hub: ModuleType) -> Iterator[None]:
    """When the cached copy of ``where`` failed verification (``damaged``) and the Hub cannot be asked for
    another, say what is wrong with the copy, not that the cache lacks it."""
    errors, constants = huggingface_hub.errors, huggingface_hub.constants
    try:
        yield
    except (errors.OfflineModeIsEnabled, errors.LocalEntryNotFoundError):
        if damaged is None:
            raise
        kept = _no_fresh_copy()
        why = (f"{kept}, so no fresh copy can be downloaded" if kept else
               "HF_HUB_OFFLINE is set, so no fresh copy can be downloaded: unset HF_HUB_OFFLINE to download it again"
               if constants.HF_HUB_OFFLINE else
               f"the Hub at {constants.ENDPOINT} cannot be reached for a fresh copy; check the network "
               f"(or HF_ENDPOINT)")
        raise WeightsError(f"{damaged}; it is huggingface_hub's cached copy of {where}, and {why}") from None


@contextmanager
def _quiet(*modules: str) -> Iterator[None]:
    """huggingface_hub's loggers of ``modules`` (``file_download``, ...) at errors only inside the block: their
    warnings (each retry of a download cut short, no file matched, a file listing the cache cannot keep) are said by
    the one line of the error that follows, or by nothing when a retry succeeds. Its progress bars are off inside
    the block too where ``VAEZOO_PROGRESS`` is off, as vaezoo's own are (unless ``HF_HUB_DISABLE_PROGRESS_BARS=0``
    asks for them)."""
    from huggingface_hub import constants, utils

    bars = (not setting_on("VAEZOO_PROGRESS", default=True) and constants.HF_HUB_DISABLE_PROGRESS_BARS is not False
            and not utils.are_progress_bars_disabled())
    loggers = [logging.getLogger(f"huggingface_hub.{module}") for module in modules]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    if bars:
        utils.disable_progress_bars()
    try:
        yield
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)
        if bars:
            utils.enable_progress_bars()


@contextmanager
def translated(error: type[VaezooError], what: str, huggingface_hub: ModuleType) -> Iterator[None]:
    """Turn huggingface_hub's and its transport's exceptions inside the block into one-line ``error``s; an
    ``HF_ENDPOINT`` that can be no Hub is refused before the block (huggingface_hub, importing its API with it,
    prints its own error first)."""
    if (problem := _endpoint_problem(huggingface_hub.constants)) is not None:
        raise error(f"{what}: {problem}")
    errors = huggingface_hub.errors
    # HfHubHTTPError's bases: OSError and the transport's HTTPError (httpx's, which is no OSError); httpx's InvalidURL
    # (HF_ENDPOINT pasted with a tab) is neither
    failures = (OSError, ValueError, *errors.HfHubHTTPError.__bases__,
                getattr(_transport(errors), "InvalidURL", ValueError))
    try:
        yield
    except VaezooError:
        raise
    except failures as exc:
        raise error(f"{what}: {_reason(exc, errors, huggingface_hub.constants)}") from None
    except (TypeError, KeyError, AttributeError) as exc:  # huggingface_hub reading an answer of another shape
        if not _raised_in(exc, huggingface_hub):
            raise
        raise error(f"{what}: the Hub at {huggingface_hub.constants.ENDPOINT} answered with something other than the "
                    f"Hub's API (JSON of another shape: {type(exc).__name__}: {exc}); check HF_ENDPOINT, and any proxy "
                    f"between this machine and the Hub") from None


def _transport(errors: ModuleType) -> ModuleType:
    """The HTTP package huggingface_hub sends its requests with (httpx, or requests in older versions): the package of
    the first base of its ``HfHubHTTPError``."""
    return sys.modules[errors.HfHubHTTPError.__bases__[0].__module__.partition(".")[0]]


def _connection_errors(errors: ModuleType) -> tuple[type[BaseException], ...]:
    """The transport's errors of a connection that could not be made (no such host, nothing listening, no network):
    httpx's ``ConnectError``, requests' ``ConnectionError``."""
    transport = _transport(errors)
    kinds = (getattr(transport, "ConnectError", None), getattr(transport, "ConnectionError", None))
    return tuple(kind for kind in kinds if isinstance(kind, type))


def _endpoint_problem(constants: ModuleType) -> str | None:
    """Why ``HF_ENDPOINT`` can be no Hub: it is no http or https address, or holds a space (pasted with it); None
    where it may be one."""
    endpoint = constants.ENDPOINT
    if endpoint.startswith(("http://", "https://")) and not any(c.isspace() for c in endpoint):
        return None
    problem = ("holds a space or a control character" if endpoint.startswith(("http://", "https://")) else
               "is no http or https address")
    return (f"HF_ENDPOINT {endpoint!r} {problem}; set it to the Hub's (https://huggingface.co) or a mirror's, or "
            f"unset it")


def timed_out(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the transport's timeout (httpx's ``TimeoutException``, requests' ``Timeout``, Python's
    ``TimeoutError``), which huggingface_hub raises as it is."""
    return exc is not None and any("timeout" in kind.__name__.lower() for kind in type(exc).__mro__)


def _raised_in(exc: BaseException, module: ModuleType) -> bool:
    """Whether ``exc`` was raised in the code of the package ``module`` (its innermost frame)."""
    frame = exc.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and Path(frame.tb_frame.f_code.co_filename).is_relative_to(
        Path(module.__file__).parent)


def _reason(exc: BaseException, errors: ModuleType, constants: ModuleType) -> str:
    """Why huggingface_hub failed, in one line, with what to do."""
    offline = "HF_HUB_OFFLINE is set and it is not in huggingface_hub's cache; unset HF_HUB_OFFLINE to download it"
    if isinstance(exc, errors.OfflineModeIsEnabled | errors.LocalEntryNotFoundError):
        kept = _no_fresh_copy() or ("HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "")
        if kept and _DOWNLOAD.get().force_download:  # whatever the cache holds, it may not serve it
            return (f"force_download asks for a fresh copy, and {kept}, which keeps to huggingface_hub's cache; "
                    f"give one of them")
        if _DOWNLOAD.get().local_files_only:
            return ("local_files_only is set and huggingface_hub's cache lacks it; leave local_files_only unset to "
                    "download it")
        if _vaezoo_offline():
            return "VAEZOO_OFFLINE=1 and huggingface_hub's cache lacks it; unset VAEZOO_OFFLINE to download it"
        if constants.HF_HUB_OFFLINE:
            return offline
        if isinstance(exc.__cause__, errors.HfHubHTTPError):  # the Hub answered, with an error: say which
            return _reason(exc.__cause__, errors, constants)
        if timed_out(exc.__cause__):
            return (f"the Hub at {constants.ENDPOINT} did not answer within {constants.HF_HUB_ETAG_TIMEOUT} s and "
                    f"huggingface_hub's cache lacks it; try again later, or give it longer (HF_HUB_ETAG_TIMEOUT)")
        return (f"the Hub at {constants.ENDPOINT} cannot be reached and huggingface_hub's cache lacks it; "
                f"check the network (or HF_ENDPOINT)")
    if isinstance(exc, errors.HFValidationError):  # huggingface_hub's check of a repository's name, before any request
        return f"the Hub takes no repository named so ({str(exc).rstrip('.')}); check the name"
    if isinstance(exc, UnicodeEncodeError) and isinstance(exc.object, str) and exc.object.startswith("Bearer "):
        return (f"the Hub token holds {exc.object[exc.start:exc.end]!r}, which is not ASCII and which no HTTP header "
                f"carries; give the token as the Hub wrote it (HF_TOKEN, token=, or 'hf auth login')")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return (f"no such repository on {constants.ENDPOINT}, or it is private or gated: check the name, or log "
                f"in ('hf auth login' or HF_TOKEN)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return "the repository has no such revision (branch, tag or commit)"
    if isinstance(exc, errors.EntryNotFoundError):
        return "the repository has no such file at that revision"
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    if code in (401, 403):
        return (f"the Hub at {constants.ENDPOINT} refused it (HTTP {code}): log in with a token allowed to do it "
                f"('hf auth login' or HF_TOKEN)")
    if code == 412:  # a commit made on a parent commit the branch no longer points at
        return "another commit landed on the branch during the push (another push?); push again"
    if code == 429 or isinstance(code, int) and code >= 500:
        status = " ".join(filter(None, (str(code), getattr(response, "reason_phrase", None))))
        return f"the Hub at {constants.ENDPOINT} answered HTTP {status} (busy or failing); try again later"
    if timed_out(exc):
        return (f"the Hub at {constants.ENDPOINT} did not answer in time ({constants.HF_HUB_ETAG_TIMEOUT} s for a "
                f"file's metadata, HF_HUB_ETAG_TIMEOUT; {constants.HF_HUB_DOWNLOAD_TIMEOUT} s for its data, "
                f"HF_HUB_DOWNLOAD_TIMEOUT); try again later, or give it longer")
    if isinstance(exc, _connection_errors(errors)):  # a push's request to no Hub (a download's comes wrapped, above)
        return (f"the Hub at {constants.ENDPOINT} cannot be reached ({str(exc).strip() or type(exc).__name__}); check "
                f"the network (or HF_ENDPOINT)")
    if isinstance(exc, json.JSONDecodeError):  # a web page where the API's JSON belongs: no Hub, or a portal between
        return (f"the Hub at {constants.ENDPOINT} answered with something other than the Hub's API (not JSON); check "
                f"HF_ENDPOINT, and any proxy or login page between this machine and the Hub")
    if isinstance(exc, OSError) and os.environ.get("HF_TOKEN_PATH") and exc.filename == constants.HF_TOKEN_PATH:
        return (f"huggingface_hub's token file HF_TOKEN_PATH={exc.filename} cannot be read ({exc.strerror}); set "
                f"HF_TOKEN_PATH to the file 'hf auth login' writes, or unset it")
    if isinstance(exc, OSError) and exc.errno is not None and (problem := _cache_problem(exc, constants)):
        return problem
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    said = " ".join(lines[:2]) if lines and lines[0].endswith(":") else lines[0] if lines else type(exc).__name__
    return f"{said} (Hub {constants.ENDPOINT})"  # huggingface_hub's 'Bad request:' heads the Hub's own words
