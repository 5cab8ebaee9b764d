"""Training checkpoints: what one holds, writing it atomically, and reading it back only when it fits.

A checkpoint (``OUT/checkpoint.pt``, read with ``weights_only``) holds the model, the optimiser, the
step and the RNG states at the start of that step (every rank's under DDP), the card's recipe
(:func:`vaezoo.entries.recipe.recipe` less :data:`~vaezoo.entries.recipe.RESUMED`, the fields a resumed run may change)
with its fingerprint, and the machines the run trained on (the card's ``train.machine``). Resuming (``resume``)
refuses a checkpoint whose fingerprint is not the card's (:func:`~vaezoo.entries.recipe.check_recipe`, re-exported
here), naming both cards and the fields that differ.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from pydantic import TypeAdapter, ValidationError

from vaezoo.devices import usable_device
from vaezoo.entries.catalog import newer_release
from vaezoo.entries.recipe import ABSENT, RESUMED, Difference, canonical, check_recipe, fingerprint, recipe_differences
from vaezoo.entries.recipe import recipe as card_recipe
from vaezoo.entries.schema import PRECISION_NAMES, Card, Machine, Machines
from vaezoo.errors import Phrase, TrainingError, WeightsError, first_line, ignoring
from vaezoo.store.files import atomic_save
from vaezoo.store.limits import check_torch_zip, expanded, load_json, not_dense, unusable
from vaezoo.store.weights import is_safetensors
from vaezoo.terminal import shell_quote
from vaezoo.version import __version__

CHECKPOINT = "checkpoint.pt"
"""The checkpoint's file name in a run's folder (``out``)."""

__all__ = ["CHECKPOINT", "Checkpoint", "check_model", "check_optimizer_state", "check_recipe", "read_checkpoint",
           "refuse_training_checkpoint", "restore_rng", "write_checkpoint"]

_SHOWN_DIFFERENCES = 3  # fields named in the message of a checkpoint that does not fit


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back and checked for structure by :func:`read_checkpoint`.

    Attributes:
        path: the file.
        step: the step the run continues from.
        model: the model's state dict.
        optimizer: the optimiser's state dict.
        rng: the RNG states: ``rng_cpu`` (and ``rng_cuda``) of one process, or ``rng_ranks``, one per rank.
        card: the name of the card the run was started from; None in checkpoints written before vaezoo stored it.
        recipe: the recipe of that card (:func:`vaezoo.entries.recipe.recipe` less :attr:`leave_out`); None in
            checkpoints written before vaezoo stored it.
        auxiliary: the regularizers' training parts and their optimisers' states
            (:meth:`vaezoo.training.auxiliary.TrainingParts.state_dict`); empty for a model without any.
        machine: the machines the run trained on up to :attr:`step` (:class:`~vaezoo.entries.schema.Machine`);
            None in checkpoints written before vaezoo stored them.
    """

    leave_out: ClassVar[frozenset[str]] = RESUMED

    path: Path
    step: int
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    rng: dict[str, Any]
    card: str | None
    recipe: dict[str, Any] | None
    auxiliary: dict[str, Any] = field(default_factory=dict)
    machine: list[Machine] | None = None

    @property
    def label(self) -> str:
        """How messages name it: ``checkpoint PATH``."""
        return f"checkpoint {self.path}"

    def refusal(self, card: Card, found: list[Difference]) -> TrainingError:
        """The error refusing to resume this checkpoint with ``card``, whose recipe differs by ``found``; where
        they are fields that an argument of the run sets (its seed, its precision), it names what the run was made
        with and the arguments that resume it."""
        if found and all(d.where in OVERRIDDEN for d in found):
            # a field left out of a recipe is at its default (precision: tf32-conv, which recipes leave out)
            fields = type(card.train).model_fields

            def value(side: Any, where: str) -> Any:
                key = where.removeprefix("train.")
                held = fields[key].default if side is ABSENT else side
                return PRECISION_NAMES.get(held, held) if key == "precision" else held

            made = " and ".join(f"{{{d.where.removeprefix('train.')}:{value(d.other, d.where)}}}" for d in found)
            asked = " and ".join(f"{d.where.removeprefix('train.')} {value(d.card, d.where)}" for d in found)
            return TrainingError.about("{label} was made with " + made + ", where this run asks for {asked}; resume "
                                       "with " + made, label=self.label, asked=asked,
                                       found=_shown(found, card.name))  # an ensemble member words it otherwise
        if self.card == card.name and found and all(d.where.startswith("train.data.") for d in found):
            # the card that started the run: its dataset's options were edited, or the files they name changed
            return TrainingError.about("{label} was made from card '{made}' with its dataset read otherwise: {found}; "
                                       "the card's [train.data] options, or the files they name, changed since the "
                                       "run started: put back what it trained on, or choose another {out}",
                                       label=self.label, made=self.card, found=_shown(found, card.name))
        return TrainingError.about("{label} was made from card '{made}' with another recipe than card '{card}': "
                                   "{found}; resume with the card that started the run, or choose another {out}",
                                   label=self.label, made=self.card, card=card.name, found=_shown(found, card.name))


KEYS = frozenset({"model", "optimizer", "step", "rng_cpu", "rng_cuda", "rng_ranks", "card", "recipe", "fingerprint",
                  "auxiliary", "vaezoo_version", "machine"})
"""What a checkpoint holds; one of another key was written by a vaezoo that holds more in it."""

OVERRIDDEN = frozenset({"train.seed", "train.precision"})
"""Recipe fields that an argument of a run sets over the card's (``--seed``, ``--precision``)."""


def write_checkpoint(path: Path, card: Card, model: torch.nn.Module, optimizer: dict[str, Any], step: int,
                     rng: dict[str, Any], fix: str | Phrase, auxiliary: dict[str, Any] | None = None) -> None:
    """Write a checkpoint of ``model`` and an optimiser's state at ``step`` atomically.

    Args:
        path: the checkpoint file.
        card: the card the run was started from (its name and recipe are stored), with the machines the run
            trained on in its ``train.machine`` (stored too, where it holds them).
        model: the model to save.
        optimizer: the optimiser's ``state_dict()``.
        step: the step the run continues from.
        rng: the RNG states at the start of ``step`` (``rng_cpu``/``rng_cuda``, or ``rng_ranks``).
        fix: what the error message tells the user to do when the file cannot be written (a full disk); a
            :class:`~vaezoo.errors.Phrase` when it names arguments of the call.
        auxiliary: the state of the regularizers' training parts and their optimisers, for a model with any.

    Raises:
        OutputError: the file cannot be written; ``path`` keeps its previous checkpoint, no temporary file stays.
    """
    recipe = card_recipe(card, RESUMED)
    state = {"model": model.state_dict(), "optimizer": optimizer, "step": step, **rng,
             "card": card.name, "recipe": canonical(recipe), "fingerprint": fingerprint(recipe),
             "vaezoo_version": __version__}
    if auxiliary:
        state["auxiliary"] = auxiliary
    if card.train.machine:
        state["machine"] = [m.model_dump(exclude_none=True) for m in card.train.machine]

    def write(tmp: Path) -> None:
        # Through a Python file, whose full disk is an OSError that torch's zip writer then carries as the context
        # of a RuntimeError of its own (vaezoo.store.files.stage looks there); through a path, torch keeps no OSError.
        with open(tmp, "wb") as f:
            torch.save(state, f)

    atomic_save(path, write, fix)


def read_checkpoint(path: Path, fix: str | Phrase, card: Card | None = None) -> Checkpoint:
    """Read the checkpoint at ``path`` and check its structure.

    Args:
        path: the file.
        fix: what the error message tells the user to do when the file is not a usable checkpoint; a
            :class:`~vaezoo.errors.Phrase` when it names arguments of the call.
        card: when given, the checkpoint must be of this card's model too (:func:`check_model`).

    Returns:
        The checkpoint.

    Raises:
        TrainingError: one line naming what is wrong: no such file, unreadable, not a checkpoint of
            ``vaezoo train`` (which part is missing or malformed: model, optimiser, step, RNG state, recipe),
            or of another model than ``card``'s.
    """
    path = Path(path)

    def refused(template: str, **values: object) -> TrainingError:
        return TrainingError.about(template + "; {fix}", path=path, fix=fix, **values)

    try:
        path.stat()
    except FileNotFoundError:
        raise refused("checkpoint {path} does not exist") from None
    except OSError as exc:  # a link loop, a folder that may not be entered
        raise refused("cannot read checkpoint {path}: {problem}", problem=exc.strerror or exc) from None
    if path.is_dir():
        raise refused("checkpoint {path} is a folder, not a checkpoint file")
    if not path.is_file():
        raise refused("checkpoint {path} is not a regular file (a pipe or a device)")
    if path.stat().st_size == 0:
        raise refused("cannot read checkpoint {path}: it is an empty file")
    if is_safetensors(path):  # torch.load would read its tensors as a state dict, and miss the rest of a checkpoint
        raise refused("{path} is a weights file (safetensors), not a training checkpoint (the card folder holding it "
                      "loads it: give that as the card, without a checkpoint)")
    try:
        check_torch_zip(path)
    except ValueError as exc:
        raise refused("cannot read checkpoint {path}: {problem}", problem=exc) from None
    try:
        with ignoring(Warning):  # torch warns of a pickle protocol, then refuses the file: one line says it
            state = torch.load(path, map_location="cpu", weights_only=True)
    except PermissionError as exc:  # the file is fine: the caller's fix (remove it, start over) would lose it
        raise TrainingError.about("cannot read checkpoint {path}: {problem}; make it readable (chmod u+r), or give a "
                                  "copy you can read", path=path, problem=exc.strerror or exc) from None
    except pickle.UnpicklingError:
        raise refused("cannot read checkpoint {path}: it is not a file of tensors and plain values saved by torch "
                      "(vaezoo never unpickles other Python objects)") from None
    except Exception as exc:  # noqa: BLE001 (a damaged or foreign file makes torch.load raise many kinds of errors)
        first = first_line(exc) or type(exc).__name__
        raise refused("cannot read checkpoint {path}: it is not a file torch.save wrote, or it is damaged "
                      "({problem})", problem=first) from None

    def bad(what: str) -> TrainingError:
        return refused("{path} is not a checkpoint written by 'vaezoo train' ({problem})", problem=what)

    if not isinstance(state, dict):
        raise bad(f"it holds a {type(state).__name__}, not a dict")
    for key in ("model", "optimizer", "step"):
        if key not in state:
            raise bad(f"it holds no '{key}'")
    if unknown := [key for key in state if key not in KEYS]:
        written, held = state.get("vaezoo_version"), ", ".join(repr(key) for key in unknown)
        if not newer_release(written):  # this vaezoo and the earlier ones, which recorded no version, write none
            raise bad(f"it holds {held}, which vaezoo {__version__} and earlier never write")
        # what a newer vaezoo added to its checkpoints (a schedule's state, say) would be dropped by this one's resume
        by = f"vaezoo {written}" if written.isprintable() else "a newer vaezoo"
        raise TrainingError.about("checkpoint {path} holds {unknown}, which this vaezoo {version} does not know: "
                                  "{by} wrote it; upgrade vaezoo to read it", path=path, by=by, version=__version__,
                                  unknown=held)
    model = state["model"]
    if not isinstance(model, dict) or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in model.items()):
        raise bad("its 'model' is not a state dict of tensors")
    if problem := unusable(model):
        raise bad(f"its model {problem}")
    optimizer = state["optimizer"]
    if not isinstance(optimizer, dict) or not {"state", "param_groups"} <= optimizer.keys():
        raise bad("its 'optimizer' is not an optimiser's state dict")
    step = state["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise bad(f"its step {step!r} is not a whole number of at least 0")
    rng = {key: state[key] for key in ("rng_cpu", "rng_cuda", "rng_ranks") if key in state}
    _check_rng(rng, bad)
    name, recipe = state.get("card"), state.get("recipe")
    if recipe is not None:
        try:
            recipe = load_json(recipe)
        except (TypeError, ValueError):
            recipe = None
        if not isinstance(name, str) or not isinstance(recipe, dict) or state.get("fingerprint") != fingerprint(recipe):
            raise bad("its card name, recipe and fingerprint do not agree")
    auxiliary = state.get("auxiliary", {})
    if not isinstance(auxiliary, dict) or not {"parts", "optimizers"} <= auxiliary.keys() and auxiliary:
        raise bad("its 'auxiliary' is not the state of the regularizers' training parts")
    machine = state.get("machine")
    if machine is not None:
        try:
            machine = TypeAdapter(Machines).validate_python(machine)
        except ValidationError:
            raise bad("its 'machine' is not a list of the machines the run trained on") from None
    found = Checkpoint(path, step, model, optimizer, rng, name, recipe, auxiliary, machine)
    if card is not None:
        check_model(found, card)
    return found


def refuse_training_checkpoint(path: Path) -> None:
    """Refuse ``path`` as a checkpoint of another codebase when it is one that ``vaezoo train`` wrote, naming the
    commands that take it; any other file is left to the converter.

    Raises:
        WeightsError: ``path`` is a checkpoint of ``vaezoo train``.
    """
    try:
        found = read_checkpoint(Path(path), fix="")
    except TrainingError:
        return
    made = f"card '{found.card}', " if found.card else ""
    raise WeightsError(f"{path} is already a vaezoo training checkpoint ({made}step {found.step}), not one of "
                       f"another codebase: measure it with 'vaezoo eval CARD --checkpoint {shell_quote(str(path))}' "
                       f"or continue its run with 'vaezoo train CARD -o OUT --resume' (OUT holding it as "
                       f"{CHECKPOINT}), CARD being the run's card")


def _check_rng(rng: dict[str, Any], bad) -> None:
    """Refuse RNG states torch would not take: each CPU state is tried on the generator, which is then restored."""
    if "rng_ranks" in rng:
        ranks = rng["rng_ranks"]
        if not isinstance(ranks, list) or not ranks or not all(isinstance(r, dict) and "cpu" in r for r in ranks):
            raise bad("its 'rng_ranks' is not a list of each rank's RNG states")
        cpu = [(f"rng_ranks[{i}]", r["cpu"]) for i, r in enumerate(ranks)]
    elif "rng_cpu" in rng:
        cpu = [("rng_cpu", rng["rng_cpu"])]
    else:
        raise bad("it holds no RNG state")
    current = torch.get_rng_state()
    try:
        for name, state in cpu:
            try:
                torch.set_rng_state(state)
            except (RuntimeError, TypeError) as exc:
                raise bad(f"its RNG state {name} is not one torch can restore: {exc}") from None
    finally:
        torch.set_rng_state(current)
    cuda = rng.get("rng_cuda", [])
    if not isinstance(cuda, list) or not all(torch.is_tensor(s) and s.dtype == torch.uint8 for s in cuda):
        raise bad("its 'rng_cuda' is not a list of CUDA RNG states")


def check_model(checkpoint: Checkpoint, card: Card) -> None:
    """Refuse to load ``checkpoint``'s weights into ``card``'s model unless it was made from the same model.

    Raises:
        TrainingError: naming both cards and the model fields that differ.
    """
    if checkpoint.recipe is None:
        return  # loading the weights still checks every tensor's name and shape
    theirs = {k: checkpoint.recipe[k] for k in ("architecture", "model") if k in checkpoint.recipe}
    mine = card_recipe(card, RESUMED | {"train"})
    if fingerprint(mine) != fingerprint(theirs) and (found := recipe_differences(theirs, mine)):  # 10 and 10.0 are one
        raise TrainingError(f"{checkpoint.label} was made from card '{checkpoint.card}', whose model is "
                            f"not that of card '{card.name}': {_shown(found, card.name)}; "
                            f"give the card the run was started from")


def check_optimizer_state(checkpoint: Checkpoint, optimizer: torch.optim.Optimizer) -> None:
    """Refuse ``checkpoint``'s optimiser state unless every tensor in it fits ``optimizer``'s parameters, as its
    weights are checked: call it before ``optimizer.load_state_dict``, so that a bad state is one line before the
    first step rather than a ``RuntimeError`` in it (``load_state_dict`` checks none of this).

    Each parameter's state is checked against the parameter it is for (by the order of the param groups): its
    tensors are dense tensors in CPU memory that span no more bytes than they store (no stride-0 view), of a
    floating-point dtype (a ``step`` count may be an integer), finite, and either a scalar (a step count) or of the
    parameter's shape (moments, momentum buffers).

    Raises:
        TrainingError: one line naming the checkpoint, the parameter, the state's key and what is wrong.
    """
    def refused(problem: str) -> TrainingError:
        return TrainingError.about("the optimiser state in checkpoint {path} cannot be resumed: {problem}; resume "
                                   "from a checkpoint vaezoo wrote, or remove it to start over", path=checkpoint.path,
                                   problem=problem)

    groups, state = checkpoint.optimizer["param_groups"], checkpoint.optimizer["state"]
    params: dict[Any, torch.Tensor] = {}
    fits = isinstance(groups, list) and len(groups) == len(optimizer.param_groups)
    for theirs, mine in zip(groups, optimizer.param_groups) if fits else ():
        ids = theirs.get("params") if isinstance(theirs, dict) else None
        fits = fits and isinstance(ids, list) and len(ids) == len(mine["params"])
        if fits:
            params.update(zip(ids, mine["params"]))
    if not fits or not isinstance(state, dict):
        return  # groups that are not this optimiser's: load_state_dict names what differs
    for index, values in state.items():
        if index not in params:
            raise refused(f"it holds a state for parameter {index!r}, which none of its groups lists")
        if not isinstance(values, dict):
            raise refused(f"the state of parameter {index} is a {type(values).__name__}, not a dict")
        param = params[index]
        for key, value in values.items():
            if torch.is_tensor(value):
                problem = _unfit_state(value, param, key)
                if problem:
                    raise refused(f"parameter {index} {tuple(param.shape)}: its {key!r} {problem}")


def _unfit_state(value: torch.Tensor, param: torch.Tensor, key: str) -> str | None:
    """What makes the optimiser state tensor ``value`` unfit for ``param``, in words; None when it fits."""
    if not_dense({key: value}):
        return "is not a dense tensor in CPU memory (sparse, quantized, nested or on the meta device)"
    if expanded({key: value}):
        return "spans more bytes than it stores (a stride-0 or overlapping view)"
    scalar = value.numel() == 1 and value.dim() <= 1
    if not (value.is_floating_point() or (scalar and key == "step" and not value.dtype.is_complex
                                          and value.dtype != torch.bool)):
        return f"is {value.dtype}, not floating point"
    if not scalar and tuple(value.shape) != tuple(param.shape):
        return f"has shape {tuple(value.shape)}, not the parameter's"
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        return "holds NaN or infinite values"
    return None


def _shown(found: list[Difference], name: str) -> str:
    """Where two recipes differ: ``model.hidden 32 in the checkpoint, 64 in card 'NAME'``, the first few."""
    shown = [f"{d.where} {_show(d.other, d.where)} in the checkpoint, {_show(d.card, d.where)} in card '{name}'"
             for d in found]
    more = f" and {len(shown) - _SHOWN_DIFFERENCES} more" if len(shown) > _SHOWN_DIFFERENCES else ""
    return "; ".join(shown[:_SHOWN_DIFFERENCES]) + more


def _show(value: Any, where: str) -> str:
    if where == "train.precision" and isinstance(value, str):  # a recipe holds bf16-mixed by its old name, "bf16"
        value = PRECISION_NAMES.get(value, value)
    return "absent" if value is ABSENT else json.dumps(value, ensure_ascii=False)


def restore_rng(checkpoint: Checkpoint, rank: int, world: int, device: torch.device | str) -> bool:
    """Set this process's RNG states to those ``checkpoint`` holds for it: the CPU's and, under DDP, those of
    ``device`` (``"auto"`` too: :func:`vaezoo.devices.usable_device`).

    Returns:
        False when the checkpoint holds no states for a run of ``world`` processes (it was made with another
        number of processes); nothing is set then.
    """
    ranks = checkpoint.rng.get("rng_ranks")
    if world == 1 and ranks is None:
        torch.set_rng_state(checkpoint.rng["rng_cpu"])
        if "rng_cuda" in checkpoint.rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(checkpoint.rng["rng_cuda"])
        return True
    if ranks is None or len(ranks) != world:
        return False
    torch.set_rng_state(ranks[rank]["cpu"])
    device = usable_device(device)
    if "cuda" in ranks[rank] and device.type == "cuda":
        torch.cuda.set_rng_state(ranks[rank]["cuda"], device)
    return True
