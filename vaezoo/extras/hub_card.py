"""What a Hugging Face Hub user reads about a vaezoo model: ``config.json`` and the model card ``README.md``.

The Hub counts a model repository's downloads by its ``config.json``; vaezoo writes there what a Hub user looks
for (the library, the architecture, the latent layout, the input the model takes). The README is a Hub model card:
YAML metadata (``library_name: vaezoo``, tags, datasets, licence, the metrics in ``model-index`` form), then the
summary, the paper links, how to load the model, each metric beside its command, and each seed spread.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from vaezoo.context import layout_text
from vaezoo.entries.huggingface import INSTALL, hub
from vaezoo.entries.schema import HUB_PREFIX, Card
from vaezoo.errors import OutputError
from vaezoo.terminal import markdown_text, printable, shell_quote

# Hub licence identifiers a card's licence maps to by case alone; any other is "other", named by license_name.
LICENSES = frozenset({"mit", "apache-2.0", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0",
                      "cc-by-nc-4.0", "gpl-3.0", "lgpl-3.0", "mpl-2.0", "unlicense"})
URL = re.compile(r"https?://[^\s;,()<>\"'`|\\]+[^\s;,.()<>\"'`|\\]")
ARXIV = re.compile(r"https?://arxiv\.org/(?:abs|pdf)/(?P<id>\d{4}\.\d{4,5})")
PLACEHOLDER_REPO = "OWNER/REPO"
"""The repository named in a model card's usage lines before it is known (:func:`vaezoo.save_pretrained`)."""


def hub_config(card: Card) -> dict[str, Any]:
    """``config.json`` of a Hub repository holding ``card``: what the model is and what it takes, in JSON.

    Builds the (untrained) model to read its latent layout, and asks the dataset's plugin for the input's size.

    Args:
        card: the card; its ``weights`` name the file beside it.

    Returns:
        ``library_name``, ``vaezoo_version``, ``name``, ``architecture``, ``latent`` (``layout``, the text listings
        show; ``structure``, its parts as a card's ``latent`` states them; ``code_size``; and each part's
        ``[start, stop)`` in the code), ``input`` (``dataset``, ``image_size``, ``channels``, value range,
        and how the dataset's images became input), ``model`` (the architecture builder's arguments), ``plugins``
        (``{distribution: version}`` of the third-party plugins the model needs, :func:`plugin_requirements`),
        ``card`` (the card's file) and ``weights`` (file, sha256, size).
    """
    from vaezoo.assemble import build_aside, data_info

    model = build_aside(card)
    info = data_info(card)
    structure = model.latent.layout()
    layout = {"layout": layout_text(structure), "structure": [p.model_dump(exclude_none=True) for p in structure],
              "code_size": model.latent.code_size,
              "parts": {name: [part.start, part.stop] for name, part in model.part_slices.items()}}
    source = {"transform": card.input.transform, "interpolation": card.input.interpolation} if card.input else {}
    return {"library_name": "vaezoo", "vaezoo_version": card.vaezoo_version, "name": card.name,
            "architecture": card.architecture, "latent": layout,
            "input": {"dataset": card.dataset, "image_size": info.image_size, "channels": info.channels,
                      "range": [0.0, 1.0], **source},
            "model": card.model, "plugins": plugin_requirements(card, model), "card": f"{card.name}.toml",
            "weights": card.weights.model_dump(exclude_none=True) if card.weights else None}


def plugin_requirements(card: Card, model=None) -> dict[str, str]:
    """``{distribution: version}`` of the third-party plugins ``card``'s model, dataset and metrics need
    (:func:`vaezoo.assemble.third_party_plugins`), each at the version the card was made with."""
    from vaezoo.assemble import third_party_plugins

    return {info.distribution: info.version for info in third_party_plugins(card, model)}


def paper_links(card: Card) -> list[str]:
    """The URLs the card's ``paper`` names, in order, each once."""
    return list(dict.fromkeys(URL.findall(card.paper)))


def model_card(card: Card, repo_id: str | None = None) -> str:
    """A Hub model card (``README.md``) for ``card``: YAML metadata, then what the model is and how to load it.

    The metadata gives ``library_name: vaezoo``, tags (with ``arxiv:ID`` for each arXiv paper, which the Hub links),
    the licence, the dataset, and the card's finite metrics as ``model-index`` results; the body gives the paper
    links, every metric beside its command, and each metric's spread over seeds.

    Args:
        card: the vaezoo card.
        repo_id: ``OWNER/REPO`` the card is pushed to; None writes ``OWNER/REPO`` in the usage lines.

    Returns:
        The README's text.
    """
    huggingface_hub = hub(OutputError, "a Hub model card")
    repo = repo_id or PLACEHOLDER_REPO
    licence = card.license.strip().lower()
    licence_fields = {"license": licence} if licence in LICENSES else {
        "license": "other", "license_name": re.sub(r"[^a-z0-9]+", "-", licence).strip("-") or "unknown"}
    results = [huggingface_hub.EvalResult(task_type="image-feature-extraction",
                                          task_name="disentangled representation learning",
                                          dataset_type=card.dataset, dataset_name=card.dataset,
                                          metric_type=printable(name), metric_name=printable(name),
                                          metric_value=metric.value)
               for name, metric in card.metrics.items() if math.isfinite(metric.value)]
    plugins = plugin_requirements(card)
    links = paper_links(card)
    arxiv = [f"arxiv:{m['id']}" for m in map(ARXIV.match, links) if m]
    tags = list(dict.fromkeys(["vaezoo", "vae", "disentanglement", card.architecture, *card.latent_families, *arxiv]))
    metadata = huggingface_hub.ModelCardData(library_name="vaezoo", tags=tags, datasets=[card.dataset],
                                             model_name=card.name, eval_results=results or None, **licence_fields)
    lines = ["---", metadata.to_yaml(), "---", "", f"# {markdown_text(card.name)}", "", markdown_text(card.summary), "",
             f"Paper: {markdown_text(card.paper)}", ""]
    lines += [f"- <{link}>" for link in links] + ([""] if links else [])
    lines += [f"A [vaezoo](https://pypi.org/project/vaezoo/) model: architecture `{_code(card.architecture)}`, "
              f"trained on `{_code(card.dataset)}`"
              + (f", latent {markdown_text(card.latent_text)}" if card.latent else "")
              + (f", {card.parameters:,} parameters" if card.parameters else "") + ".", "",
              "## Use", "", "```python", "import vaezoo", "", f'model = vaezoo.load("{HUB_PREFIX}{repo}")',
              "# or, with the options of PyTorchModelHubMixin's from_pretrained:",
              f'model = vaezoo.from_pretrained("{repo}", revision="main")', "```", "", "```bash",
              " ".join([INSTALL, *(shell_quote(name, for_terminal=False) for name in plugins)]),
              f"vaezoo info {HUB_PREFIX}{repo}", "```", ""]
    if plugins:
        lines += ["It needs the vaezoo plugin " + ", ".join(f"`{_code(name)}` (made with `{_code(version)}`)"
                                                          for name, version in plugins.items()) + ".", ""]
    if card.weights is not None:
        lines.append(f"The weights are `{_code(card.weights.file or card.weights.url)}`, sha256 "
                     f"`{card.weights.sha256}`, checked before loading.")
    if card.metrics:
        lines += ["", "## Metrics", "", "| metric | value | command | note |", "| --- | --- | --- | --- |"]
        lines += [f"| {markdown_text(name)} | {metric.value:.6g} | {markdown_text(metric.command)} | "
                  f"{markdown_text(metric.note or '')} |" for name, metric in card.metrics.items()]
    spreads = {name: metric.seeds for name, metric in card.metrics.items() if metric.seeds is not None}
    if spreads:
        lines += ["", "## Seeds", "", "Each metric over every complete run of the recipe, one per seed: the shipped "
                  "weights are one of them.", "",
                  "| metric | runs | median | min | max | each seed | shipped seed |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {markdown_text(name)} | {s.n} | {s.median:.4g} | {s.min:.4g} | {s.max:.4g} | "
                  + ", ".join(f"{run.seed}: {run.value:.4g}" for run in s.runs)
                  + f" | {s.shipped} ({markdown_text(s.selection)}) |" for name, s in spreads.items()]
        commands = dict.fromkeys(s.command for s in spreads.values())
        lines += ["", "Made by " + "; ".join(f"`{_code(command)}`" for command in commands) + "."]
    text = "\n".join(lines) + "\n"
    return f"{text}\n<!-- {STAMP} {hashlib.sha256(text.encode()).hexdigest()} -->\n"


STAMP = "vaezoo wrote this file from the card; sha256 of the text above:"
"""The last line of a README :func:`model_card` wrote, with the digest of the text above it: a README whose text
still matches is vaezoo's, unedited (:func:`written_by_vaezoo`)."""


def written_by_vaezoo(text: str) -> bool:
    """Whether ``text`` is a README :func:`model_card` wrote and nobody has edited since."""
    match = re.search(rf"\n<!-- {re.escape(STAMP)} ([0-9a-f]{{64}}) -->\n\Z", text)
    return match is not None and hashlib.sha256(text[:match.start()].encode()).hexdigest() == match[1]


def _code(value: object) -> str:
    """``value`` inside a Markdown code span: a backtick would end the span, so it is dropped."""
    return printable(value).replace("`", "'")
