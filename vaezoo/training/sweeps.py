"""The members of an ensemble: a card's runs over seeds and over the values of swept card fields.

A sweep, ``KEY=V1,V2,...`` (``vaezoo train --sweep``), names a field of the card's ``model`` or ``train``
table the way ``vaezoo list --where`` does: by its dotted path (``model.regularizers.0.beta``) or by any tail of it
(``beta``) that names one field only. Values are read as TOML values (``4``, ``1e-4``, ``true``, ``"mss"``), an
array's commas (``betas=[0.5,0.9],[0.9,0.99]``) and a string's apart.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vaezoo.context import parse_value, real_number, whole_number
from vaezoo.entries.checkpoints import CHECKPOINT
from vaezoo.entries.recipe import RECORDS, RESUMED, canonical, recipe
from vaezoo.entries.schema import SEED_LIMIT, Card
from vaezoo.errors import TrainingError

__all__ = ["Sweep", "MemberSpec", "check_spelling", "members", "parse_sweep"]


@dataclass(frozen=True)
class Sweep:
    """A card field and the values an ensemble trains it with.

    Attributes:
        key: the field as given (its folder names use it).
        values: the values, as read from TOML.
    """

    key: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class MemberSpec:
    """One member of an ensemble: its card, its folder under the ensemble's, and how messages name it."""

    card: Card
    folder: Path
    label: str


def parse_sweep(text: str) -> Sweep:
    """``KEY=V1,V2,...`` as a :class:`Sweep`.

    Raises:
        TrainingError: no ``=``, no key, no value, an empty value (``1,,2``), or a value that is not one TOML value.
    """
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise TrainingError.of_value("{sweep} takes KEY=V1,V2,..., got '{text}'", text=text)
    empty = next((i for i, v in enumerate(_split(values), 1) if not v.strip()), None)
    if empty is not None:  # a comma too many: '' was swept, and refused as the field's value ("beta = ''")
        raise TrainingError.of_value("{sweep} {text}: value {n} is empty; give the values separated by single commas",
                                     text=text, n=empty)
    try:
        parsed = tuple(parse_value(v.strip()) for v in _split(values))
    except ValueError as e:
        raise TrainingError.of_value("{sweep} {key}: {why}", key=key, why=str(e)) from None
    return Sweep(key, parsed)


def _split(values: str) -> list[str]:
    """``values`` cut at its commas outside TOML arrays, inline tables and strings: ``[0.5, 0.9],[0.9, 0.99]`` is two
    values, ``"a,b",c`` too."""
    parts, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(values):
        if quote is not None:
            if c == quote and not (quote == '"' and values[i - 1] == "\\"):
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(values[start:i])
            start = i + 1
    return [*parts, values[start:]]


def members(card: Card, seeds: Sequence[int], sweeps: Sequence[Sweep]) -> list[MemberSpec]:
    """Every seed crossed with every combination of the sweeps' values, in order.

    A member's folder is ``seed-N``, under ``KEY=VALUE`` for each sweep (``KEY=VALUE,KEY2=VALUE2`` for two).

    Raises:
        TrainingError: a key names no field or several, a sweep changes the dataset or a field that changes no
            member's weights (``compile``, one for all the members' shared step; ``steps``, ``checkpoint_every``),
            a seed is repeated, two values make the same card (``1`` and ``1.0``), a value cannot name a folder
            (``../x``), or a value does not fit its field (one line naming the field and the value).
    """
    seeds = [seed if whole_number(seed) is None else whole_number(seed) for seed in seeds]  # numpy's too, as ints
    # a numpy or torch number as the Python one it is: the cards are written as TOML, their recipes as JSON
    sweeps = [Sweep(s.key, tuple(v if real_number(v) is None else real_number(v) for v in s.values)) for s in sweeps]
    if not seeds or len(set(seeds)) != len(seeds):
        raise TrainingError.of_value("{seeds} must name each seed once, got {got}",
                                     got=",".join(map(str, seeds)) or "none")
    for seed in seeds:
        if type(seed) is not int or not 0 <= seed < SEED_LIMIT:
            raise TrainingError.of_value("{seeds}: {seed!r} is not a seed; give whole numbers from 0 to 2^63 - 1",
                                         seed=seed)
    paths = [_resolve(card, s.key) for s in sweeps]
    if len(set(paths)) != len(paths):
        raise TrainingError.of_value("two {sweep} options name the same field; give each field once")
    out, seen = [], {}
    for combo in itertools.product(*(s.values for s in sweeps)):
        tag = ",".join(f"{s.key}={_show(v)}" for s, v in zip(sweeps, combo))
        _check_folder_name(tag)
        varied = card
        for path, value in zip(paths, combo):
            varied = _with_value(varied, path, value)
        if (varied.train.epochs, varied.train.batch_size) != (card.train.epochs, card.train.batch_size):
            # the budget told the length of the card's own run, as for --epochs (TrainOptions.recipe)
            varied = varied.model_copy(update={"train": varied.train.model_copy(update={"budget": None})})
        made = canonical(recipe(varied, RESUMED - {"train.epochs"}))  # what decides the weights it trains
        if made in seen:
            raise TrainingError.of_value("{sweep} values {one} and {other} make the same card; give each value once",
                                         one=seen[made], other=tag)
        seen[made] = tag
        for seed in seeds:
            member = varied.model_copy(update={"train": varied.train.model_copy(update={"seed": seed})})
            folder = Path(tag) / f"seed-{seed}" if tag else Path(f"seed-{seed}")
            out.append(MemberSpec(member, folder, f"{tag} seed {seed}".strip()))
    return out


def check_spelling(card: Card, root: Path, specs: Sequence[MemberSpec]) -> None:
    """Before an ensemble in ``root`` resumes: refuse a member of ``members(card, ...)`` whose folder is new where
    another folder holds that member's run, its sweep spelled otherwise (``lr=1e-3`` for ``lr=0.001``, ``beta=1``
    for ``beta=1.0``, ``model.regularizers.0.beta`` for ``beta``): resumed so, it would start afresh beside it.

    Raises:
        TrainingError: naming both folders and the spelling the run was started with.
    """
    same = (RESUMED - {"train.epochs"}) | {"train.seed"}
    for spec in specs:
        if len(spec.folder.parts) < 2 or (root / spec.folder).exists():
            continue
        made = canonical(recipe(spec.card, same))
        for other in sorted(root.glob(f"*/{spec.folder.name}/{CHECKPOINT}")):
            tag = other.parent.parent.name
            try:
                varied = card
                for part in _split(tag):
                    key, _, value = part.partition("=")
                    varied = _with_value(varied, _resolve(card, key), parse_value(value))
            except (TrainingError, ValueError):  # a folder of no sweep of this card
                continue
            if canonical(recipe(varied, same)) == made:
                raise TrainingError.about("{out} {root} holds the run of {label} in {other}, where {sweep} now spells "
                                          "it {now}: resumed so, it would start afresh in {folder}; resume with the "
                                          "values spelled as the run was started ({tag})", root=root,
                                          label=spec.label, other=other.parent, now=spec.folder.parent.name,
                                          folder=root / spec.folder, tag=tag)


def _check_folder_name(tag: str) -> None:
    """Refuse a member's folder name that is not one plain file name (a value holding ``/``, a control
    character, ...), so that every member's run stays inside the ensemble's folder."""
    if any(c in "/\\" or not c.isprintable() for c in tag) or len(tag.encode()) > 255:
        raise TrainingError.of_value("{sweep} {tag}: a swept value names its member's folder, so it must be a plain "
                                     "file name (no '/', '\\' or control characters, at most 255 bytes)", tag=tag)


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _resolve(card: Card, key: str) -> tuple[str | int, ...]:
    """The path of keys of the one field ``key`` names.

    A key of the card that holds a dot is named as TOML quotes it (``model."a.b"``), or with its dot bare where
    that names one field only.
    """
    named = {path: ".".join(f'"{part}"' if "." in str(part) else str(part) for part in path)
             for path in card.leaves()}
    found = [path for path, name in named.items() if _names(name, key)] or \
        [path for path in named if _names(".".join(map(str, path)), key)]
    if not found:
        raise TrainingError.about("{sweep} {key}: the card has no such field; the fields it sweeps are {fields} (a "
                                  "setting left at its default is not on the card: write it there to sweep it)",
                                  key=key, fields=", ".join(name for name in named.values()
                                                            if _refusal(name, name) is None))
    if len(found) > 1:
        raise TrainingError.about("{sweep} {key} names several fields ({found}); give the whole dotted path", key=key,
                                  found=", ".join(named[path] for path in found))
    if (refused := _refusal(named[found[0]], key)) is not None:
        raise refused
    return found[0]


def _refusal(name: str, key: str) -> TrainingError | None:
    """Why the card's field ``name``, which ``key`` names, cannot be swept (whatever the card holds: a usage error);
    None where it can."""
    if name == "train.seed":
        return TrainingError.of_value("{sweep} {key}: give the seeds with {seeds}", key=key)
    if any(name == record or name.startswith(f"{record}.") for record in RECORDS):  # train.machine.0.threads
        return TrainingError.of_value("{sweep} {key}: {path} records how a run went or how often it saved, and does "
                                      "not change what it trains; sweep a field of the recipe", key=key, path=name)
    if name == "train.compile":  # it computes the same weights in another way, and every member shares one step
        return TrainingError.of_value("{sweep} {key}: the members of an ensemble share one step, compiled for all or "
                                      "for none, and torch.compile changes only float rounding; train with "
                                      "{compile:True} to compile the ensemble's step, and sweep a field of the recipe",
                                      key=key)
    if name.startswith("train.data"):
        return TrainingError.of_value("{sweep} {key}: the members of an ensemble share their dataset; train another "
                                      "dataset in its own run", key=key)
    return None


def _names(name: str, key: str) -> bool:
    """Whether ``key`` names the field ``name``: the whole dotted path or a tail of it."""
    return name == key or name.endswith("." + key)


def _with_value(card: Card, path: tuple[str | int, ...], value: Any) -> Card:
    """``card`` with the field at ``path`` (:meth:`~vaezoo.entries.schema.Card.leaves`) set to ``value``, validated
    as a card is."""
    data = card.model_dump(mode="python")
    *parents, key = path
    node = data
    for part in parents:
        node = node[part]
    old = node[key]
    node[key] = float(value) if isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool) \
        else value
    try:
        varied = Card.model_validate(data)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"]  # its first letter only: it may quote the values the field takes ('Adam')
        shown = json.dumps(value) if isinstance(value, str) else _show(value)  # "3" is no integer, 3 would be
        raise TrainingError.of_value("{sweep} {path}={value}: {problem}", path=".".join(map(str, path)),
                                     value=shown, problem=message[:1].lower() + message[1:]) from None
    varied._path, varied._source = card._path, card._source
    return varied
