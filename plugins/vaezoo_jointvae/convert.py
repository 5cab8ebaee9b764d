"""Import checkpoints of the original JointVAE code as safetensors weights plus a zoo card.

Dupont (2018), "Learning Disentangled Joint Continuous and Discrete Representations";
code and released models: https://github.com/Schlumberger/joint-vae (MIT licence).
Its checkpoints are plain state dicts of ``jointvae.models.VAE``. The layer stacks
have the same layout as ours, so the conversion renames their prefixes and stacks
the latent heads (``fc_mean``, ``fc_log_var``, ``fc_alphas.0``, ...) into our single
``head``, in the joint latent's order: continuous first, then each categorical.
The original decoder ends in a sigmoid; ours outputs the logits of a Bernoulli
likelihood, whose mean is that same sigmoid.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from vaezoo.errors import UnknownNameError, WeightsError
from vaezoo.registry import close_matches
from vaezoo.store.limits import check_torch_zip, unusable

PAPER = ("Dupont (2018), Learning Disentangled Joint Continuous and Discrete Representations, NeurIPS. "
         "https://arxiv.org/abs/1804.00104")
SOURCE = "https://github.com/Schlumberger/joint-vae"
COMMIT = "80fa464"
"""The commit of :data:`SOURCE` whose ``trained_models/`` hold the checkpoints of :data:`RELEASES`."""
COPYRIGHT = "Copyright (c) 2018 Schlumberger"
"""The copyright line of the original code's MIT LICENSE, which covers its released models."""
TEMPERATURE = 0.67  # the original code's default; checkpoints do not store it

# sha256 of each trained_models/RELEASE/model.pt at COMMIT -> RELEASE.
RELEASES = {
    "6bb4cef31bdc19e36e725d57d98c91901a390dbfa11bb0c5e79a95b3d2dbd8da": "mnist",
    "d3cde91b06da06b24745dbace6fa72afb3e0902542ff8eae62c2072e00344df1": "fashion",
    "86f4ba5b864f619ec412ed7c9906140d178128252f444ded0c949112a788e0cc": "dsprites",
    "8d84c03186bd4a6ac5f0685a8a8f9fe97db722e6c9e43ad7ca40fefe8729891a": "chairs",
    "4b513e2038c7ea2942637e83f7a19f6d99fd16dff1268dd337b101001008d53f": "celeba",
}

# Original key prefix -> ours. Layer indices inside each nn.Sequential are the same.
PREFIXES = {
    "img_to_features.": "encoder.features.",
    "features_to_hidden.": "encoder.hidden.",
    "latent_to_features.": "decoder.hidden.",
    "features_to_img.": "decoder.features.",
}
ALPHAS_KEY = re.compile(r"fc_alphas\.(\d+)\.(?:weight|bias)")

Capacity = tuple[float, float, int, float]  # [min, max, iterations, gamma], as in the original Trainer

@dataclass(frozen=True)
class OriginalSetup:
    """How the original code fed and trained a model of one dataset.

    The input geometry is the registered dataset's (with ``data_options``, as the original
    ``utils/dataloaders.py`` read it); the recipe is that of the released model in
    ``trained_models/<release>/specs.json``. Those files list several epoch counts
    (e.g. ``[100, 101, 102]``); the first is taken.

    Attributes:
        input: how the dataset's images become the model's input, in words (the card's ``[input]``).
        interpolation: the PIL filter that resized them.
        categorical_metric: the metric that scores the first categorical part, if the dataset has
            what it needs (labels or a shape factor).
        disentanglement: whether the card lists the registered disentanglement suite
            (:func:`vaezoo.assemble.metric_suite`), the scores of the continuous code against the dataset's
            ground-truth factors.
    """

    release: str
    continuous_capacity: Capacity
    discrete_capacity: Capacity
    epochs: int
    lr: float
    input: str
    interpolation: str = "bilinear"
    batch_size: int = 64
    categorical_metric: str | None = None
    disentanglement: bool = False
    data_options: dict[str, Any] = field(default_factory=dict)


SETUPS: dict[str, OriginalSetup] = {
    "mnist": OriginalSetup("mnist", (0.0, 5.0, 25000, 30.0), (0.0, 5.0, 25000, 30.0), 100, 5e-4,
                           "MNIST's 28x28 uint8 digits resized to 32x32 with PIL's bilinear filter, divided by 255",
                           categorical_metric="cluster_accuracy", data_options={"image_size": 32}),
    "fashion_mnist": OriginalSetup("fashion", (0.0, 5.0, 50000, 100.0), (0.0, 10.0, 50000, 100.0), 100, 5e-4,
                                   "Fashion-MNIST's 28x28 uint8 images resized to 32x32 with PIL's bilinear filter, "
                                   "divided by 255",
                                   categorical_metric="cluster_accuracy", data_options={"image_size": 32}),
    "dsprites": OriginalSetup("dsprites", (0.0, 40.0, 300000, 150.0), (0.0, 1.1, 300000, 150.0), 29, 5e-4,
                              "dSprites' 64x64 binary images (pixels 0 or 1) as floats 0.0 and 1.0, not resized; give "
                              "the official file's 0/1 arrays as bool or float, not as uint8 (read as 0-255)",
                              categorical_metric="shape_accuracy", disentanglement=True,
                              data_options={"source": "render"}),
    "chairs": OriginalSetup("chairs", (0.0, 30.0, 100000, 300.0), (0.0, 5.0, 100000, 300.0), 100, 1e-4,
                            "the chair renders center-cropped and resized to 64x64 beforehand (the original code's "
                            "rendered_chairs_64 folder), made grey as PIL's convert('L') does, divided by 255"),
    "celeba": OriginalSetup("celeba", (0.0, 50.0, 100000, 100.0), (0.0, 10.0, 100000, 100.0), 100, 5e-4,
                            "CelebA's aligned 178x218 RGB faces resized whole (no crop) to 64x64 with PIL's "
                            "Lanczos filter, divided by 255", interpolation="lanczos",
                            data_options={"image_size": 64}),
}


def read_original(path: Path) -> dict[str, Tensor]:
    """Read a checkpoint with ``torch.load(weights_only=True)``; refuse anything but a state dict of tensors.

    Args:
        path: the ``.pt`` file the original code saved with ``torch.save(model.state_dict(), path)``.

    Returns:
        The state dict, on the CPU.
    """
    if not path.is_file():
        raise WeightsError(f"checkpoint {path} does not exist or is not a file")
    try:
        check_torch_zip(path)
    except ValueError as exc:
        raise WeightsError(f"{path} is not a checkpoint torch.save wrote: {exc}; give the file the original code "
                           f"saved with torch.save(model.state_dict(), path)") from None
    try:
        with warnings.catch_warnings():  # torch warns of a pickle protocol, then refuses the file: one line says it
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:  # the file, not its contents: e.g. no permission to read it
        raise WeightsError(f"cannot read checkpoint {path}: {exc.strerror or exc}; make it readable, or give a "
                           f"copy you can read") from None
    except Exception as exc:  # weights_only refuses arbitrary objects with UnpicklingError, corrupt files vary
        raise WeightsError(f"{path} is not a plain state dict that torch.load(weights_only=True) reads "
                           f"({_reason(exc)}); vaezoo never unpickles arbitrary objects") from None
    is_dict = isinstance(state, dict)
    if not is_dict or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        kinds = sorted({type(v).__name__ for v in state.values()}) if is_dict else [type(state).__name__]
        raise WeightsError(f"{path} holds {', '.join(kinds)}, not a state dict of tensors; the original code "
                           f"saves model.state_dict(), extract that from a larger checkpoint first")
    if problem := unusable(state):
        raise WeightsError(f"{path} {problem}; a checkpoint of model.state_dict() holds none, refusing it")
    return state


_UNPICKLER = "WeightsUnpickler error:"
_TORCH_ADVICE = ("Please file an issue", "Check the documentation")


def _reason(exc: Exception) -> str:
    """The informative line of a ``torch.load`` error, which is often several paragraphs long: what the weights-only
    unpickler refused, without torch's advice around it; else the error's type and first line; else its type."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if lines and lines[0].startswith("Weights only load failed"):  # the advice to retry with weights_only=False
        reasons = [line.split(_UNPICKLER, 1)[1].split(" Please use", 1)[0].strip() if _UNPICKLER in line else line
                   for line in lines[1:]]
        reasons = [line for line in reasons if line and not line.startswith(_TORCH_ADVICE)]
        if reasons:
            return reasons[0]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def latent_layout(state: dict[str, Tensor]) -> tuple[int, list[int]]:
    """The latent layout of an original checkpoint, read from the shapes of its heads.

    Returns:
        ``(continuous, discrete)``: the rows of ``fc_mean`` (0 without it) and of each
        ``fc_alphas.i`` in order (``[]`` without them).
    """
    gaussian = any(key.split(".")[0] in ("fc_mean", "fc_log_var") for key in state)
    indices = sorted({int(m.group(1)) for key in state if (m := ALPHAS_KEY.fullmatch(key))})
    if indices != list(range(len(indices))):
        raise WeightsError(f"the categorical heads are numbered {indices}; expected fc_alphas.0, fc_alphas.1, ...")
    if not gaussian and not indices:
        raise WeightsError("the checkpoint has neither fc_mean nor fc_alphas.0; it is not a checkpoint of the "
                           "original JointVAE code")
    _check_heads(state, (["fc_mean", "fc_log_var"] if gaussian else []) + [f"fc_alphas.{i}" for i in indices])
    continuous = _rows(state, "fc_mean.weight") if gaussian else 0
    discrete = [_rows(state, f"fc_alphas.{i}.weight") for i in indices]
    if gaussian and not continuous:  # else blamed on the card ('section model does not fit') or on --dataset
        raise WeightsError("fc_mean has 0 rows; a continuous head has one row per dimension, at least 1")
    if few := [f"fc_alphas.{i}: {k}" for i, k in zip(indices, discrete) if k < 2]:
        raise WeightsError(f"categorical heads of fewer than 2 rows ({', '.join(few)}); a categorical head has one "
                           f"row per category, at least 2")
    return continuous, discrete


def _check_heads(state: dict[str, Tensor], heads: list[str]) -> None:
    """Refuse ``state`` unless it holds the weight and the bias of each of the latent ``heads``."""
    missing = [f"{h}.{p}" for h in heads for p in ("weight", "bias") if f"{h}.{p}" not in state]
    if missing:
        raise WeightsError(f"the checkpoint lacks the latent heads {missing}")


def _rows(state: dict[str, Tensor], key: str) -> int:
    """The output size of the linear layer whose weight is ``state[key]``."""
    if state[key].dim() != 2:
        raise WeightsError(f"{key} has shape {tuple(state[key].shape)}; a linear layer's weight is 2-D")
    return state[key].shape[0]


def to_vaezoo(state: dict[str, Tensor], continuous: int, categorical_parts: int) -> dict[str, Tensor]:
    """Rename an original state dict onto :func:`~vaezoo_jointvae.model.build_jointvae`'s keys.

    Keys of no known layer (and heads the layout does not use) are kept as they are, so
    that loading reports them as unexpected.

    Args:
        state: the original state dict.
        continuous: continuous dimensions (0 for none).
        categorical_parts: number of categorical heads.
    """
    heads = (["fc_mean", "fc_log_var"] if continuous else []) + [f"fc_alphas.{i}" for i in range(categorical_parts)]
    _check_heads(state, heads)
    if continuous and _rows(state, "fc_log_var.weight") != continuous:
        raise WeightsError(f"fc_mean has {continuous} rows but fc_log_var has {state['fc_log_var.weight'].shape[0]}")
    used = {f"{h}.{p}" for h in heads for p in ("weight", "bias")}
    out = {}
    for key, tensor in state.items():
        if key in used:
            continue
        prefix = next((p for p in PREFIXES if key.startswith(p)), None)
        out[PREFIXES[prefix] + key[len(prefix):] if prefix else key] = tensor
    for param in ("weight", "bias"):
        tensors = [state[f"{h}.{param}"] for h in heads]
        try:
            out[f"head.{param}"] = torch.cat(tensors)
        except RuntimeError:
            shapes = {h: tuple(t.shape) for h, t in zip(heads, tensors)}
            raise WeightsError(f"the latent heads' {param}s do not have matching shapes: {shapes}") from None
    return out


def convert_original(path: Path, out: Path, dataset: str, name: str | None = None) -> Path:
    """Convert a checkpoint of the original JointVAE code into ``out/NAME.safetensors`` and ``out/NAME.toml``.

    The card describes the model (the latent layout read from the checkpoint, the recipe the
    original code used for ``dataset``; the input geometry is the registered dataset's) and carries
    no metrics: ``vaezoo eval out/NAME.toml --write`` measures and records them. A checkpoint
    released with the original code (:data:`RELEASES`, recognised by its sha256) gets its
    provenance, licence and copyright on the card, and must be converted with its own dataset.

    Args:
        path: the original checkpoint (a plain state dict).
        out: output directory.
        dataset: one of :data:`SETUPS` (mnist, fashion_mnist, dsprites, chairs, celeba).
        name: the card's name; default ``jointvae-original-DATASET-converted``, which no zoo entry holds.

    Returns:
        The path of the card, ``out/NAME.toml``.
    """
    from vaezoo.assemble import build_model, data_info, metric_suite
    from vaezoo.entries.entry import write_entry
    from vaezoo.entries.schema import Card, DataSpec, InputSection, Optimizer, TrainRecipe
    from vaezoo.store.checksums import sha256_of
    from vaezoo.store.weights import check_tensors, load_weights
    from vaezoo.version import __version__

    if dataset not in SETUPS:
        raise UnknownNameError(f"the original JointVAE code has no setup for dataset '{dataset}'."
                               f"{close_matches(dataset, list(SETUPS))} Known: {', '.join(SETUPS)}")
    setup = SETUPS[dataset]
    path = Path(path)
    state = read_original(path)
    release = RELEASES.get(sha256_of(path))
    if release is not None and release != setup.release:
        trained_on = next(d for d, s in SETUPS.items() if s.release == release)
        raise WeightsError(f"{path} is the original code's released {release} model, trained on {trained_on}, "
                           f"not {dataset}; pass --dataset {trained_on}")
    try:
        continuous, discrete = latent_layout(state)
        converted = to_vaezoo(state, continuous, len(discrete))
    except WeightsError as exc:
        raise WeightsError(f"{path}: {exc}") from None
    metrics = ([setup.categorical_metric] if setup.categorical_metric and discrete else [])
    metrics += metric_suite("disentanglement") if setup.disentanglement and continuous else []
    card = Card(
        name=name or f"jointvae-original-{dataset.replace('_', '-')}-converted",
        architecture="jointvae",
        summary=_summary(dataset, setup, release),
        dataset=dataset,
        paper=PAPER,
        license=(f"MIT ({COPYRIGHT})" if release
                 else "unknown (not a released checkpoint: set the licence of these weights)"),
        vaezoo_version=__version__,
        model={"continuous": continuous, "discrete": discrete, "temperature": TEMPERATURE,
               "capacity": {"continuous": list(setup.continuous_capacity),
                            "discrete": list(setup.discrete_capacity)}},
        train=TrainRecipe(data=DataSpec(name=dataset, options=setup.data_options), epochs=setup.epochs,
                          batch_size=setup.batch_size, optimizer=Optimizer(name="Adam", lr=setup.lr)),
        eval_metrics=metrics,
        headline=metrics[0] if metrics else "reconstruction",
        input=InputSection(transform=setup.input, interpolation=setup.interpolation),
    )
    model = build_model(card)
    info = data_info(card)
    geometry = f"{info.channels}x{info.image_size}x{info.image_size}"
    source = f"{path} (as a {geometry} JointVAE)"
    check_tensors(converted, model.state_dict(), source)  # values no dataset would mend: said without its hint
    try:
        load_weights(model, converted, source)
    except WeightsError as exc:
        raise WeightsError(f"{exc}; check --dataset ({dataset} means {geometry} input)") from None
    card = card.model_copy(update={"latent": model.latent.layout(),
                                   "parameters": sum(p.numel() for p in model.parameters())})
    return write_entry(card, model.state_dict(), Path(out))


def _summary(dataset: str, setup: OriginalSetup, release: str | None) -> str:
    """The card's summary: what the weights are, where they come from and under which licence."""
    specs = f"trained_models/{setup.release}/specs.json"
    if release is None:
        return (f"JointVAE on {dataset} converted from a checkpoint of the original code ({SOURCE}) by "
                f"'vaezoo convert jointvae-original'. The train recipe is that of the original code's released "
                f"{setup.release} model ({specs}).")
    return (f"The {release} model released with the original JointVAE code by Emilien Dupont ({SOURCE}, "
            f"trained_models/{release}/model.pt at commit {COMMIT}; MIT licence, {COPYRIGHT}), converted by "
            f"'vaezoo convert jointvae-original'. Its train recipe is {specs}.")
