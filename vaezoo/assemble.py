"""Assembly: the only module that looks names up in the registries.

A card becomes a model (:func:`build_model`, :func:`load_model`), a recipe a dataset
(:func:`load_dataset`), a spec a part (:func:`build_part`). Parts never look anything up
themselves: what they need beyond their spec comes in a :class:`~vaezoo.context.BuildContext`,
which carries the facts of the data (read from the registered dataset, never typed into the card)
and a ``build`` for sub-parts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vaezoo.context import FACTS, BuildContext, check_arguments
from vaezoo.errors import CardError, DataError, UnknownNameError, VaezooError, first_line
from vaezoo.plugins import PluginInfo, get_plugins, registry
from vaezoo.store.limits import load_json

if TYPE_CHECKING:
    import os

    import torch

    from vaezoo.data import DataInfo, ImageDataset
    from vaezoo.entries.schema import Card
    from vaezoo.metrics.spec import MetricSpec
    from vaezoo.model import VAE


def build_part(kind: str, spec: Mapping[str, Any] | str, context: BuildContext | None = None):
    """Build the ``kind`` registered as ``spec["type"]`` with the spec's other keys as arguments.

    Arguments the part takes and the spec leaves out are filled from ``context``: the facts of the data
    by name, and the context itself as ``context``. A spec that states a fact the data contradicts is
    an error naming both values.

    Args:
        kind: a registry kind ("architecture", "latent family", "regularizer", "net", "likelihood").
        spec: ``{"type": name, **arguments}``, or just a name.
        context: what the data knows; without one, parts get no facts.

    Returns:
        The built part.
    """
    context = context or BuildContext(builder=build_part)
    spec = {"type": spec} if isinstance(spec, str) else dict(spec)
    if "type" not in spec:
        raise CardError(f"a {kind} spec needs a 'type' key, got {spec}")
    name = spec.pop("type")
    factory = registry(kind)[name]
    accepted = inspect.signature(factory).parameters
    known = context.facts()
    for fact in set(known) & set(accepted):
        if fact in spec and spec[fact] != known[fact]:
            source = "latent" if fact in ("code_size", "part_sizes") else "dataset"
            raise CardError(f"{kind} '{name}' is given {fact} = {spec[fact]!r} but the {source} has {known[fact]!r}; "
                            f"remove {fact} from the card (vaezoo takes it from the {source})")
        spec[fact] = known[fact]
    # Facts a spec states where no dataset gave them (a part built on its own) hold for its sub-parts too.
    context = replace(context, **{fact: spec[fact] for fact in FACTS if fact in spec and fact not in known})
    if "context" in accepted:
        spec["context"] = context
    try:
        spec = check_arguments(factory, spec, f"{kind} '{name}'", skip=("context", *FACTS))
    except ValueError as exc:
        raise CardError(str(exc)) from None
    try:
        inspect.signature(factory).bind(**spec)
    except TypeError as exc:  # a required argument left out
        given = [k for k in accepted if k != "context" and k not in FACTS]
        raise CardError(f"{kind} '{name}': {exc}; accepted arguments: {', '.join(given)}") from None
    try:
        part = factory(**spec)
    except Exception as exc:
        if not hasattr(exc, "_vaezoo_part"):  # the innermost part that raised is the one build_model names
            exc._vaezoo_part = (kind, name)
        raise
    from vaezoo.latents import LatentFamily

    if isinstance(part, LatentFamily) and part.registered_name is None:
        part.registered_name = name  # listings name the family as its card does
    return part


def data_info(card: Card, split: str = "train") -> DataInfo:
    """What the dataset of ``card``'s recipe is, without loading it.

    Raises:
        DataError: the options do not fit the dataset's signature, or the split would not fit in this
            machine's memory (checked before anything is read).
    """
    name, options = card.train.data.name, card.train.data.options
    dataset = registry("dataset")[name]
    _check_options(dataset.info, name, options)
    try:
        info = dataset.info(split, **options)
    except TypeError as exc:
        raise DataError(f"dataset '{name}' does not take the options {options} ({exc}); check the card's "
                        f"[train.data] options") from None
    from vaezoo.data import DataInfo
    from vaezoo.devices import physical_memory

    if not isinstance(info, DataInfo):  # its fields would fail later, inside whatever reads them
        raise DataError(f"dataset '{name}' of plugin '{registry('dataset').plugin_of(name)}' returned "
                        f"{type(info).__name__} from info(), not a vaezoo.data.DataInfo; report it to its author")
    needed, memory = info.size * info.channels * info.image_size ** 2, physical_memory()
    if memory is not None and needed > memory:
        raise DataError(f"dataset '{name}' with the options {options} would hold {needed / 2**30:,.1f} GiB of "
                        f"images, more than this machine's {memory / 2**30:,.1f} GiB of memory; ask for a smaller "
                        f"image_size in the card's [train.data] options")
    return info


def _check_options(method: Callable, name: str, options: Mapping[str, Any]) -> None:
    """Refuse dataset ``options`` that ``method`` (a dataset's ``info`` or ``load``) does not take as typed."""
    try:
        check_arguments(method, options, f"dataset '{name}'", skip=("root", "split"))
    except ValueError as exc:
        raise DataError(f"dataset '{name}' does not take the options {options} ({exc}); check the card's "
                        f"[train.data] options") from None


def with_recorded_data(card: Card) -> Card:
    """``card`` with its dataset's options as a run's card records them (:meth:`vaezoo.data.Dataset.record`): with
    what its dataset needs to describe itself where its files are not, so the run's card loads anywhere.

    Raises:
        UnknownNameError: no plugin registers the dataset, said as a plugin the card needs.
        DataError: the options do not fit the dataset's signature, as :func:`data_info` says it.
    """
    data = card.train.data
    try:
        dataset = registry("dataset")[data.name]
    except UnknownNameError as exc:
        raise _not_installed(card, exc) from None
    _check_options(dataset.info, data.name, data.options)  # record() may describe the data with them
    options = dataset.record(**data.options)
    if options == data.options:
        return card
    train = card.train.model_copy(update={"data": data.model_copy(update={"options": options})})
    return card.model_copy(update={"train": train})


def model_context(card: Card) -> BuildContext:
    """The :class:`BuildContext` of ``card``'s model: the facts of its training split."""
    info = data_info(card, "train")
    return BuildContext(builder=build_part, image_size=info.image_size, channels=info.channels,
                        dataset_size=info.size, factor_names=info.factor_names)


def build_model(card: Card, device: str | torch.device | None = None,
                dtype: torch.dtype | str | None = None) -> VAE:
    """Build the model ``card`` describes, with freshly initialised weights.

    Args:
        card: the card (see :func:`vaezoo.get_card` to get one by name, path or Hub repository).
        device: where to put the model (``"cpu"``, ``"cuda"``, ..., ``"auto"``: :func:`vaezoo.devices.usable_device`).
        dtype: floating-point type of the parameters.

    Returns:
        The :class:`~vaezoo.model.VAE`, with a copy of ``card`` as ``model.card``: its own, whose dicts
        (``metrics``, ``model``, ...) a change made in place reaches no other model nor the catalog.

    Raises:
        DeviceError: ``device`` is not one this machine has (checked before anything is built).
        DtypeError: ``dtype`` is not float32, float64, float16 or bfloat16 (checked as early).
    """
    from vaezoo.devices import usable_device, usable_dtype
    from vaezoo.model import VAE

    device = usable_device(device)
    if dtype is not None:
        dtype = usable_dtype(dtype)
    try:
        context = model_context(card)
        model = build_part("architecture", {**card.model, "type": card.architecture}, context)
    except UnknownNameError as exc:
        raise _not_installed(card, exc) from None
    except VaezooError:
        raise
    except Exception as exc:  # the card's values are input: whatever the builder trips on is the card's problem
        reason = first_line(exc)
        kind, name = getattr(exc, "_vaezoo_part", ("architecture", card.architecture))
        raise CardError(f"{card.path or card.name}: section 'model' does not fit {kind} '{name}' of plugin "
                        f"'{registry(kind).plugin_of(name)}': {type(exc).__name__}: {reason}") from exc
    if not isinstance(model, VAE):
        plugin = registry("architecture").plugin_of(card.architecture)
        raise VaezooError(f"architecture '{card.architecture}' of plugin '{plugin}' returned "
                          f"{type(model).__name__}, not a vaezoo.model.VAE")
    model.card = card.model_copy(deep=True)  # a frozen card's dicts can still be changed in place
    return model.to(device=device, dtype=dtype)


def load_model(card: Card, device: str | torch.device | None = None, dtype: torch.dtype | str | None = None,
               pretrained: bool = True,
               state_dict: dict[str, torch.Tensor] | None = None, source: str | None = None) -> VAE[Card]:
    """The model ``card`` describes, with its weights, in eval mode: the one path from a card to a model.

    Args:
        card: the card.
        device: where to put the model (``"auto"`` too: :func:`vaezoo.devices.usable_device`); default CPU.
        dtype: floating-point type of the parameters.
        pretrained: load the card's weights, verified by sha256; False gives a freshly initialised model in
            training mode (a model to train, as :func:`build_model` gives it), whose card keeps nothing measured
            on the card's weights (metrics, plugins' sections such as label matchings).
        state_dict: load these weights instead of the card's (e.g. a training checkpoint's model).
        source: names ``state_dict`` in messages.

    Returns:
        The :class:`~vaezoo.model.VAE` in eval mode, with ``card`` as ``model.card`` (or the card on disk
        now, with its weights, if ``card``'s run was published again while it was read:
        :func:`vaezoo.entries.entry.load_entry`).

    Raises:
        DeviceError: ``device`` is not one this machine has (checked before anything is built or read).
        DtypeError: ``dtype`` is not float32, float64, float16 or bfloat16 (checked as early).
        TypeError: ``pretrained`` is not a bool.
    """
    from vaezoo.devices import usable_device, usable_dtype

    if not isinstance(pretrained, bool):  # a weights path or "False" would load the card's weights without a word
        raise TypeError(f"pretrained is True or False, got {pretrained!r}; to measure other weights, make a card "
                        f"folder of them (vaezoo.save_pretrained) or pass a training checkpoint to "
                        f"vaezoo eval --checkpoint")
    device = usable_device(device)
    if dtype is not None:
        dtype = usable_dtype(dtype)
    weighted = state_dict is not None or pretrained
    built = card
    model = _initialised(card, weighted)  # a card that cannot be built is refused before its weights are fetched
    entry = state_dict is None and pretrained
    if entry:
        from vaezoo.entries.entry import load_entry

        card, state_dict = load_entry(card)  # the card its weights are: the new one, if published again meanwhile
        source = f"weights of '{card.name}'"
    if state_dict is None:  # what was measured on the card's weights (metrics, label matchings) is not this model's
        model.card = card.model_copy(update={"metrics": {}, "sections": {}, "headline": None}, deep=True)
    else:
        model = model if card is built else _initialised(card, weighted)
        from vaezoo.store.weights import load_weights

        load_weights(model, state_dict, source or "the given weights")
    if entry:
        from vaezoo.store.weights import tensors_digest

        model.weights_digest = tensors_digest(model.state_dict())
    model = model.to(device=device, dtype=dtype)
    return model.eval() if pretrained or state_dict is not None else model


def build_aside(card: Card) -> VAE:
    """:func:`build_model` of ``card`` with its initial values drawn from a copy of torch's random state: for a model
    whose weights are to be replaced, or that is built only to read its structure, so that the caller's
    ``torch.rand`` stream is left as it was (as ``torch.manual_seed(0); vaezoo.load(...)`` followed by a draw
    expects)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        return build_model(card)


def _initialised(card: Card, weighted: bool) -> VAE:
    """:func:`build_model` of ``card``, aside (:func:`build_aside`) when its weights are to be replaced
    (``weighted``): a fresh model draws its initial weights from the caller's stream, reproducibly."""
    return build_aside(card) if weighted else build_model(card)


def load_dataset(name: str, root: str | os.PathLike[str] | None = None, split: str = "train",
                 **options: Any) -> ImageDataset:
    """Load the registered dataset ``name``.

    Args:
        name: a registered dataset ("mnist", "dsprites", ...).
        root: the folder holding it (``--data-root``), or None for ``VAEZOO_DATA`` or the default folder.
        split: "train" or "test".
        options: the dataset's options, from the card's recipe (e.g. ``image_size``).
    """
    dataset = registry("dataset")[name]
    _check_options(dataset.load, name, options)
    try:
        inspect.signature(dataset.load).bind(root=root, split=split, **options)
    except TypeError as exc:
        raise DataError(f"dataset '{name}' does not take the options {options} ({exc}); "
                        f"check the card's [train.data] options") from None
    loaded = dataset.load(root=root, split=split, **options)
    from vaezoo.data import ImageDataset

    plugin = registry("dataset").plugin_of(name)
    if not isinstance(loaded, ImageDataset):
        raise DataError(f"dataset '{name}' of plugin '{plugin}' returned {type(loaded).__name__} from load(), not a "
                        f"vaezoo.data.ImageDataset; report it to its author")
    info = dataset.info(split, **options)
    said = (info.channels, info.image_size, info.image_size)
    got = loaded.image_shape if len(loaded) else said
    if got != said:  # a model built from info() would take other images: the dataset, not the model, is wrong
        raise DataError(f"dataset '{name}' of plugin '{plugin}' loads images of shape {got} where its info() says "
                        f"{said}; report it to its author")
    return loaded


def metric(name: str) -> MetricSpec:
    """The registered metric ``name``, as a :class:`~vaezoo.metrics.spec.MetricSpec` (a plugin's plain function
    made one)."""
    from vaezoo.metrics.spec import MetricSpec

    return MetricSpec.of(registry("metric")[name])


def card_metric(card: Card, name: str) -> MetricSpec:
    """:func:`metric` ``name`` of ``card``'s ``eval_metrics``: one that no plugin registers is said as a plugin the
    card needs (its plugin uninstalled since), not as a misspelt name."""
    try:
        return metric(name)
    except UnknownNameError as exc:
        raise _not_installed(card, exc) from None


def metric_rounding(names) -> dict[str, float]:
    """``{name: rounding}`` of the registered metrics among ``names`` whose value float rounding alone moves (their
    spec's :attr:`~vaezoo.metrics.spec.MetricSpec.rounding`); the others (and the losses) are left out."""
    metrics = registry("metric")
    return {name: rounding for name in names if name in metrics and (rounding := metric(name).rounding) > 0}


def metric_suite(suite: str) -> list[str]:
    """The registered metrics whose spec belongs to ``suite`` (e.g. ``"disentanglement"``), in registration order."""
    return [name for name in registry("metric").registered() if metric(name).suite == suite]


def converter(name: str) -> Callable[..., Path]:
    """The registered checkpoint converter ``name`` (see the ``vaezoo_register_converters`` hook)."""
    return registry("converter")[name]


def third_party_plugins(card: Card, model: VAE | None = None) -> list[PluginInfo]:
    """The plugins of distributions other than vaezoo whose code ``card`` uses: its architecture, the parts of its
    model, its dataset and its ``eval_metrics``. A user installs their distributions to load and evaluate it.

    Args:
        card: the card.
        model: the model ``card`` describes, if built already (else it is built, without weights).
    """
    model = model if model is not None else build_aside(card)
    metrics = [registry("metric")[name] for name in card.eval_metrics]
    code = [registry("architecture")[card.architecture], registry("dataset")[card.train.data.name],
            *(getattr(m, "function", m) for m in metrics), *model.modules()]
    owners = (get_plugins().owner_of(obj) for obj in code)
    found = {info.distribution: info for info in owners if info is not None and not info.builtin}
    return [found[name] for name in sorted(found)]


def card_dataset(card: Card | str | os.PathLike[str], root: str | os.PathLike[str] | None = None,
                 split: str = "test") -> ImageDataset:
    """The ``split`` of the dataset ``card``'s recipe trains on, as the model takes it.

    Args:
        card: a :class:`~vaezoo.entries.schema.Card` (``model.card``), or what names one: a zoo name, a card's TOML
            file or a folder holding one card.
        root: the folder holding the dataset; None reads ``$VAEZOO_DATA``, or downloads it.
        split: ``"test"`` or ``"train"`` (the splits the dataset has).
    """
    from vaezoo.entries.catalog import get_card
    from vaezoo.entries.schema import Card

    card = card if isinstance(card, Card) else get_card(card)
    try:
        return load_dataset(card.train.data.name, root, split, **card.train.data.options)
    except UnknownNameError as exc:
        raise _not_installed(card, exc) from None


def _not_installed(card: Card, exc: UnknownNameError) -> UnknownNameError:
    """``exc`` (no plugin registers a part of ``card``) said as a plugin the card needs, naming the plugins the card
    records (``plugins``, written by ``vaezoo train``), else those its folder's ``config.json`` records (a Hub
    folder's), where it has them."""
    if exc.missing is None:
        return exc
    from vaezoo.entries.catalog import newer_release
    from vaezoo.version import __version__

    kind, name = exc.missing
    plugins = card.plugins or _config_plugins(card)
    made_with = " (it was made with " + ", ".join(f"{d} {v}" for d, v in plugins.items()) + ")" if plugins else ""
    broken = [info for info in get_plugins().info.values() if info.status != "ok"]
    left_out = get_plugins().left_out
    if left_out and not broken:  # installed, maybe, but not loaded: installing would change nothing
        error = UnknownNameError(f"card '{card.name}' needs the {kind} '{name}', which no loaded plugin registers"
                                 f"{made_with}; VAEZOO_LOAD_PLUGINS leaves out the installed plugin(s) "
                                 f"{', '.join(left_out)}: add the one that registers it to it, or unset it")
    elif broken:  # installing would change nothing: one of these may be the plugin that registers it
        said = "; ".join(f"'{info.name}' ({info.distribution} {info.version}) {info.status}: {info.error}"
                         for info in broken)
        error = UnknownNameError(f"card '{card.name}' needs the {kind} '{name}', which no loaded plugin registers"
                                 f"{made_with}; installed plugins did not load: {said}; fix or reinstall the one that "
                                 f"registers it")
    elif (shipper := _shipped_by(card)) is not None:  # installed and loaded: installing it changes nothing
        error = UnknownNameError(f"card '{card.name}' of plugin '{shipper.name}' ({shipper.distribution} "
                                 f"{shipper.version}) needs the {kind} '{name}', which neither it nor any other "
                                 f"installed plugin registers{made_with}; install the plugin that registers it, or "
                                 f"report it to {shipper.distribution}'s author")
    elif newer_release(card.vaezoo_version):  # a part a later vaezoo's built-in plugins added, maybe
        error = UnknownNameError(f"card '{card.name}' needs the {kind} '{name}', which no installed plugin registers"
                                 f"{made_with}; the card was written by vaezoo {card.vaezoo_version}, newer than this "
                                 f"vaezoo {__version__}: upgrade vaezoo, or install the plugin that registers it")
    else:
        error = UnknownNameError(f"card '{card.name}' needs the {kind} '{name}', which no installed plugin registers"
                                 f"{made_with}; install the plugin that registers it ('vaezoo plugins' lists those "
                                 f"installed)")
    error.missing = exc.missing
    return error


def _shipped_by(card: Card) -> PluginInfo | None:
    """The plugin whose card folder (``vaezoo_card_dirs``) holds ``card``'s file, if any."""
    if card.path is None:
        return None
    plugins = get_plugins()
    folder = card.path.parent.resolve()
    return next((plugins.info[owner] for owner, directory in plugins.card_dirs()
                 if Path(directory).resolve() == folder), None)


def _config_plugins(card: Card) -> dict[str, str]:
    """The ``plugins`` of the ``config.json`` beside ``card`` (a Hub folder's), or nothing where it has none."""
    config = card.path.parent / "config.json" if card.path is not None else None
    try:
        plugins = load_json(config.read_text(encoding="utf-8")[:MAX_CONFIG]).get("plugins") if config else None
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return {}
    return plugins if isinstance(plugins, dict) else {}


MAX_CONFIG = 1 << 20
"""The most of a folder's ``config.json`` read for the plugins a card needs."""
