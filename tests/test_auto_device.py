"""``device="auto"``: every public function of vaezoo and its built-in plugins that takes a device takes it.

Each goes through :func:`vaezoo.devices.usable_device`, so ``auto`` is the first accelerator the machine has,
else the CPU: with the accelerators hidden, each function must give with ``"auto"`` what it gives with
``"cpu"``. The functions are found by reading the source, so a new one that takes a device is checked here, or
said here not to take ``auto`` and why.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from kit import REPO, make_card, write_entry
from vaezoo_jointvae import labels
from vaezoo_jointvae import metrics as jointvae_metrics

from vaezoo import assemble, devices, hub
from vaezoo.entries import checkpoints
from vaezoo.evaluation import measure as evaluate
from vaezoo.evaluation import report as eval_report
from vaezoo.extras import gallery
from vaezoo.store import weights
from vaezoo.evaluation import viz
from vaezoo.training import loop
from vaezoo.data.dsprites import DSprites
from vaezoo.entries import entry as entries
from vaezoo.entries.catalog import get_card
from vaezoo.metrics import codes, entropy, evaluation, sampling
from vaezoo.signals import StopSignals
from vaezoo.training.train import train, train_seeds

# Methods of the part protocols: a plugin implements them, and vaezoo hands them a device it resolved.
PROTOCOL_METHODS = {
    "sample_prior": "a latent family's: it takes a torch device as torch's factories do (vaezoo passes the model's)",
    "card_sections": "a model's: evaluate_card hands it the device 'auto' stands for",
}
NOT_TAKING_AUTO = {
    "vaezoo.evaluation.report.evaluate_cards":
        "hands the device to evaluate_card for each card, checked with 'auto' here",
    "vaezoo.extras.study.grid_spans": "the device is a word written into the span's commands, run on another machine",
    "vaezoo.model.checked_codes": "checks that a latent family's codes are on the device it was given, the model's",
    "vaezoo.regularizers.total_correlation.log_importance_weights":
        "a tensor factory inside a regularizer's forward pass (which torch.compile traces), given a tensor's device",
    "vaezoo.training.loop.callers_rng_kept":
        "keeps the random state of the device a run already resolved, as a torch.device, across the run",
    "vaezoo.training.compiling.step_tensor":
        "the step number as a tensor beside the model's parameters, given the device the trainer already resolved",
    "vaezoo.metrics.codes.Images.batch": "a protocol, the type of the images the metrics' encoding reads: the methods "
                                         "of ImageDataset and CountedImages, each checked here",
    "vaezoo.metrics.codes.Images.batches": "as Images.batch",
}


def public_device_functions() -> set[str]:
    """The qualified names of every public function or method in vaezoo/ and plugins/ with a ``device`` parameter
    (a method of a public class; ``__init__`` and ``__call__`` count)."""
    found = set()
    for top, prefix in ((REPO / "vaezoo", "vaezoo"), (REPO / "plugins", "")):
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(part.startswith("_") for part in parts):
                continue
            module = ".".join(filter(None, (prefix, *parts)))
            for name, node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(a.arg == "device" for a in arguments):
                    found.add(f"{module}.{name}")
    return found


def _functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and (
                        not method.name.startswith("_") or method.name in ("__init__", "__call__")):
                    yield f"{node.name}.{method.name}", method


@dataclass
class Entry:
    """A toy JointVAE entry with random weights, its test split and a folder for what the calls write."""

    path: Path
    weights: Path
    tmp: Path

    @property
    def card(self):
        return get_card(str(self.path))

    @property
    def model(self):
        return assemble.load_model(self.card)

    @property
    def dataset(self):
        return assemble.card_dataset(self.card, None, "test")


def _seeded(build: Callable[[], torch.nn.Module]) -> dict:
    torch.manual_seed(0)
    return build().state_dict()


def _trained(e: Entry, device, seeds=None) -> list[dict]:
    out = e.tmp / f"train-{device}-{seeds}"
    if seeds is None:
        return [train(e.card, out, device=device, max_steps=2, evaluate=False).model.state_dict()]
    return [r.model.state_dict() for r in train_seeds(e.card, out, seeds, device=device, max_steps=2)]


def _restored(device) -> tuple[bool, torch.Tensor]:
    """Rank 0 of two takes its RNG states from a checkpoint (a CUDA state too, set only where the device is CUDA)."""
    state = torch.manual_seed(7).get_state()
    ranks = [{"cpu": state, "cuda": state}] * 2
    checkpoint = checkpoints.Checkpoint(Path("checkpoint.pt"), 0, {}, {}, {"rng_ranks": ranks}, None, None)
    torch.manual_seed(0)
    return checkpoints.restore_rng(checkpoint, 0, 2, device), torch.get_rng_state()


def _stop_requested(e: Entry, device) -> int | None:
    """A run of two ranks asks whether to stop (through a group of one process: the flag is this rank's)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=(e.tmp / f"group-{device}").as_uri(), rank=0, world_size=1)
    try:
        with StopSignals(defer=True) as signals:
            return signals.stop_requested(2, device)
    finally:
        dist.destroy_process_group()


def _gallery(e: Entry, device, draw=None) -> dict[str, bytes]:
    folder = e.tmp / f"gallery-{device}-{draw is not None}"
    if draw is None:
        index = gallery.build_gallery(folder, use_data=False, device=device, samples=4, steps=3)
    else:
        [index] = draw(folder, use_data=False, device=device)
    return {p.name: p.read_bytes() for p in sorted(index.parent.glob("*.png"))}


def _dsprites(device) -> torch.Tensor:
    packed = torch.randint(0, 256, (4, 1, 64, 8), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    return DSprites(images=packed, scale=1.0).batch(torch.arange(4), device)


INDICES = torch.arange(8)

# What each function gives on a device: the same with "auto" as with "cpu" on this machine.
CALLS: dict[str, Callable[[Entry, object], object]] = {
    "vaezoo.devices.usable_device": lambda e, d: devices.usable_device(d),
    "vaezoo.assemble.build_model": lambda e, d: _seeded(lambda: assemble.build_model(e.card, d)),
    "vaezoo.assemble.load_model": lambda e, d: assemble.load_model(e.card, d).state_dict(),
    "vaezoo.hub.build_model": lambda e, d: _seeded(lambda: hub.build_model(e.path, d)),
    "vaezoo.hub.load": lambda e, d: hub.load(e.path, d).state_dict(),
    "vaezoo.hub.from_pretrained": lambda e, d: hub.from_pretrained(str(e.path.parent), device=d)
    .state_dict(),
    "vaezoo.entries.entry.load_state_dict": lambda e, d: entries.load_state_dict(e.card, d),
    "vaezoo.store.weights.parse_safetensors":
        lambda e, d: weights.parse_safetensors(e.weights.read_bytes(), e.weights, d),
    "vaezoo.store.weights.read_safetensors": lambda e, d: weights.read_safetensors(e.weights, d),
    "vaezoo.data.base.ImageDataset.batch": lambda e, d: e.dataset.batch(INDICES, d),
    "vaezoo.data.base.ImageDataset.batches": lambda e, d: list(e.dataset.batches(32, d)),
    "vaezoo.data.dsprites.DSprites.batch": lambda e, d: _dsprites(d),
    "vaezoo.metrics.evaluation.CountedImages.batch": lambda e, d: evaluation.CountedImages(e.dataset).batch(INDICES, d),
    "vaezoo.metrics.evaluation.CountedImages.batches":
        lambda e, d: list(evaluation.CountedImages(e.dataset).batches(32, d)),
    "vaezoo.metrics.evaluation.Evaluation.__init__": lambda e, d: evaluation.Evaluation(e.model, e.dataset, d).device,
    "vaezoo.metrics.sampling.code_table": lambda e, d: sampling.code_table(e.model, e.dataset, d)[INDICES.numpy()],
    "vaezoo.metrics.codes.encode_all": lambda e, d: codes.encode_all(e.model, e.dataset, d).modes,
    "vaezoo.metrics.codes.mean_codes": lambda e, d: codes.mean_codes(e.model, e.dataset, INDICES, d),
    "vaezoo.metrics.entropy.estimate_entropies":
        lambda e, d: entropy.estimate_entropies(torch.linspace(-1, 1, 16).view(8, 2), torch.zeros(8, 2),
                                                samples=4, device=d).marginal,
    "vaezoo.metrics.spec.MetricSpec.__call__":
        lambda e, d: assemble.metric("cluster_accuracy")(e.model, e.dataset, device=d),
    "vaezoo.evaluation.measure.losses": lambda e, d: evaluate.losses(e.model, e.dataset, 0, 32, d),
    "vaezoo.evaluation.measure.evaluate": lambda e, d: evaluate.evaluate(e.model, e.card, device=d),
    "vaezoo.evaluation.report.evaluate_card": lambda e, d: eval_report.evaluate_card(e.path, device=d).results,
    "vaezoo.evaluation.viz.show": lambda e, d: viz.show(e.card, "sample", 4, seed=0, device=d)[0].tiles,
    "vaezoo.extras.gallery.build_gallery": _gallery,
    "vaezoo.extras.gallery.gallery": lambda e, d: _gallery(e, d, gallery.gallery),
    "vaezoo_jointvae.metrics.matching_of": lambda e, d: jointvae_metrics.matching_of(e.model, e.dataset, d),
    "vaezoo_jointvae.labels.measure_matching": lambda e, d: labels.measure_matching(e.card, device=d),
    "vaezoo.training.train.train": lambda e, d: _trained(e, d),
    "vaezoo.training.train.train_seeds": lambda e, d: _trained(e, d, seeds=[0, 1]),
    "vaezoo.training.loop.start_run": lambda e, d: loop.start_run(d).device,
    "vaezoo.training.loop.device_store": lambda e, d: loop.device_store(e.dataset, d).images,
    "vaezoo.training.loop.Streams.__init__": lambda e, d: vars(loop.Streams(d)),
    "vaezoo.entries.checkpoints.restore_rng": lambda e, d: _restored(d),
    "vaezoo.signals.StopSignals.stop_requested": _stop_requested,
}


def _function(qualified: str):
    """The function a qualified name of :func:`public_device_functions` names, and the docstrings that describe
    it (a class's too, for its ``__init__``)."""
    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        docs = []
        for name in parts[cut:]:
            owner = getattr(owner, name)
            docs.append(inspect.getdoc(owner) or "")
        return owner, docs[-1] if parts[-1] != "__init__" else "\n".join(docs)
    raise LookupError(qualified)


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.device == b.device and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_every_public_function_that_takes_a_device_is_checked_with_auto():
    found = public_device_functions()
    unchecked = {name for name in found if name not in CALLS and name not in NOT_TAKING_AUTO
                 and name.rsplit(".", 1)[-1] not in PROTOCOL_METHODS}
    assert not unchecked, f"check these with device='auto' in CALLS (or say why not in NOT_TAKING_AUTO): {unchecked}"
    assert not (CALLS.keys() | NOT_TAKING_AUTO.keys()) - found, "names of functions no longer there"
    undocumented = [name for name in CALLS if '"auto"' not in _function(name)[1]]
    assert not undocumented, f'these docstrings do not say that the device may be "auto": {undocumented}'


@pytest.fixture
def entry(data_plugin, tmp_path, monkeypatch) -> Entry:
    from vaezoo import plugins

    cards = tmp_path / "cards"
    path, _, weights = write_entry(cards, make_card("toy"))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(cards))
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "jointvae,testdata")  # the gallery draws these cards, not the zoo
    monkeypatch.setattr(devices, "_count", lambda kind: 0)  # "auto" stands for the CPU, on any machine
    plugins.reset()
    return Entry(path, weights, tmp_path)


@pytest.mark.parametrize("name", list(CALLS))
def test_auto_gives_what_the_device_it_stands_for_gives(entry, name):
    assert same(CALLS[name](entry, "auto"), CALLS[name](entry, "cpu"))
