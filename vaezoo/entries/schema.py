"""The schema of a zoo card: pure pydantic, nothing read from disk and no plugin looked up.

A card is a TOML file describing one pretrained model: what it is (``architecture``, ``model``, ``latent``), how it
was trained (``train``), its weights and the metrics measured on it. :mod:`vaezoo.entries.catalog` finds and
reads cards; :mod:`vaezoo.entries.entry` writes and verifies a card with its weights.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, PrivateAttr,
                      SerializationInfo, Strict, StrictBool, ValidationError, ValidationInfo, field_validator,
                      model_serializer, model_validator)
from pydantic_core import PydanticCustomError

from vaezoo.context import LatentPart, layout_text, whole_number

NAME_PATTERN = r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$"
MAX_NAME = 200  # the files named after a card (NAME.toml, .NAME.toml.lock, NAME.traverse.png) fit in 255 bytes
# a card in a Hugging Face Hub repository: hf-hub:OWNER/REPO[@REVISION] (vaezoo.entries.huggingface)
HUB_PREFIX = "hf-hub:"
# Weights in a Hub repository, as HfFileSystem writes them: hf://OWNER/REPO[@REVISION]/PATH (a '/' in the
# revision written %2F)
HF_URL = re.compile(r"hf://(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[^\s/@]+))?/(?P<path>\S+)")
SEED_LIMIT = 2**63
"""Seeds are whole numbers in [0, SEED_LIMIT): torch takes seeds below 2^64, and training adds offsets (rank,
step, epoch) to the recipe's seed."""
MAX_IMAGE_SIZE = 1024
"""The largest ``image_size`` a card's dataset options may ask for."""
REPR_WIDTH = 100
"""The width a card's repr wraps at, about a notebook cell's."""


def _seed(value: Any, where: str = "") -> int:
    if type(value) is not int or not 0 <= value < SEED_LIMIT:
        raise ValueError(f"{where}{value!r} is not a seed: give a whole number from 0 to 2^63 - 1")
    return value


Seed = Annotated[int, PlainValidator(_seed)]
"""A card field holding a seed: a whole number in [0, :data:`SEED_LIMIT`)."""


def _plain_int(value: Any) -> Any:
    """A numpy or 0-d torch integer as the int it is (taken before the recipe's numbers were strict); any other
    value as given, for the strict check."""
    number = whole_number(value)
    return value if number is None else number


# TOML's integers are 64-bit: a larger one is no TOML to other readers. Strict, as a recipe's numbers are: a card's
# `true` or "2" is refused, not trained as 1 or 2 (nor `2.0`, which no run of whole epochs or batches holds)
_Count = Annotated[int, BeforeValidator(_plain_int), Strict(), Field(gt=0, lt=2**63)]


_Token = Annotated[str, Field(pattern=r"^[!-~]{1,100}$")]
"""A distribution's name or version as a card records it: 1 to 100 printable ASCII characters, no space (PEP 508
names and PEP 440 versions are; anything else would print as other text)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The fields that differ from their defaults, as the model would be made again: what the card says, not
        every unset ``note=None`` of every metric."""
        for name, value in super().__repr_args__():
            field = type(self).model_fields.get(name)
            if field is None or field.is_required() or value != field.get_default(call_default_factory=True):
                yield name, value


class Weights(_Frozen):
    """A safetensors file beside the card (``file``) or at an https or ``hf://`` ``url``, with its sha256 and size."""

    file: str | None = None
    url: str | None = None
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(gt=0, description="size in bytes")

    @field_validator("sha256", mode="before")
    @classmethod
    def _lower_case_digest(cls, value: Any) -> Any:  # as Windows' Get-FileHash prints it
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> Weights:
        if (self.file is None) == (self.url is None):
            raise ValueError("give exactly one of 'file' and 'url'")
        if self.file is not None and not self.file.endswith(".safetensors"):
            raise ValueError(f"weights file must be a .safetensors file, got '{self.file}'")
        if self.url is not None and self.url.startswith("hf://") and not HF_URL.fullmatch(self.url):
            raise ValueError(f"weights URL '{self.url}' is not hf://OWNER/REPO/PATH or hf://OWNER/REPO@REVISION/PATH")
        if self.url is not None and not self.url.startswith("hf://"):
            _check_web_address(self.url)
        return self


def _check_web_address(url: str) -> None:
    """Refuse a weights URL that no download could reach: malformed, or http(s) without a host or with a host name
    DNS refuses. (Which schemes and hosts vaezoo downloads from is checked when it downloads.)"""
    try:
        parsed = urlsplit(url)
        host = parsed.hostname
    except ValueError as exc:
        raise ValueError(f"weights URL '{url}' is malformed ({exc})") from None
    if parsed.scheme not in ("https", "http"):
        return
    if not host:
        raise ValueError(f"weights URL '{url}' names no host; give https://HOST/PATH")
    if len(host) > 253 or any(not 0 < len(label) <= 63 for label in host.rstrip(".").split(".")):
        raise ValueError(f"weights URL '{url}' has a host name no DNS server can resolve (a label is empty or over "
                         f"63 characters)")


class DataSpec(_Frozen):
    """The dataset a recipe trains on and the options its factory takes (e.g. ``image_size``)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _options(cls, options: dict[str, Any]) -> dict[str, Any]:
        size = options.get("image_size")
        if size is not None and (type(size) is not int or not 1 <= size <= MAX_IMAGE_SIZE):
            raise ValueError(f"image_size must be a whole number from 1 to {MAX_IMAGE_SIZE}, got {size!r}")
        return check_seeds(options, "options")


_Unit = Annotated[float, Field(ge=0, lt=1)]
_NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _OptimizerOptions(BaseModel):
    """The keyword arguments of a ``torch.optim`` class that a card may set, with their types and ranges."""

    model_config = ConfigDict(extra="forbid", strict=True)

    weight_decay: _NonNegative = 0.0
    maximize: bool = False


class _AdamOptions(_OptimizerOptions):
    betas: Annotated[list[_Unit], Field(min_length=2, max_length=2)] = [0.9, 0.999]
    eps: _NonNegative = 1e-8
    amsgrad: bool = False


class _AdamWOptions(_AdamOptions):
    weight_decay: _NonNegative = 1e-2


class _SGDOptions(_OptimizerOptions):
    momentum: _NonNegative = 0.0
    dampening: float = 0.0
    nesterov: bool = False

    @model_validator(mode="after")
    def _nesterov(self) -> _SGDOptions:
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("nesterov needs momentum > 0 and dampening 0")
        return self


class _RMSpropOptions(_OptimizerOptions):
    alpha: _NonNegative = 0.99
    eps: _NonNegative = 1e-8
    momentum: _NonNegative = 0.0
    centered: bool = False


OPTIMIZER_OPTIONS: dict[str, type[BaseModel]] = {
    "Adam": _AdamOptions, "AdamW": _AdamWOptions, "SGD": _SGDOptions, "RMSprop": _RMSpropOptions}
"""For each optimiser a card may name, the ``torch.optim`` keyword arguments its ``options`` may set."""


class Optimizer(_Frozen):
    """The optimiser: a ``torch.optim`` class name and its keyword arguments (checked: :data:`OPTIMIZER_OPTIONS`)."""

    name: Literal["Adam", "AdamW", "SGD", "RMSprop"] = "Adam"
    lr: Annotated[float, Strict()] = Field(gt=0, allow_inf_nan=False)  # as its options are: `true` is no rate
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options(self) -> Optimizer:
        allowed = OPTIMIZER_OPTIONS[self.name]
        try:
            allowed.model_validate(self.options)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                raise ValueError(f"{self.name} takes no option {where!r}; it takes "
                                 f"{', '.join(allowed.model_fields)}") from None
            raise ValueError(f"{self.name} option {where or '(options)'!r}: {err['msg']}") from None
        return self


PRECISION_NAMES = {"float32": "tf32-conv", "bf16": "bf16-mixed"}
"""The precisions' names before TF32 was stated, and what they meant: a run under torch's default flags computed
its convolutions on a GPU in TF32 (``torch.backends.cudnn.allow_tf32``) and its matrix products in float32."""


_Step = Annotated[int, BeforeValidator(_plain_int), Strict(), Field(ge=0, lt=2**63)]


class Machine(_Frozen):
    """Where a run trained from its step ``step`` on: what makes its bits besides its recipe and seed.

    A run's weights depend on the device and the torch that computed them, on the number of torch's CPU threads (a
    convolution's weight gradient is summed in one piece a thread) and on how its step was run (processes under
    torchrun, members of an ensemble stacked under ``torch.func.vmap`` or in turn): another machine gives another
    float rounding, which grows over the run. Written by ``vaezoo train``.
    """

    step: _Step = Field(description="the run's step this machine trained from: 0, or the step a resume on another "
                                    "machine continued from")
    device: _Token = Field(description="torch's device type the run computed on: cpu, cuda, mps, ...")
    gpu: str | None = Field(default=None, pattern=r"^[ -~]{1,100}$",
                            description="the accelerator's name as torch gives it, e.g. 'NVIDIA H200'")
    torch: _Token = Field(description="torch's version")
    threads: _Count = Field(description="torch's CPU threads (torch.get_num_threads(): OMP_NUM_THREADS, or "
                                        "MKL_NUM_THREADS where set)")
    processes: _Count | None = Field(default=None, description="the torchrun processes that shared each batch, "
                                                               "where more than one")
    ensemble: Literal["vmap", "loop"] | None = Field(
        default=None, description="trained as a member of an ensemble (--seeds, --sweep), of 'members' runs stacked "
                                  "into one step, their forward passes under torch.func.vmap or in turn (loop)")
    members: _Count | None = Field(default=None, description="the runs of the ensemble's step, this one among them")

    @model_validator(mode="after")
    def _ensemble_and_members(self) -> Machine:
        if (self.ensemble is None) != (self.members is None):
            raise ValueError("ensemble and members go together: an ensemble member records both, a run alone neither")
        return self

    def differences(self, other: Machine) -> list[str]:
        """What differs between this machine and ``other`` (the step each began at aside), in words:
        ``threads 1 -> 2``."""
        def said(value: Any) -> str:
            return "none" if value is None else str(value)

        return [f"{key} {said(getattr(self, key))} -> {said(getattr(other, key))}" for key in type(self).model_fields
                if key != "step" and getattr(self, key) != getattr(other, key)]


def _rising(machines: list[Machine]) -> list[Machine]:
    steps = [m.step for m in machines]
    if steps != sorted(set(steps)):
        raise ValueError(f"the machines' steps {steps} do not rise: each machine trained from a later step")
    return machines


Machines = Annotated[list[Machine], Field(min_length=1), AfterValidator(_rising)]
"""A run's machines (``train.machine``): at least one, each from a later step than the one before."""


class TrainRecipe(_Frozen):
    """How the weights were trained. Regularizer schedules live in the card's ``model`` section."""

    data: DataSpec
    epochs: _Count
    batch_size: _Count
    optimizer: Optimizer
    seed: Seed = 0
    checkpoint_every: _Count = Field(default=1000, description="steps between checkpoints")
    budget: str | None = Field(default=None, description="wall time of the run on the stated machine")
    steps: Annotated[int, BeforeValidator(_plain_int), Strict()] | None = Field(default=None, ge=0, lt=2**63,
                              description="optimizer steps of the run; written by vaezoo train")
    precision: Literal["fp32", "tf32", "tf32-conv", "bf16-mixed"] = Field(
        default="tf32-conv", description="the arithmetic of the run on a GPU (the CPU computes float32 for all but "
        "bf16-mixed): fp32 everywhere; tf32: matrix products and convolutions in TF32; tf32-conv: torch's default "
        "flags, convolutions in TF32 and matrix products in float32 (what a run before this field used, read "
        "from the old name 'float32'); bf16-mixed: the forward pass under torch.autocast in bfloat16, float32 "
        "weights and regularizer arithmetic (the old name 'bf16')")
    compile: StrictBool = Field(default=False, description="run the forward pass through torch.compile")
    machine: Machines | None = Field(
        default=None, description="where the run trained: the machine it began on, then each other machine a resume "
                                  "continued it on; written by vaezoo train")

    @property
    def devices(self) -> tuple[str, ...]:
        """The device types the run trained on (``train.machine``), each once, in order; empty where unrecorded."""
        return tuple(dict.fromkeys(m.device for m in self.machine or ()))

    @field_validator("precision", mode="before")
    @classmethod
    def _old_precision_names(cls, value: Any) -> Any:
        return PRECISION_NAMES.get(value, value) if isinstance(value, str) else value


class SeedRun(_Frozen):
    """One complete run of a card's recipe: its seed and the metric it reached."""

    seed: Seed
    value: float


class SeedSpread(_Frozen):
    """A metric over every complete run of the card's recipe, one per seed: how much it moves with the seed.

    ``n``, ``median``, ``min`` and ``max`` restate ``runs`` for readers of the TOML; they must agree with it.
    """

    runs: list[SeedRun] = Field(min_length=1)
    n: int
    median: float
    min: float
    max: float
    shipped: Seed = Field(description="the seed whose weights the card ships")
    selection: str = Field(description="how the shipped seed was chosen")
    command: str = Field(description="the command that trained and measured each run")

    @model_validator(mode="after")
    def _summary_matches_runs(self) -> SeedSpread:
        import statistics

        values = [run.value for run in self.runs]
        expected = {"n": len(values), "median": statistics.median(values), "min": min(values), "max": max(values)}
        wrong = [f"{k} is {getattr(self, k)} but the runs give {v:.6g}" for k, v in expected.items()
                 if abs(getattr(self, k) - v) > 1e-6]
        if wrong:
            raise ValueError("; ".join(wrong))
        if self.shipped not in {run.seed for run in self.runs}:
            raise ValueError(f"the shipped seed {self.shipped} is not one of the runs")
        return self


def recorded(value: float, digits: int = 6) -> float:
    """``value`` as a card records a metric: to ``digits`` decimals, or to ``digits`` significant digits where that
    keeps more (a value below 1 in size: a total correlation of 3.5258e-05 is not 3.5e-05, nor 1e-09 zero)."""
    return float(f"{value:.{digits}g}") if abs(value) < 1 else round(value, digits)


class Metric(_Frozen):
    """A number measured by a command anyone can rerun."""

    value: float
    command: str
    vaezoo_version: str
    note: str | None = None
    higher_is_better: StrictBool | None = Field(
        default=None, description="the direction a registered metric ranks in, its spec's when it was measured: "
                                  "vaezoo leaderboard reads it from the cards, without loading the metric's code")
    parameters: dict[str, Any] | None = Field(
        default=None, description="the metric's own settings (points, bins, estimator, seed, ...)")
    data: dict[str, Any] | None = Field(
        default=None, description="the options of the recipe's dataset it was measured on, when the recipe sets "
                                  "any (e.g. binarize)")

    libraries: dict[str, str] | None = Field(
        default=None, description="versions of the libraries the number depends on, e.g. scikit-learn")
    seeds: SeedSpread | None = Field(default=None, description="the metric over every seed run with the recipe")

    @field_validator("parameters")
    @classmethod
    def _seeded(cls, parameters: dict[str, Any] | None) -> dict[str, Any] | None:
        return parameters if parameters is None else check_seeds(parameters, "parameters")


class InputSection(_Frozen):
    """How the dataset's images became the model's input (see :mod:`vaezoo.data.transforms`).

    The input's channels and size are the dataset's (:func:`vaezoo.assemble.data_info`) and its values lie in
    [0, 1] for every model, so the card states only what the dataset cannot tell.
    """

    transform: str = Field(description="how the dataset's images were turned into input, in words")
    interpolation: Literal["nearest", "bilinear", "bicubic", "box", "hamming", "lanczos"] = Field(
        default="bilinear", description="the PIL filter that resized them; vaezoo.data.transforms resizes with it")


# A layout as cards stated it before it was a list: 'family(size) + ...', a part possibly named and
# its arguments possibly keywords: 'cont: Gaussian(dim=3) + cat: GumbelCategorical(categories=4, temperature=0.67)'.
_LEGACY_PART = re.compile(r"(?:(?P<name>[^:()]+?)\s*:\s*)?(?P<family>\w+)"
                          r"\((?:\s*\w+\s*=)?\s*(?P<size>\d+)(?![\w.])[^()]*\)")


def _legacy_layout(text: str) -> list[dict[str, Any]] | None:
    """The parts of a layout stated as text (``gaussian(6) + categorical(3)``); None for an empty text.

    Raises:
        ValueError: a part is not ``family(size)``, ``name: family(size)`` or ``Family(key=size, ...)``.
    """
    parts = []
    for item in text.split(" + ") if text.strip() else ():
        match = _LEGACY_PART.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"latent part {item.strip()!r} is not 'family(size)'; write the layout as a list, "
                             f"e.g. latent = [{{ family = \"gaussian\", size = 6 }}]")
        parts.append({"family": match["family"].lower(), "size": int(match["size"]),
                      **({"name": match["name"]} if match["name"] else {})})
    return parts or None


class Card(_Frozen):
    """A zoo card. ``model`` holds the architecture builder's keyword arguments."""

    def __repr__(self) -> str:
        """The card as a notebook or a REPL shows it: a ``Card(...)`` that would make it again, one field a line and
        nested ones indented where they do not fit in :data:`REPR_WIDTH`, the fields at their defaults left out."""
        from rich.pretty import pretty_repr

        return pretty_repr(self, max_width=REPR_WIDTH)

    name: str = Field(pattern=NAME_PATTERN, max_length=MAX_NAME)
    architecture: str
    summary: str
    dataset: str
    paper: str
    license: str
    vaezoo_version: str
    model: dict[str, Any]
    train: TrainRecipe
    weights: Weights | None = None
    metrics: dict[str, Metric] = Field(default_factory=dict)
    eval_metrics: list[str] = Field(default_factory=list, description="registered metrics 'vaezoo eval' computes")
    eval_settings: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="by metric name, the settings this card's evaluation runs it with over "
                                          "its defaults, e.g. { importance_log_likelihood = { samples = 1000 } }")
    headline: str | None = Field(default=None, description="the metric to show in listings")
    latent: list[LatentPart] | None = Field(
        default=None, min_length=1, description="the latent layout, its parts in code order; written by vaezoo train")
    parameters: int | None = Field(default=None, ge=0, description="parameter count; written by vaezoo train")
    training_parameters: dict[str, int] | None = Field(
        default=None, description="parameter counts of the training-only parts (e.g. FactorVAE's discriminator), by "
                                  "their place in the model: trained beside it, in its checkpoints, not in its "
                                  "weights nor in 'parameters'; written by vaezoo train")
    plugins: dict[_Token, _Token] | None = Field(
        default=None, description="{ distribution = version } of the plugins other than vaezoo whose code the model, "
                                  "its dataset and its eval_metrics use, as installed when it was trained; written by "
                                  "vaezoo train")
    input: InputSection | None = Field(default=None, description="how dataset images became the model's input")
    sections: dict[str, Any] = Field(
        default_factory=dict, description="plugins' tables (vaezoo_register_card_sections) by name, e.g. JointVAE's "
                                          "[labels]; written at the card's top level")

    _path: Path | None = PrivateAttr(default=None)
    _source: str | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _gather_sections(cls, raw: Any, info: ValidationInfo) -> Any:
        """Move the top-level tables that are no card field into ``sections``, each validated by its model.

        The models come in the validation context (``{"sections": {name: model}}``, as discovery passes the
        registered ones); a table no model is given for is then refused. Without a context, any table is
        kept as it is.
        """
        if not isinstance(raw, dict) or not isinstance(raw.get("sections", {}), dict):
            return raw  # the fields' own validation names what is wrong
        models = (info.context or {}).get("sections")
        fields, sections = {}, dict(raw.get("sections") or {})
        for key, value in raw.items():
            if key == "sections":
                continue
            if key in cls.model_fields or not isinstance(value, dict):
                fields[key] = value
            elif models is not None and key not in models:
                raise ValueError(f"table {key!r} is no card field, and no loaded plugin registers a card section of "
                                 f"that name; remove it or install the plugin that writes it")
            else:
                sections[key] = value
        validate = (info.context or {}).get("validate_section") or _validate_section
        for key, value in sections.items():
            if models is not None and key in models:
                try:
                    sections[key] = validate(key, models[key], value)
                except ValidationError as exc:  # its fields named from the card's top, [labels.discrete0]'s too
                    raise ValidationError.from_exception_data(exc.title, [
                        {"type": PydanticCustomError(err["type"], err["msg"]), "loc": (key, *err["loc"]),
                         "input": err["input"]} for err in exc.errors()]) from None
        return {**fields, "sections": sections}

    def settings_of(self, metric: str) -> dict[str, Any]:
        """The settings this card's evaluation runs ``metric`` with over the metric's defaults (``eval_settings``)."""
        return dict(self.eval_settings.get(metric, {}))

    def toml(self) -> str:
        """The card as its TOML file holds it (NaN and infinite values as TOML's ``nan`` and ``inf``)."""
        import tomli_w

        return tomli_w.dumps(self.model_dump(exclude_none=True))

    def with_settings(self, settings: Mapping[str, Mapping[str, Any]]) -> Card:
        """This card with ``settings`` (``{metric: {setting: value}}``) over its ``eval_settings``.

        Raises:
            ValueError: a seed among ``settings`` is not a whole number in [0, 2^63).
        """
        merged = {name: {**self.settings_of(name), **given} for name, given in settings.items()}
        return self.model_copy(update={"eval_settings": {**self.eval_settings,
                                                         **check_seeds(merged, "eval_settings")}})

    @model_serializer(mode="wrap")
    def _sections_on_top(self, handler, info: SerializationInfo) -> dict[str, Any]:
        out = handler(self)
        if not out.get("eval_settings"):  # most cards keep their metrics' defaults: no empty table for them
            out.pop("eval_settings", None)
        # a plugin's section as its model reads it back: by alias, and sets, dates and the like as JSON gives them
        sections = {name: self.sections[name].model_dump(mode="json", by_alias=True,
                                                         exclude_none=bool(info.exclude_none))
                    if isinstance(self.sections.get(name), BaseModel) else value
                    for name, value in (out.pop("sections", None) or {}).items()}
        return {**out, **sections}

    @field_validator("latent", mode="before")
    @classmethod
    def _legacy_latent(cls, latent: Any) -> Any:
        """A layout stated as text, as cards did before it was a list (``gaussian(6) + categorical(3)``), as parts."""
        return _legacy_layout(latent) if isinstance(latent, str) else latent

    @field_validator("eval_settings")
    @classmethod
    def _seeded_settings(cls, settings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return check_seeds(settings, "eval_settings")

    @field_validator("model")
    @classmethod
    def _model_table(cls, model: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "type" in model:
            raise ValueError(f"[model] holds type = {model['type']!r}, but a card's architecture is its "
                             f"'architecture' field ({info.data.get('architecture')!r}); remove 'type' from [model]")
        return check_seeds(model, "model")

    @property
    def path(self) -> Path | None:
        """The TOML file this card was read from, if any."""
        return self._path

    @property
    def source(self) -> str | None:
        """Where a downloaded card comes from (``hf-hub:OWNER/REPO@COMMIT``); None for a local card."""
        return self._source

    @property
    def latent_text(self) -> str:
        """The latent layout as listings show it (:func:`layout_text`): ``gaussian(6) + categorical(3)``; '' when
        the card states none."""
        return layout_text(self.latent)

    @property
    def latent_families(self) -> tuple[str, ...]:
        """The families of the card's latent parts, in order, each once: ``("gaussian", "categorical")`` for
        ``gaussian(6) + categorical(3) + categorical(2)``; empty when the card states no layout."""
        return tuple(dict.fromkeys(part.family for part in self.latent or ()))

    def flat(self) -> dict[str, Any]:
        """Every leaf of ``model`` and ``train`` by its dotted path, for ``--where`` filters.

        List items are indexed, so a ``vae`` card's ``regularizers[0].beta`` is ``model.regularizers.0.beta``.
        """
        return {".".join(map(str, path)): value for path, value in self.leaves().items()}

    def leaves(self) -> dict[tuple[str | int, ...], Any]:
        """Every leaf of ``model`` and ``train`` by its path of keys and list indices, as :meth:`flat` names them
        with dots (``("model", "regularizers", 0, "beta")``): unambiguous where a key holds a dot."""
        out: dict[tuple[str | int, ...], Any] = {}

        def walk(prefix: tuple[str | int, ...], value: Any) -> None:
            if isinstance(value, dict):
                for k, v in value.items():
                    walk((*prefix, k), v)
            elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
                for i, v in enumerate(value):
                    walk((*prefix, i), v)
            else:
                out[prefix] = value

        walk(("model",), self.model)
        walk(("train",), self.train.model_dump())
        return out


def check_seeds(table: dict[str, Any], where: str) -> dict[str, Any]:
    """``table``, refused unless every key named ``seed`` or ``*_seed`` in it (at any depth) holds a seed.

    Raises:
        ValueError: naming the dotted path of the first value that is not a whole number in [0, 2^63).
    """
    for path, value in _seeds(table, where):
        _seed(value, f"{path} = ")
    return table


def _seeds(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every key named ``seed`` or ``*_seed`` in the nested tables of ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        where = f"{path}.{key}"
        if isinstance(key, str) and (key == "seed" or key.endswith("_seed")):
            yield where, item
        else:
            yield from _seeds(item, where)


def _validate_section(name: str, model: type[BaseModel], value: Any) -> BaseModel:
    """A plugin's card section ``value`` validated by its ``model``, as a card without plugin isolation reads it
    (discovery passes :func:`vaezoo.entries.catalog`'s isolated one as ``validate_section`` in the context)."""
    return model.model_validate(value)
