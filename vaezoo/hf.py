"""The Hugging Face Hub: cards and weights from Hub repositories, and pushing a card to one.

A Hub repository holds one vaezoo card (a TOML file at its root) and the weights it names; it is asked
for as ``hf-hub:OWNER/REPO`` or ``hf-hub:OWNER/REPO@REVISION``. A card anywhere may also name weights as
``hf://OWNER/REPO/PATH`` or ``hf://OWNER/REPO@REVISION/PATH``. huggingface_hub (the optional extra
``vaezoo[hub]``) makes every transfer, so its cache, its endpoint (``HF_ENDPOINT``), its offline mode
(``HF_HUB_OFFLINE``) and its tokens apply; vaezoo still checks each weights file against the card's size
before downloading it and against its sha256 before anything reads it.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import unquote

from vaezoo.cards import HF_URL, HUB_PREFIX, Card, Weights, parse_card, write_card
from vaezoo.errors import CardError, OutputError, VaezooError, WeightsError
from vaezoo.files import atomic_save, atomic_write

if TYPE_CHECKING:
    from huggingface_hub import CommitInfo

INSTALL = 'pip install "vaezoo[hub]"'
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # OWNER/REPO
_NAME = re.compile(rf"{HUB_PREFIX}(?P<repo>{REPO_ID.pattern})(?:@(?P<revision>[^\s@]+))?")
# Hub licence identifiers a card's licence maps to by case alone; any other is "other", named by license_name.
_LICENSES = frozenset({"mit", "apache-2.0", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0",
                       "cc-by-nc-4.0", "gpl-3.0", "lgpl-3.0", "mpl-2.0", "unlicense"})


def hub(error: type[VaezooError], subject: str) -> ModuleType:
    """huggingface_hub, or ``error`` saying that ``subject`` needs the ``hub`` extra."""
    try:
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.errors
    except ImportError:
        raise error(f"{subject} needs huggingface_hub, which is not installed; install it with {INSTALL}") from None
    return huggingface_hub


def parse_name(name: str) -> tuple[str, str | None]:
    """``(repo_id, revision)`` of ``hf-hub:OWNER/REPO[@REVISION]``; the revision is None when not given."""
    match = _NAME.fullmatch(name)
    if match is None:
        raise CardError(f"'{name}' is not a Hub model; write hf-hub:OWNER/REPO or hf-hub:OWNER/REPO@REVISION")
    return match["repo"], match["revision"]


def load_card(name: str) -> Card:
    """The card of the Hub repository ``hf-hub:OWNER/REPO[@REVISION]``, downloaded into huggingface_hub's cache.

    Only the repository's root ``*.toml`` files are downloaded here; the weights follow when a model loads
    (:func:`repo_file`). A revision that is not a commit hash (a branch, a tag) is resolved to its commit,
    which the card keeps as its :attr:`~vaezoo.cards.Card.source`. Offline (``HF_HUB_OFFLINE=1``) the cache
    answers, a branch or tag at the commit it last had.

    Args:
        name: ``"hf-hub:OWNER/REPO"`` or ``"hf-hub:OWNER/REPO@REVISION"``.

    Returns:
        The card; ``card.path`` is its file in the cache, ``card.source`` is ``hf-hub:OWNER/REPO@COMMIT``.

    Raises:
        CardError: huggingface_hub is missing, the repository or revision cannot be had, or its root holds
            no card or several.
    """
    repo_id, revision = parse_name(name)
    huggingface_hub = hub(CardError, f"'{name}' (a Hugging Face Hub repository)")
    snapshot_log = logging.getLogger("huggingface_hub._snapshot_download")
    level = snapshot_log.level
    snapshot_log.setLevel(logging.ERROR)  # its warning that no file matched: the error below says it in one line
    try:
        with translated(CardError, f"cannot fetch the card of {name}", huggingface_hub):
            folder = Path(huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns="*.toml",
                                                            ignore_patterns="*/*"))
    finally:
        snapshot_log.setLevel(level)
    commit = folder.name  # huggingface_hub keeps a revision's files in snapshots/COMMIT
    tomls = sorted(folder.glob("*.toml"))
    if len(tomls) != 1:
        found = ", ".join(p.name for p in tomls) if tomls else "no *.toml file"
        raise CardError(f"{name} must hold exactly one vaezoo card at its root, found {found} (commit {commit})")
    return parse_card(tomls[0], source=f"{HUB_PREFIX}{repo_id}@{commit}")


def repo_file(card: Card) -> Path:
    """The weights file of a card from a Hub repository: ``card.weights.file`` in that repository, same commit.

    Downloads it into huggingface_hub's cache unless a copy there already matches the card.

    Raises:
        WeightsError: the file's path leaves the repository, or the file cannot be had or has another size.
    """
    assert card.source is not None and card.weights is not None and card.weights.file is not None
    repo_id, commit = parse_name(card.source)
    return _download(repo_id, commit, _in_repo(card.weights.file), card.weights)


def download_url(weights: Weights) -> Path:
    """The verified local copy of weights at ``hf://OWNER/REPO[@REVISION]/PATH``, from huggingface_hub's cache.

    Args:
        weights: a card's weights entry whose ``url`` is an ``hf://`` URL.

    Returns:
        The file in huggingface_hub's cache, whose size and sha256 are the card's.

    Raises:
        WeightsError: huggingface_hub is missing, the file cannot be had, or it is not the card's file.
    """
    from vaezoo.weights import verify

    match = HF_URL.fullmatch(weights.url or "")
    assert match is not None, "the card's schema checks hf:// URLs"
    revision = unquote(match["revision"]) if match["revision"] else None  # as in HfFileSystem: refs%2Fpr%2F1
    path = _download(match["repo"], revision, _in_repo(match["path"]), weights)
    verify(path, weights)
    return path


def _in_repo(path: str) -> str:
    """``path``, a file's path inside a repository; one that would leave it is refused."""
    parts = PurePosixPath(path)
    if parts.is_absolute() or ".." in parts.parts:
        raise WeightsError(f"weights path '{path}' leaves its Hub repository; name a file inside the repository")
    return path


def _download(repo_id: str, revision: str | None, filename: str, weights: Weights) -> Path:
    """``filename`` of ``repo_id`` at ``revision`` in huggingface_hub's cache, downloaded if the cache lacks it.

    A cached copy that matches the card is served without asking the Hub (so offline too); otherwise the
    Hub's announced size must be the card's before the download starts.
    """
    from vaezoo.weights import verify

    huggingface_hub = hub(WeightsError, f"weights on the Hugging Face Hub ({repo_id}/{filename})")
    where = f"{repo_id}@{revision or 'main'}/{filename}"
    cached = huggingface_hub.try_to_load_from_cache(repo_id, filename, revision=revision)
    if isinstance(cached, str):
        try:
            verify(Path(cached), weights)
            return Path(cached)
        except WeightsError:  # a damaged copy, or the branch moved: ask the Hub again
            pass
    with translated(WeightsError, f"cannot download {where}", huggingface_hub):
        url = huggingface_hub.hf_hub_url(repo_id, filename, revision=revision)
        size = huggingface_hub.get_hf_file_metadata(url).size
        if size != weights.size:
            raise WeightsError(f"the Hub announces {size} bytes for {where} but the card says {weights.size}; "
                               f"refusing it")
        return Path(huggingface_hub.hf_hub_download(repo_id, filename, revision=revision,
                                                    force_download=isinstance(cached, str)))


@contextmanager
def translated(error: type[VaezooError], what: str, huggingface_hub: ModuleType) -> Iterator[None]:
    """Turn huggingface_hub's and its transport's exceptions inside the block into one-line ``error``s."""
    errors = huggingface_hub.errors
    # HfHubHTTPError's bases: OSError and the transport's HTTPError (httpx's, which is no OSError)
    failures = (OSError, ValueError, *errors.HfHubHTTPError.__bases__)
    try:
        yield
    except VaezooError:
        raise
    except failures as exc:
        raise error(f"{what}: {_reason(exc, errors, huggingface_hub.constants)}") from None


def _reason(exc: BaseException, errors: ModuleType, constants: ModuleType) -> str:
    """Why huggingface_hub failed, in one line, with what to do."""
    offline = "HF_HUB_OFFLINE is set and it is not in huggingface_hub's cache; unset HF_HUB_OFFLINE to download it"
    if isinstance(exc, errors.OfflineModeIsEnabled | errors.LocalEntryNotFoundError):
        return offline if constants.HF_HUB_OFFLINE else (
            f"the Hub at {constants.ENDPOINT} cannot be reached and huggingface_hub's cache lacks it; "
            f"check the network (or HF_ENDPOINT)")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return (f"no such repository on {constants.ENDPOINT}, or it is private or gated: check the name, or log "
                f"in ('hf auth login' or HF_TOKEN)")
    if isinstance(exc, errors.RevisionNotFoundError):
        return "the repository has no such revision (branch, tag or commit)"
    if isinstance(exc, errors.EntryNotFoundError):
        return "the repository has no such file at that revision"
    code = getattr(getattr(exc, "response", None), "status_code", None)
    if code in (401, 403):
        return (f"the Hub at {constants.ENDPOINT} refused it (HTTP {code}): log in with a token allowed to do it "
                f"('hf auth login' or HF_TOKEN)")
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{lines[0] if lines else type(exc).__name__} (Hub {constants.ENDPOINT})"


def stage(card: Card, repo_id: str, folder: Path) -> list[Path]:
    """Write into ``folder`` what :func:`push` uploads: the card, its weights beside it, and ``README.md``.

    The staged card names its weights as the file beside it, so the repository is a card folder;
    the README is a Hub model card generated from the vaezoo card (see :func:`model_card`).

    Args:
        card: the card to push; its weights are fetched and verified first.
        repo_id: ``OWNER/REPO``, for the README's usage lines.
        folder: where the files go; created if needed.

    Returns:
        The files written, card first.

    Raises:
        WeightsError: the card has no weights, or they do not verify.
    """
    from vaezoo.weights import fetch

    hub(OutputError, "vaezoo push")  # said before any download: the model card needs huggingface_hub
    if card.weights is None:
        raise WeightsError(f"card '{card.name}' has no weights to push; train it first ('vaezoo train')")
    source = fetch(card)
    weights = folder / f"{card.name}.safetensors"
    pushed = card.model_copy(update={"weights": Weights(file=weights.name, sha256=card.weights.sha256,
                                                        size=card.weights.size)})
    card_file = folder / f"{card.name}.toml"
    write_card(pushed, card_file)
    atomic_save(weights, lambda tmp: shutil.copyfile(source, tmp))
    readme = folder / "README.md"
    atomic_write(readme, model_card(pushed, repo_id).encode())
    return [card_file, weights, readme]


def model_card(card: Card, repo_id: str) -> str:
    """A Hub model card (``README.md``) for ``card``: YAML metadata, then what the model is and how to load it.

    The metadata gives ``library_name: vaezoo``, tags, the licence, the dataset, and the card's metrics as
    ``model-index`` results; every metric's command is in the body's table.

    Args:
        card: the vaezoo card.
        repo_id: ``OWNER/REPO`` the card is pushed to.

    Returns:
        The README's text.
    """
    huggingface_hub = hub(OutputError, "a Hub model card")
    licence = card.license.strip().lower()
    licence_fields = {"license": licence} if licence in _LICENSES else {
        "license": "other", "license_name": re.sub(r"[^a-z0-9]+", "-", licence).strip("-") or "unknown"}
    results = [huggingface_hub.EvalResult(task_type="image-feature-extraction",
                                          task_name="disentangled representation learning",
                                          dataset_type=card.dataset, dataset_name=card.dataset, metric_type=name,
                                          metric_name=name, metric_value=metric.value)
               for name, metric in card.metrics.items()]
    metadata = huggingface_hub.ModelCardData(library_name="vaezoo",
                                             tags=["vaezoo", "vae", "disentanglement", card.architecture],
                                             datasets=[card.dataset], model_name=card.name,
                                             eval_results=results or None, **licence_fields)
    lines = ["---", metadata.to_yaml(), "---", "", f"# {_markdown(card.name)}", "", _markdown(card.summary), "",
             f"Paper: {_markdown(card.paper)}", "",
             f"A [vaezoo](https://pypi.org/project/vaezoo/) model: architecture `{_code(card.architecture)}`, "
             f"trained on `{_code(card.dataset)}`"
             + (f", latent {_markdown(card.latent)}" if card.latent else "")
             + (f", {card.parameters:,} parameters" if card.parameters else "") + ".", "",
             "## Use", "", "```python", "import vaezoo", "",
             f'model = vaezoo.load("{HUB_PREFIX}{repo_id}")', "```", "", "```bash", INSTALL,
             f"vaezoo info {HUB_PREFIX}{repo_id}", "```", "",
             f"The weights are `{_code(card.weights.file)}`, sha256 `{card.weights.sha256}`, checked before loading."]
    if card.metrics:
        lines += ["", "## Metrics", "", "| metric | value | command |", "| --- | --- | --- |"]
        lines += [f"| {_markdown(name)} | {metric.value} | {_markdown(metric.command)} |"
                  for name, metric in card.metrics.items()]
    return "\n".join(lines) + "\n"


_MARKDOWN_SPECIAL = set("\\`*_[]<>|&#")


def _markdown(value: object) -> str:
    """``value`` as Markdown showing it as written, on one line (formatting characters escaped)."""
    from vaezoo.terminal import printable

    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in printable(value))


def _code(value: object) -> str:
    """``value`` inside a Markdown code span: a backtick would end the span, so it is dropped."""
    from vaezoo.terminal import printable

    return printable(value).replace("`", "'")


def push(card: Card, repo_id: str, folder: Path | None = None, private: bool = False) -> CommitInfo:
    """Upload ``card``, its weights and a Hub model card to ``repo_id`` in one commit.

    The repository is created if needed. Other ``*.toml`` and ``*.safetensors`` files at its root (an earlier
    card and its weights) are removed in the same commit, so that it holds exactly one card.

    Args:
        card: the card to push (its weights are fetched and verified).
        repo_id: ``OWNER/REPO``.
        folder: stage the files here (kept); default a temporary folder, removed afterwards.
        private: create the repository private (an existing one keeps its visibility).

    Returns:
        huggingface_hub's ``CommitInfo`` (``.oid`` is the commit).

    Raises:
        OutputError: huggingface_hub is missing, or the Hub refused (not logged in, no such owner, offline).
    """
    huggingface_hub = hub(OutputError, "pushing to the Hugging Face Hub")
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="vaezoo-push-") as tmp:
            return push(card, repo_id, Path(tmp), private)
    files = stage(card, repo_id, folder)
    api = huggingface_hub.HfApi()
    with translated(OutputError, f"cannot push '{card.name}' to {repo_id}", huggingface_hub):
        api.create_repo(repo_id, private=private, exist_ok=True)
        replaced = [p for p in api.list_repo_files(repo_id) if "/" not in p and p.endswith((".toml", ".safetensors"))
                    and p not in {f.name for f in files}]
        operations = [huggingface_hub.CommitOperationAdd(path_in_repo=f.name, path_or_fileobj=str(f)) for f in files]
        operations += [huggingface_hub.CommitOperationDelete(path_in_repo=p) for p in replaced]
        return api.create_commit(repo_id, operations, commit_message=f"vaezoo push {card.name}")
