"""Publishing a card to the Hugging Face Hub: its card, its weights and a Hub model card, in one commit."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from vaezoo.cards import HUB_PREFIX, Card, Weights, write_card
from vaezoo.errors import OutputError, WeightsError
from vaezoo.files import atomic_write
from vaezoo.hf import INSTALL, hub, translated
from vaezoo.weights import fetch_verified

if TYPE_CHECKING:
    from huggingface_hub import CommitInfo

# Hub licence identifiers a card's licence maps to by case alone; any other is "other", named by license_name.
LICENSES = frozenset({"mit", "apache-2.0", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0",
                       "cc-by-nc-4.0", "gpl-3.0", "lgpl-3.0", "mpl-2.0", "unlicense"})


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
    hub(OutputError, "vaezoo push")  # said before any download: the model card needs huggingface_hub
    if card.weights is None:
        raise WeightsError(f"card '{card.name}' has no weights to push; train it first ('vaezoo train')")
    _, data = fetch_verified(card)  # the bytes verified are the bytes pushed
    weights = folder / f"{card.name}.safetensors"
    pushed = card.model_copy(update={"weights": Weights(file=weights.name, sha256=card.weights.sha256,
                                                        size=card.weights.size)})
    card_file = folder / f"{card.name}.toml"
    write_card(pushed, card_file)
    atomic_write(weights, data)
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
    licence_fields = {"license": licence} if licence in LICENSES else {
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
