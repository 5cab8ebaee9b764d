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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from vaezoo.errors import UnknownNameError, WeightsError
from vaezoo.registry import close_matches

PAPER = ("Dupont (2018), Learning Disentangled Joint Continuous and Discrete Representations, NeurIPS. "
         "https://arxiv.org/abs/1804.00104")
SOURCE = "https://github.com/Schlumberger/joint-vae"
TEMPERATURE = 0.67  # the original code's default; checkpoints do not store it

# Original key prefix -> ours. Layer indices inside each nn.Sequential are the same.
PREFIXES = {
    "img_to_features.": "encoder.features.",
    "features_to_hidden.": "encoder.hidden.",
    "latent_to_features.": "decoder.hidden.",
    "features_to_img.": "decoder.features.",
}
ALPHAS_KEY = re.compile(r"fc_alphas\.(\d+)\.weight")

Capacity = tuple[float, float, int, float]  # [min, max, iterations, gamma], as in the original Trainer


@dataclass(frozen=True)
class OriginalSetup:
    """How the original code fed and trained a model of one dataset.

    The input geometry is that of the original ``utils/load_model.py``; the recipe is
    that of the released model in ``trained_models/<release>/specs.json``. Those files
    list several epoch counts (e.g. ``[100, 101, 102]``); the first is taken.
    """

    channels: int
    image_size: int
    release: str
    continuous_capacity: Capacity
    discrete_capacity: Capacity
    epochs: int
    lr: float
    batch_size: int = 64
    labelled: bool = False
    data_options: dict[str, Any] = field(default_factory=dict)


SETUPS: dict[str, OriginalSetup] = {
    "mnist": OriginalSetup(1, 32, "mnist", (0.0, 5.0, 25000, 30.0), (0.0, 5.0, 25000, 30.0), 100, 5e-4,
                           labelled=True, data_options={"image_size": 32}),
    "fashion_mnist": OriginalSetup(1, 32, "fashion", (0.0, 5.0, 50000, 100.0), (0.0, 10.0, 50000, 100.0), 100,
                                   5e-4, labelled=True, data_options={"image_size": 32}),
    "dsprites": OriginalSetup(1, 64, "dsprites", (0.0, 40.0, 300000, 150.0), (0.0, 1.1, 300000, 150.0), 29, 5e-4),
    "chairs": OriginalSetup(1, 64, "chairs", (0.0, 30.0, 100000, 300.0), (0.0, 5.0, 100000, 300.0), 100, 1e-4,
                            data_options={"image_size": 64}),
    "celeba": OriginalSetup(3, 64, "celeba", (0.0, 50.0, 100000, 100.0), (0.0, 10.0, 100000, 100.0), 100, 5e-4,
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
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # weights_only refuses arbitrary objects with UnpicklingError, corrupt files vary
        raise WeightsError(f"{path} is not a plain state dict that torch.load(weights_only=True) reads "
                           f"({_reason(exc)}); vaezoo never unpickles arbitrary objects") from None
    is_dict = isinstance(state, dict)
    if not is_dict or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        kinds = sorted({type(v).__name__ for v in state.values()}) if is_dict else [type(state).__name__]
        raise WeightsError(f"{path} holds {', '.join(kinds)}, not a state dict of tensors; the original code "
                           f"saves model.state_dict(), extract that from a larger checkpoint first")
    return state


def _reason(exc: Exception) -> str:
    """The informative line of a ``torch.load`` error, which is often several paragraphs long."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "WeightsUnpickler error:" in line:
            return line.split("WeightsUnpickler error:", 1)[1].split(" Please use", 1)[0].strip()
    return f"{type(exc).__name__}: {lines[0] if lines else exc!r}"


def latent_layout(state: dict[str, Tensor]) -> tuple[int, list[int]]:
    """The latent layout of an original checkpoint, read from the shapes of its heads.

    Returns:
        ``(continuous, discrete)``: the rows of ``fc_mean`` (0 without it) and of each
        ``fc_alphas.i`` in order (``[]`` without them).
    """
    continuous = _rows(state, "fc_mean.weight") if "fc_mean.weight" in state else 0
    indices = sorted(int(m.group(1)) for key in state if (m := ALPHAS_KEY.fullmatch(key)))
    if indices != list(range(len(indices))):
        raise WeightsError(f"the categorical heads are numbered {indices}; expected fc_alphas.0, fc_alphas.1, ...")
    if not continuous and not indices:
        raise WeightsError("the checkpoint has neither fc_mean nor fc_alphas.0; it is not a checkpoint of the "
                           "original JointVAE code")
    return continuous, [_rows(state, f"fc_alphas.{i}.weight") for i in indices]


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
    missing = [f"{h}.{p}" for h in heads for p in ("weight", "bias") if f"{h}.{p}" not in state]
    if missing:
        raise WeightsError(f"the checkpoint lacks the latent heads {missing}")
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

    The card describes the model (the latent layout read from the checkpoint, the
    input geometry and capacity schedule the original code used for ``dataset``)
    and carries no metrics: ``vaezoo eval out/NAME.toml --write`` measures and records them.

    Args:
        path: the original checkpoint (a plain state dict).
        out: output directory.
        dataset: one of :data:`SETUPS` (mnist, fashion_mnist, dsprites, chairs, celeba).
        name: the card's name; default ``jointvae-original-DATASET-converted``, which no zoo entry holds.

    Returns:
        The path of the card, ``out/NAME.toml``.
    """
    from vaezoo import __version__
    from vaezoo.cards import Card, DataSpec, Optimizer, TrainRecipe, Weights, write_card
    from vaezoo.assemble import build_model, load_weights
    from vaezoo.weights import save_weights, sha256_of

    if dataset not in SETUPS:
        raise UnknownNameError(f"the original JointVAE code has no setup for dataset '{dataset}'."
                               f"{close_matches(dataset, list(SETUPS))} Known: {', '.join(SETUPS)}")
    setup = SETUPS[dataset]
    path = Path(path)
    state = read_original(path)
    try:
        continuous, discrete = latent_layout(state)
        converted = to_vaezoo(state, continuous, len(discrete))
    except WeightsError as exc:
        raise WeightsError(f"{path}: {exc}") from None
    metrics = ["cluster_accuracy"] if setup.labelled and discrete else []
    card = Card(
        name=name or f"jointvae-original-{dataset.replace('_', '-')}-converted",
        architecture="jointvae",
        summary=(f"JointVAE on {dataset} converted from a checkpoint of the original code ({SOURCE}) by "
                 f"'vaezoo convert jointvae-original'. The train recipe is that of the original release's "
                 f"{setup.release} model (trained_models/{setup.release}/specs.json)."),
        dataset=dataset,
        paper=PAPER,
        license="MIT",
        vaezoo_version=__version__,
        model={"image_size": setup.image_size, "channels": setup.channels, "continuous": continuous,
               "discrete": discrete, "temperature": TEMPERATURE,
               "capacity": {"continuous": list(setup.continuous_capacity),
                            "discrete": list(setup.discrete_capacity)}},
        train=TrainRecipe(data=DataSpec(name=dataset, options=setup.data_options), epochs=setup.epochs,
                          batch_size=setup.batch_size, optimizer=Optimizer(name="Adam", lr=setup.lr)),
        eval_metrics=metrics,
        headline=metrics[0] if metrics else "reconstruction",
    )
    model = build_model(card)
    geometry = f"{setup.channels}x{setup.image_size}x{setup.image_size}"
    try:
        load_weights(model, converted, f"{path} (as a {geometry} JointVAE)")
    except WeightsError as exc:
        raise WeightsError(f"{exc}; check --dataset ({dataset} means {geometry} input)") from None
    card = card.model_copy(update={"latent": model.latent.describe(),
                                   "parameters": sum(p.numel() for p in model.parameters())})
    out = Path(out)
    weights_path = out / f"{card.name}.safetensors"
    save_weights(model.state_dict(), weights_path, {"card": card.model_dump_json(exclude={"weights", "metrics"})})
    card = card.model_copy(update={"weights": Weights(file=weights_path.name, sha256=sha256_of(weights_path),
                                                      size=weights_path.stat().st_size)})
    card_path = out / f"{card.name}.toml"
    write_card(card, card_path)
    return card_path
