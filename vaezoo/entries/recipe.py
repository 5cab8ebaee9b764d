"""What decides a run: a card's recipe, its fingerprint, and where two recipes differ.

A card's recipe is its ``architecture``, ``dataset``, ``model`` and ``train`` sections as JSON values, less
the fields a question leaves out (dotted names):

- :data:`RECORDS` are never part of it: they say how a run went (``steps``, ``budget``), where it ran
  (``machine``) or how often it saved.
- :data:`RESUMED` is what a resumed run may change besides: ``epochs`` extends or shortens the run, ``compile``
  computes the same function in another way (it changes the numbers only at float rounding, as the device
  does), and ``dataset``, the name listings show, which checkpoints never stored (``train.data`` is what
  the run reads).
- :data:`SEEDED` is what runs of one recipe over several seeds may differ in: the seed.

``train.precision`` at ``tf32-conv``, its default (torch's default flags, once named ``float32``), is left out too,
so that recipes recorded before the field existed still fit; any other precision is part of the recipe, and
``bf16-mixed`` is written by its old name ``bf16``, so that checkpoints written under that name still resume. The
fingerprint is the sha256 of a recipe's canonical JSON (keys sorted, no spaces): checkpoints store both.

:func:`check_recipe` is the one check that something recorded (a training checkpoint, a completed run) was
made from a card's recipe; what it records says which fields it leaves out and how its refusal reads. A part's
setting written at the default the part declares is the same recipe as the setting left out
(:func:`recipe_differences`).

Runs of one recipe over several seeds (``vaezoo seeds``, a study's cells) are refused in one wording wherever they
trained otherwise (:func:`trained_otherwise`: steps, precision, kinds of device) or were measured otherwise
(:func:`measured_otherwise`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from vaezoo.entries.schema import Card

RECORDS = frozenset({"train.steps", "train.budget", "train.checkpoint_every", "train.machine"})
"""Fields that record how a run went, where it ran or how often it saved: left out of every recipe."""

RESUMED = RECORDS | {"dataset", "train.epochs", "train.compile"}
"""Fields left out when a checkpoint is resumed: the resumed run may change them."""

SEEDED = RECORDS | {"train.seed"}
"""Fields left out when runs over several seeds are gathered: they repeat one recipe but the seed."""

_LEGACY_DEFAULTS = {"precision": "tf32-conv"}  # train fields left out at their default (recipes older than them)
_LEGACY_VALUES = {"precision": {"bf16-mixed": "bf16"}}  # values written as recipes older than their names wrote them


def recipe(card: Card, leave_out: Iterable[str] = RESUMED) -> dict[str, Any]:
    """What decides a run of ``card``, as JSON values in the card's order.

    Args:
        card: the card.
        leave_out: dotted names of the fields to leave out (:data:`RESUMED`, :data:`SEEDED`).

    Returns:
        ``{"architecture", "dataset", "model", "train"}`` less ``leave_out``.
    """
    leave_out = set(leave_out)
    train = card.train.model_dump(mode="json", exclude={f.partition(".")[2] for f in leave_out
                                                        if f.startswith("train.")})
    for key, default in _LEGACY_DEFAULTS.items():
        if train.get(key) == default:
            del train[key]
    for key, names in _LEGACY_VALUES.items():
        if key in train:
            train[key] = names.get(train[key], train[key])
    whole = {"architecture": card.architecture, "dataset": card.dataset,
             "model": json.loads(json.dumps(card.model, ensure_ascii=False, default=str)), "train": train}
    return {k: v for k, v in whole.items() if k not in leave_out}


def canonical(value: Any) -> str:
    """``value`` as canonical JSON: keys sorted, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def fingerprint(recipe: dict[str, Any]) -> str:
    """The hex sha256 of ``recipe``'s canonical JSON (:func:`canonical`)."""
    return hashlib.sha256(canonical(recipe).encode()).hexdigest()


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""The value of a :class:`Difference`'s side that does not hold its key."""


@dataclass(frozen=True)
class Difference:
    """One place where two recipes (or any two tables) differ.

    Attributes:
        where: the dotted path (``model.regularizers.0.beta``).
        other: the value on the side being checked, or :data:`ABSENT`.
        card: the value on the card's side, or :data:`ABSENT`.
    """

    where: str
    other: Any
    card: Any


def differences(other: Any, card: Any, where: str = "") -> list[Difference]:
    """Every place where ``other`` differs from ``card``.

    Tables are compared key by key (``card``'s keys first, in order, then ``other``'s own), and so are lists
    of tables of equal length, item by item (``regularizers.0``); anything else, a list of numbers
    included, is one value compared with ``==``.

    Args:
        other: the checked side (a recorded recipe, a run's settings).
        card: the card's side.
        where: the dotted path of both values.

    Returns:
        The differences, in that order; empty when the values are equal.
    """
    if isinstance(other, dict) and isinstance(card, dict):
        keys = [*card, *(k for k in other if k not in card)]
        return [d for k in keys for d in differences(other.get(k, ABSENT), card.get(k, ABSENT), _join(where, k))]
    if (isinstance(other, list) and isinstance(card, list) and len(other) == len(card)
            and any(isinstance(v, dict) for v in (*other, *card))):
        return [d for i, (a, b) in enumerate(zip(other, card)) for d in differences(a, b, _join(where, i))]
    return [] if other == card else [Difference(where, other, card)]


def _join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


class Trained(Protocol):
    """How a run of a recipe trained, as a card's ``train`` section (:class:`~vaezoo.entries.schema.TrainRecipe`)
    or a row of a study records it."""

    @property
    def steps(self) -> int | None:
        """The steps it made; None where unrecorded."""

    @property
    def precision(self) -> str:
        """The precision it trained in."""

    @property
    def devices(self) -> tuple[str, ...]:
        """The kinds of device it trained on (``train.machine``), in order; empty where unrecorded."""


def trained_otherwise(one: Trained, other: Trained, names: tuple[str, str], fixed: str = "") -> str | None:
    """What makes two runs of one recipe other than two seeds' draws of one result, in one line naming each: the
    steps they made (one stopped short), their precision, or the kinds of device they trained on (a GPU computes a
    recipe otherwise than the CPU). Another thread count or GPU only rounds otherwise, as another seed draws
    otherwise: such runs are alike. Each is compared where both record it.

    Args:
        one, other: the runs.
        names: how the line names ``one`` and ``other`` (``run PATH``, ``seed 3 (PATH)``).
        fixed: the name of a run that cannot be left out (the card the others repeat): stopped short, it is said to
            be given finished instead.

    Returns:
        The line, what differs first, then what to do; None when they trained alike.
    """
    (a, b), (name_a, name_b) = (one, other), names
    steps_a, steps_b = a.steps, b.steps
    if steps_a is not None and steps_b is not None and steps_a != steps_b:
        (short_name, short), (whole_name, whole) = sorted(((name_a, steps_a), (name_b, steps_b)), key=lambda r: r[1])
        instead = "give a finished run's card" if short_name == fixed else "leave it out"
        return (f"{short_name} stopped at step {short:,}, where {whole_name} made {whole:,}: a run stopped short of "
                f"its recipe's steps is not its result; finish it with 'vaezoo train ... --resume', or {instead}")
    if a.precision != b.precision:
        return (f"{name_a} trained in {a.precision}, {name_b} in {b.precision}: the runs of one recipe share one "
                f"precision; leave out the runs of the other")
    if a.devices and b.devices and a.devices != b.devices:
        return (f"{name_a} trained on {' then '.join(a.devices)}, {name_b} on {' then '.join(b.devices)}: the runs "
                f"of one recipe train on one kind of device (a GPU computes it otherwise than the CPU, as another "
                f"precision does); leave out the runs of the other")
    return None


def measured_otherwise(metric: str, one: dict[str, Any], other: dict[str, Any], names: tuple[str, str]) -> str | None:
    """The first setting metric ``metric`` was measured with otherwise on two runs (their cards'
    ``[metrics.NAME] parameters``), in one line naming each run by ``names``, with the command that measures them
    alike; None when they were measured alike."""
    found = differences(one, other)
    if not found:
        return None
    setting, mine, theirs = found[0].where, found[0].other, found[0].card

    def shown(value: Any) -> str:
        return "(not set)" if value is ABSENT else repr(value) if isinstance(value, str) else str(value)

    return (f"{metric} is measured with {setting} = {shown(mine)} on {names[0]} and {shown(theirs)} on {names[1]}: "
            f"runs measured otherwise are not compared; measure them alike with 'vaezoo eval RUN --metrics {metric} "
            f"--write --force' (and --set {metric}.{setting}=VALUE for a setting other than its default)")


_PART_KINDS = {"latent": "latent family", "parts": "latent family", "encoder": "net", "decoder": "net",
               "likelihood": "likelihood", "regularizers": "regularizer"}
"""The registry kind of the part specs a model section holds under each key (the ``vae`` architecture's, a joint
latent's ``parts``)."""


def recipe_differences(other: dict[str, Any], card: dict[str, Any]) -> list[Difference]:
    """Where recipe ``other`` differs from ``card``'s, a setting of a part written on one side at the value the part
    declares as its default and left out on the other aside (it is the same recipe).

    Returns:
        :func:`differences` of the two recipes as written, less those that vanish once every part's declared
        defaults are filled in (:func:`with_defaults`); the others read as written.
    """
    found = differences(other, card)
    real = {d.where for d in differences(with_defaults(other), with_defaults(card))}
    return [d for d in found if d.where in real]


def with_defaults(recipe: dict[str, Any]) -> dict[str, Any]:
    """``recipe`` with each setting its ``model`` leaves out that the architecture, or a part it names (a latent
    family, a net, a likelihood, a regularizer), declares with a default written out at that default, as JSON.

    A part that is not installed, and a default that is not a JSON value, are left as written.
    """
    model, architecture = recipe.get("model"), recipe.get("architecture")
    if not isinstance(model, dict) or not isinstance(architecture, str):
        return recipe
    return {**recipe, "model": _filled("architecture", architecture, model)}


def _filled(kind: str, name: str, settings: dict[str, Any]) -> dict[str, Any]:
    from vaezoo.context import FACTS
    from vaezoo.plugins import registry

    parts = registry(kind)
    if name not in parts:
        return settings
    filled = dict(settings)
    for key, param in inspect.signature(parts[name]).parameters.items():
        if key in filled or key == "context" or key in FACTS or param.default is param.empty:
            continue
        try:
            filled[key] = json.loads(json.dumps(param.default))
        except (TypeError, ValueError):  # a class, a function: no card writes it
            continue
    for key, sub in _PART_KINDS.items():
        if isinstance(filled.get(key), list):
            filled[key] = [_filled_spec(sub, spec) for spec in filled[key]]
        elif key in filled:
            filled[key] = _filled_spec(sub, filled[key])
    return filled


def _filled_spec(kind: str, spec: Any) -> Any:
    if isinstance(spec, dict) and isinstance(spec.get("type"), str):
        return _filled(kind, spec["type"], spec)
    return spec


class Recorded(Protocol):
    """Something made from a recipe that records it: a training checkpoint, a completed run."""

    @property
    def leave_out(self) -> frozenset[str]:
        """The fields it may differ from the card in (:data:`RESUMED`, :data:`SEEDED`); a class's constant."""

    @property
    def label(self) -> str:
        """How messages name it (``checkpoint PATH``, ``run PATH``)."""

    @property
    def recipe(self) -> dict[str, Any] | None:
        """The recipe it records (with :attr:`leave_out` left out); None when it records none."""

    def refusal(self, card: Card, found: list[Difference]) -> Exception:
        """The error saying it was not made from ``card``'s recipe, naming ``found``."""


def check_recipe(recorded: Recorded, card: Card, under: str = "") -> None:
    """Refuse ``recorded`` unless it was made from ``card``'s recipe, its :attr:`~Recorded.leave_out` aside.

    Something that records no recipe (a checkpoint an older vaezoo wrote) passes with a warning. With ``under``
    (a prefix of fields: ``train.data.``) it is refused only where a field under it differs, naming every field that
    differs, and passes silently where it records no recipe: a check made early, before what those fields name is
    read, ahead of the whole check.

    Raises:
        VaezooError: ``recorded``'s :meth:`~Recorded.refusal`, naming the fields that differ.
    """
    theirs = recorded.recipe
    if theirs is None and under:
        return
    if theirs is None:
        from vaezoo.errors import RecipeWarning

        warnings.warn(f"{recorded.label} holds no recipe (an older vaezoo wrote it), so it cannot be checked "
                      f"against card '{card.name}'; it is taken as made from that card's recipe", RecipeWarning,
                      stacklevel=2)
        return
    mine = recipe(card, recorded.leave_out)
    # equal values written otherwise (10 and 10.0, as --sweep takes them to be one card), and a part's setting
    # written at its default or left out, are the same recipe
    if fingerprint(theirs) != fingerprint(mine) and (found := recipe_differences(theirs, mine)) and \
            any(d.where.startswith(under) for d in found):
        raise recorded.refusal(card, [_as_named(d) for d in found])


def _as_named(difference: Difference) -> Difference:
    """``difference`` of a train field that recipes write otherwise than cards (left out at its default, or by an
    older name) with both sides as a card names them: ``tf32-conv`` and ``bf16-mixed``, not absent and ``bf16``."""
    key = difference.where.removeprefix("train.")
    if difference.where == key or key not in _LEGACY_DEFAULTS:
        return difference
    names = {old: new for new, old in _LEGACY_VALUES.get(key, {}).items()}

    def named(value: Any) -> Any:
        return _LEGACY_DEFAULTS[key] if value is ABSENT else names.get(value, value)

    return Difference(difference.where, named(difference.other), named(difference.card))
