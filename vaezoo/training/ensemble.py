"""Several runs of a recipe trained as one: their parameters stacked, one step for all of them.

The members of an ensemble are runs of a card that differ in their seed and, in a sweep, in card fields.
Members whose models differ only in their weights form a :class:`Stack`: their parameters and buffers are
stacked along a new first dimension, ``functional_call`` runs every member's forward pass on its slice
(all at once under ``torch.func.vmap``, or in turn), one backward pass gives each member its own gradients
(the loss is the sum of the members' losses, which share no parameter), and one optimiser step updates
them all. Every optimiser a card can name (Adam, AdamW, SGD, RMSprop) updates each number from its own
gradient and state alone, so the stacked step is each member's own step.

Each member keeps what makes it the run it would be alone:

- its data order (its seed's shuffle) and its batches, cut from the dataset on the device;
- its sampling noise: the model's random draws are recorded once per batch size (:class:`NoiseTape`); before
  each step every member makes those draws from its own random streams, exactly as it would alone, and the
  forward passes take them in order instead of drawing;
- its optimiser state, sliced out of the stacked one into a checkpoint a single run can resume, and back;
- its regularizers' training parts (FactorVAE's discriminator, :mod:`vaezoo.training.auxiliary`): stacked like the
  model's parameters, one optimiser per part over the stacked tensors, and after the model's step every member's
  update on its own slice, with its own second batch and noise, drawn from its own streams as its solo run draws
  them;
- its checkpoint, written at the steps and with the RNG states a single run would write.

Nothing waits for the device inside the loop: a non-finite loss is noted on the device, with its step and
which of its terms were not finite, and read every ``check_every`` steps and before each checkpoint. A
member whose loss became NaN or inf stops there, named with those terms, and keeps its last checkpoint; the
others go on.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap
from torch.overrides import TorchFunctionMode

from vaezoo.data import ImageDataset
from vaezoo.entries.schema import Card, Machine
from vaezoo.errors import Phrase, TrainingError, TrainingWarning, first_line
from vaezoo.model import VAE
from vaezoo.regularizers.base import UpdateBatch
from vaezoo.terminal import note
from vaezoo.entries.checkpoints import CHECKPOINT, Checkpoint, write_checkpoint
from vaezoo.latents.base import distribution_checks
from vaezoo.training.loop import (Plan, Run, Streams, check_before_training, check_run_folder, device_store,
                                  diverged, epoch_order, last_good, make_optimizer, on_machines,
                                  optimizer_step, precision_flags, resume_point, rng_state,
                                  StepOverflow, this_machine, until)
from vaezoo.training.auxiliary import TrainingParts
from vaezoo.training.compiling import Compiled, step_tensor
from vaezoo.training.progress import Reporter
from vaezoo.training.settings import differing, float_settings, structure, swapped
from vaezoo.signals import Interrupted, StopSignals

__all__ = ["Member", "NoiseTape", "Stack", "fit_ensemble"]

_FILLS = frozenset({Tensor.normal_, Tensor.uniform_, Tensor.exponential_, Tensor.geometric_, Tensor.log_normal_,
                    Tensor.cauchy_, Tensor.random_})
_LIKE = frozenset({torch.rand_like, torch.randn_like, torch.randint_like})
_FACTORIES = frozenset({torch.rand, torch.randn, torch.randint})


@dataclass(frozen=True)
class Draw:
    """One random draw of a forward pass, made again on demand from the global generators.

    Attributes:
        func: the drawing function (e.g. ``Tensor.normal_``, ``torch.rand``).
        like: ``(shape, dtype, device)`` of the fresh tensor that a fill (``normal_``) or a ``*_like`` draw
            starts from; None for a factory (``torch.rand(shape)``).
        args, kwargs: the rest of the call.
    """

    func: Callable
    like: tuple[tuple[int, ...], torch.dtype, torch.device] | None
    args: tuple
    kwargs: dict[str, Any]

    def __call__(self) -> Tensor:
        if self.like is None:
            return self.func(*self.args, **self.kwargs)
        shape, dtype, device = self.like
        return self.func(torch.empty(shape, dtype=dtype, device=device), *self.args, **self.kwargs)


class NoiseTape(TorchFunctionMode):
    """Records the random draws of a forward pass, or replays given noise in their place.

    Recording (no ``noise``), each draw is made as usual and noted as a :class:`Draw`. Replaying, each draw
    returns the next tensor of ``noise`` instead; a draw by another function than the one recorded at that
    place is refused. A fill such as
    ``torch.empty(shape).normal_()`` is replaced by its result: the code must use what the fill returns, as
    ``torch.distributions`` does.

    Args:
        noise: the tensors to hand out, in the order of the recorded draws.
        expected: the recorded draws, to check ``noise`` against.
    """

    def __init__(self, noise: Sequence[Tensor] | None = None, expected: Sequence[Draw] = ()):
        super().__init__()
        self.noise = None if noise is None else list(noise)
        self.expected = list(expected)
        self.draws: list[Draw] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _FILLS or func in _LIKE or func in _FACTORIES:
            if self.noise is None:
                like = None if func in _FACTORIES else (tuple(args[0].shape), args[0].dtype, args[0].device)
                self.draws.append(Draw(func, like, tuple(args if like is None else args[1:]), kwargs))
            else:
                return self._next(func)
        return func(*args, **kwargs)

    def _next(self, func) -> Tensor:
        index = len(self.expected) - len(self.noise)
        if not self.noise or self.expected[index].func is not func:
            raise TrainingError.about("the model's random draws changed between steps (draw {draw} is {func}); an "
                                      "ensemble needs the same draws every step: train the runs one at a time "
                                      "with {seed}", draw=index + 1, func=getattr(func, "__name__", func))
        return self.noise.pop(0)


@dataclass
class Member:
    """One run of an ensemble: its card, folder, model, random streams, shuffle and progress.

    Attributes:
        card: the run's card (its seed and, in a sweep, its values).
        out: the run's folder.
        label: how messages name the member, e.g. ``seed 1`` or ``beta=4 seed 1``.
        model: the run's model; it holds the member's weights whenever they are written out.
        optimizer: an optimiser of the model alone, the template of the member's checkpoint.
        parts: its regularizers' training parts and their optimisers, the template of the member's checkpoint.
        streams: the member's states of torch's global generators.
        shuffle: the generator of its data order.
        saved: the step of its last checkpoint, None before the first.
        step: the step it reached.
        began: the step it began at in this process: 0, or its checkpoint's.
        machines: the machines it trained on before (its checkpoint's); its card records them, and the stack's
            machine once it has trained there.
        had_folder: whether ``out`` was there when the member began (else its first checkpoint makes it).
        error: why it stopped early (its loss became NaN or inf), or None.
    """

    card: Card
    out: Path
    label: str
    model: VAE
    optimizer: torch.optim.Optimizer
    parts: TrainingParts
    streams: Streams
    shuffle: torch.Generator
    saved: int | None
    step: int
    began: int
    machines: tuple[Machine, ...]
    had_folder: bool
    error: str | None = None
    epoch: int = -1
    order: Tensor | None = None

    @classmethod
    def start(cls, card: Card, out: Path, label: str, model: VAE, plan: Plan, resume: bool, run: Run,
              read: dict[Path, Checkpoint] | None = None) -> Member:
        """The member at its first step: from its checkpoint in ``out`` when ``resume`` (and one is there), taken
        out of ``read`` where it was read already."""
        optimizer = make_optimizer(card.train, model.parameters())
        parts = TrainingParts(model)
        checkpoint = Path(out) / CHECKPOINT
        torch.manual_seed(card.train.seed)  # the member's stream of sampling noise, as a single run seeds it
        try:
            resumed = resume_point(checkpoint, card, model, optimizer, plan, resume, run, parts, read)
        except TrainingError as exc:
            found = exc.phrase.values.get("found") if exc.option == "seed" else None
            if found is None:  # not the advice of a single run, --seed N, which an ensemble's --seeds does not take
                raise
            raise TrainingError(f"checkpoint {checkpoint} is of another seed than member {label} ({found}); put it "
                                f"back in its own seed's folder, or remove it to train this member afresh") from None
        saved, machines = (None, ()) if resumed is None else (resumed.step, resumed.machines)
        return cls(on_machines(card, machines), Path(out), label, model, optimizer, parts, Streams(run.device),
                   torch.Generator(run.device), saved, saved or 0, saved or 0, machines, Path(out).is_dir())

    @property
    def checkpoint(self) -> Path:
        return self.out / CHECKPOINT

    def batch_index(self, store: ImageDataset, plan: Plan, run: Run) -> Tensor:
        """The indices of the member's batch at its step, in its seed's order of the epoch."""
        epoch, b = divmod(self.step, plan.per_epoch)
        if epoch != self.epoch:
            self.epoch, self.order = epoch, epoch_order(len(store), self.card.train.seed, epoch, run, self.shuffle)
        return self.order[b * plan.batch_size:(b + 1) * plan.batch_size]


def stack_key(member: Member) -> str:
    """What members must share to be stacked: everything of the card but the seed, the floats of its ``model``
    table and the learning rate (each member's own, :mod:`vaezoo.training.settings`), the model's
    :func:`~vaezoo.training.settings.structure`, its training parts' structures, float settings and optimisers
    (the stacked parts step with one optimiser each, of one group's settings), and the step. The machines a member
    trained on before are no part of it: the stack trains them all on this one."""
    train = member.card.train.model_dump(mode="json", exclude={"seed", "machine"})
    train["optimizer"]["lr"] = float
    model = member.model
    parts = ([(where, structure(part), float_settings(part)) for where, part in model.training_parts().items()],
             [(i, r.optimizers()) for i, r in enumerate(model.regularizers) if r.training_parts()])
    return repr((member.card.architecture, _floats_masked(member.card.model), train, structure(model), parts,
                 member.step))


def _floats_masked(value: Any) -> Any:
    """``value`` (a card table) with every float in it replaced by ``float``."""
    if isinstance(value, dict):
        return {k: _floats_masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_floats_masked(v) for v in value]
    return float if type(value) is float else value


class Stack:
    """Members of one configuration trained as one: stacked parameters, one step, one optimiser.

    Before each step every member draws the step's noise from its own streams (the draws a recorded
    forward pass made, :class:`NoiseTape`); the forward passes then replay it. The members' float settings
    that differ (a swept ``beta``, a capacity, a temperature: :func:`~vaezoo.training.settings.differing`) are
    per-member tensors of the stacked forward pass, and their learning rates, where they differ, scale each
    member's update (every optimiser a card names moves a weight by the learning rate times a step computed
    without it, so the stack steps at rate 1 and each member keeps ``lr`` of that step). On CUDA the whole step
    (forward, backward and the fused optimiser step) is captured once as a CUDA graph and replayed:
    the host only cuts the batches, draws the noise and launches the graph. A step that cannot be
    captured runs eagerly, as on the CPU. With the recipe's ``compile = true`` the stacked forward pass, losses
    and regularizers go through ``torch.compile`` (inductor, its default mode, :mod:`vaezoo.training.compiling`),
    inside the captured graph on CUDA; the backward pass is compiled with it, the optimiser's step is not.

    The members' training parts (a regularizer's own networks, FactorVAE's discriminator) are stacked too, with
    one optimiser per part over the stacked tensors (the settings of the regularizer's
    :class:`~vaezoo.regularizers.base.OptimizerGroup`). After the model's step each member, from its own streams,
    draws its second batch and the update's noise (recorded once, as the forward pass's is), and every member's
    update runs on its own slice, under the same formulation as the forward passes; one backward pass and one step
    of the parts' optimisers follow, as :meth:`vaezoo.training.auxiliary.TrainingParts.step` does for a single run.
    Such a stack is not captured as a CUDA graph: its step, the parts' update included, runs eagerly (with
    ``compile = true`` its model's forward pass, which uses the parts, is compiled; the parts' update is not).

    Args:
        members: members whose cards differ only in the seed, at the same step (:func:`stack_key`).
        plan: their plan through the data.
        run: the device.
        formulation: "vmap" (one batched forward pass; convolutions become grouped ones) or "loop" (the
            members' forward passes in turn, on slices of the stacked parameters); default: the faster
            (docs/benchmarks.md): "vmap" on CUDA and for a model without convolutions, "loop" for a
            convolutional model on the CPU, where grouped convolutions are slow.
        graphs: capture the step as a CUDA graph on CUDA (default True).
        check_every: steps between reads of the non-finite flags (each read waits for the device).
    """

    def __init__(self, members: list[Member], plan: Plan, run: Run, formulation: str | None = None,
                 graphs: bool = True, check_every: int = 100):
        if formulation not in (None, "vmap", "loop"):
            raise TrainingError(f"an ensemble's formulation is 'vmap' or 'loop', got '{formulation}'")
        convolutional = any(isinstance(m, torch.nn.modules.conv._ConvNd) for m in members[0].model.modules())
        self.formulation = formulation or ("loop" if run.device.type == "cpu" and convolutional else "vmap")
        self.graphs = graphs and run.device.type == "cuda" and not members[0].parts  # parts: eager (above)
        self.members, self.plan, self.run, self.check_every = members, plan, run, check_every
        self.step = members[0].step
        self.size = len(members)  # the members its step began with, which its checkpoints record
        self.precision = members[0].card.train.precision
        self.bf16 = self.precision == "bf16-mixed"
        self.base = copy.deepcopy(members[0].model).to("meta").train()
        self.within = _Within(self.base)
        self.tapes: dict[int, list[Draw]] = {}
        self.update_tapes: dict[int, list[Draw]] = {}  # the parts' update's draws, by the step's batch size
        self.term_names: list[str] = []  # the model's loss terms, learnt by the first recorded forward pass
        self.last_terms: list[str] = []  # the names of the terms of the last forward pass
        self.stopped: list[Member] = []  # members whose loss became NaN or inf
        self.compiled = Compiled(self._losses) if members[0].card.train.compile else None
        self._restack(members, [m.optimizer.state_dict() for m in members],
                      [{name: o.state_dict() for name, o in m.parts.optimizers.items()} for m in members])

    def _restack(self, members: list[Member], states: list[dict], part_states: list[dict[str, dict]]) -> None:
        """Stack ``members``' weights, and their optimisers' ``states`` and training parts' optimisers'
        ``part_states`` (each member's, by the part's place in the model)."""
        self.members = members
        self.params, self.buffers = stack_module_state([m.model for m in members])
        self.part_params, part_buffers = _stack_parts([m.model for m in members])
        self.buffers.update(part_buffers)
        self.parts = TrainingParts(self.base, {
            where: [self.part_params[f"{where}.{name}"] for name, _ in part.named_parameters()]
            for where, part in self.base.training_parts().items()})
        for name, optimizer in self.parts.optimizers.items():
            own = [s[name] for s in part_states]
            if any(s["state"] for s in own):
                optimizer.load_state_dict(_stack_states(own, optimizer))
        dtype = next(iter(self.params.values())).dtype
        self.varied = differing([m.model for m in members])
        self.settings = {path: torch.tensor(values, dtype=dtype, device=self.run.device)
                         for path, values in self.varied.items()}
        recipe = members[0].card.train
        rates = [m.card.train.optimizer.lr for m in members]
        self.rates = None
        if len(set(rates)) > 1:  # each member's own rate scales the update of a step at rate 1
            self.rates = torch.tensor(rates, dtype=dtype, device=self.run.device)
            recipe = recipe.model_copy(update={"optimizer": recipe.optimizer.model_copy(update={"lr": 1.0})})
        extra = {}
        if self.run.device.type == "cuda" and "foreach" not in recipe.optimizer.options:
            extra = {"fused": True, "capturable": self.graphs}
        self.optimizer = make_optimizer(recipe, list(self.params.values()), **extra)
        if any(s["state"] for s in states):
            self.optimizer.load_state_dict(_stack_states(states, self.optimizer))
        self._clear_flags()
        self.shown: Tensor | None = None  # the last step's losses, for the progress display
        self.graph: _CapturedStep | None = None

    def _clear_flags(self) -> None:
        """Each member's non-finite flags, none raised: the step its loss first was not finite (-1: none yet),
        that loss, and whether each of its terms (:attr:`term_names`) was not finite at that step."""
        n, device = len(self.members), self.run.device
        self.first_bad = torch.full((n,), -1, dtype=torch.long, device=device)
        self.bad_loss = torch.zeros(n, device=device)
        self.bad_terms = torch.zeros((n, len(self.term_names)), dtype=torch.bool, device=device)

    def losses(self, x: Tensor, noise: list[Tensor], step: int | Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Every member's loss on its batch ``x[i]`` with its noise ``noise[k][i]``, its loss terms and its codes.

        Returns:
            The losses, shape ``(members,)``; the terms they sum, detached, in float32, shape ``(members, terms)``
            in the order of :attr:`term_names`; and the codes the forward passes sampled, detached, shape
            ``(members, batch, code_size)``.

        With the recipe's ``compile = true`` the members' forward passes, losses and terms (and so their backward
        pass) are one function compiled by ``torch.compile`` (:mod:`vaezoo.training.compiling`), the step given to
        it as a tensor.
        """
        if self.compiled is None:
            return self._losses(x, noise, step)
        return self.compiled(x, noise, step if isinstance(step, Tensor) else step_tensor(step, self.run.device))

    def _losses(self, x: Tensor, noise: list[Tensor], step: int | Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self._each(self._forward(step), (x,), noise, self.tapes[x.shape[1]])

    def _forward(self, step: int | Tensor) -> Callable[[Tensor], tuple[Tensor, Tensor, Tensor]]:
        """One member's forward pass at ``step`` (under the recipe's autocast), as a function of its batch: its loss,
        its terms (detached, float32, stacked in the order of ``out.terms``, whose names it keeps in
        :attr:`last_terms`) and its codes (detached)."""
        def forward(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            with torch.autocast(self.run.device.type, torch.bfloat16, enabled=self.bf16):
                out = self.base(x, step=step, checked=True)
            self.last_terms = list(out.terms)
            return out.loss, torch.stack([t.detach().float() for t in out.terms.values()]), out.z.detach()
        return forward

    def _each(self, fn: Callable[..., tuple[Tensor, ...]], args: tuple[Tensor, ...], noise: list[Tensor],
              draws: list[Draw]) -> tuple[Tensor, ...]:
        """``fn(*args[i])`` of every member ``i`` on its slice of the stacked weights (the model's and its training
        parts'), with its own float settings, replaying its ``noise`` in place of the ``draws``: all at once under
        ``vmap``, or in turn (:attr:`formulation`). ``fn`` returns tensors; each comes back stacked over the
        members."""
        weights = {**self.params, **self.part_params}
        if self.formulation == "vmap":
            def one(weights, buffers, noise, settings, *args):
                with NoiseTape(noise, draws), swapped(self.base, settings):
                    return functional_call(self.within, (weights, buffers), (fn, *args))

            try:
                return vmap(one, randomness="error")(weights, self.buffers, noise, self.settings, *args)
            except RuntimeError as exc:  # an operation functorch cannot batch, e.g. a plugin's autograd.Function
                if "vmap" not in str(exc) and "functorch" not in str(exc):
                    raise
                warnings.warn(f"the model cannot run under torch.func.vmap ({str(exc).splitlines()[0]}); the "
                              f"members' forward passes run in turn instead (formulation 'loop')",
                              TrainingWarning, stacklevel=2)
                self.formulation = "loop"
        # unbind, not indexing: its backward stacks the members' gradients once, where each index would add
        # a whole stacked tensor of zeros
        weights = {k: v.unbind() for k, v in weights.items()}
        buffers = {k: v.unbind() for k, v in self.buffers.items()}
        outputs = []
        for i in range(len(self.members)):
            with NoiseTape([n[i] for n in noise], draws), swapped(self.base, self._own_settings(i)):
                outputs.append(functional_call(
                    self.within, ({k: v[i] for k, v in weights.items()}, {k: v[i] for k, v in buffers.items()}),
                    (fn, *(a[i] for a in args))))
        return tuple(torch.stack(column) for column in zip(*outputs))

    def _own_settings(self, i: int) -> dict[str, float]:
        """Member ``i``'s float settings that differ among the members, as the numbers its own model holds."""
        return {path: values[i] for path, values in self.varied.items()}

    def optimizer_step(self) -> None:
        """The optimiser's step of every member, each at its own learning rate."""
        if self.rates is None:
            optimizer_step(self.optimizer)
            return
        with torch.no_grad():
            before = [p.detach().clone() for p in self.params.values()]
        optimizer_step(self.optimizer)
        with torch.no_grad():
            for p, old in zip(self.params.values(), before):
                rate = self.rates.view(-1, *[1] * (p.dim() - 1))
                p.copy_(old + rate * (p - old))

    def _noise(self, x: Tensor) -> list[Tensor]:
        """The step's noise, each member's drawn from its own streams: one ``(members, ...)`` tensor a draw."""
        if x.shape[1] not in self.tapes:
            self.tapes[x.shape[1]] = self._record(self._forward(self.step), (x,))
            if not self.term_names:  # the first pass recorded names the model's loss terms
                self.term_names = self.last_terms
                self._clear_flags()  # nothing was noted yet: no step has run before the first pass recorded
        return self._draw(self.tapes[x.shape[1]])

    def _draw(self, draws: list[Draw]) -> list[Tensor]:
        """``draws`` made by each member from its own streams: one ``(members, ...)`` tensor a draw."""
        drawn = []
        for m in self.members:
            with m.streams.active():
                drawn.append([draw() for draw in draws])
        return [torch.stack(column) for column in zip(*drawn)]

    def _record(self, fn: Callable[..., tuple[Tensor, ...]], args: tuple[Tensor, ...]) -> list[Draw]:
        """The random draws of ``fn(*args[0])`` run as :meth:`_each` runs it, without gradients, for the first
        member; the global generators are left as they were.

        Raises:
            TrainingError: ``fn`` also draws through an operation the tape does not see (a gamma or Dirichlet
                sampler, ``torch.bernoulli``, ``torch.normal``, ...): each member would not draw its own numbers.
        """
        tape = NoiseTape()
        weights = {k: v[0] for k, v in {**self.params, **self.part_params}.items()}
        buffers = {k: v[0] for k, v in self.buffers.items()}
        with torch.random.fork_rng(devices=self._devices()):
            before = self._generators()
            with torch.no_grad(), tape, swapped(self.base, self._own_settings(0)):
                functional_call(self.within, (weights, buffers), (fn, *(a[0] for a in args)))
            after = self._generators()
            self._restore(before)
            for draw in tape.draws:
                draw()
            if not all(torch.equal(a, b) for a, b in zip(after, self._generators())):
                raise TrainingError.about(
                    "the model draws random numbers through an operation an ensemble cannot hand each member its "
                    "own draws of (only torch.rand, randn, randint, their *_like forms and fills such as normal_ "
                    "are; a gamma, beta or Dirichlet sampler, torch.bernoulli and torch.normal are not): train the "
                    "runs one at a time with {seed}")
        return tape.draws

    def _update_parts(self, store: ImageDataset, z: Tensor) -> None:
        """The training parts' step after the model's, whose forward passes sampled the codes ``z``
        ``(members, batch, code_size)``: each member's second batch (drawn from its own streams), its update on its
        own slice, one backward pass and a step of each part's optimiser."""
        images = []
        for m in self.members:
            with m.streams.active():
                images.append(self.parts.second_images(store, self.plan.batch_size))
        args = (z,) if images[0] is None else (z, torch.stack(images))
        update = self._update(self.step)
        if z.shape[1] not in self.update_tapes:
            self.update_tapes[z.shape[1]] = self._record(update, args)
        draws = self.update_tapes[z.shape[1]]
        (losses,) = self._each(update, args, self._draw(draws), draws)
        for optimizer in self.parts.optimizers.values():
            optimizer.zero_grad(set_to_none=True)  # the model's loss reached them too (a term computed with a part)
        if losses.requires_grad:
            losses.sum().backward()
        for name, optimizer in self.parts.optimizers.items():
            optimizer_step(optimizer, self.parts.named[name])

    def _update(self, step: int) -> Callable[..., tuple[Tensor]]:
        """One member's update of its training parts at ``step``, as a function of its codes and its second batch's
        images: the sum of its regularizers' update losses."""
        def update(z: Tensor, images: Tensor | None = None) -> tuple[Tensor]:
            batch = UpdateBatch(z, self.parts.codes(self.base, images), step)
            losses = [loss for i, r in self.parts.regularizers for loss in self.parts.losses(i, r, batch).values()]
            return (sum(losses) if losses else z.new_zeros(()),)
        return update

    def _devices(self) -> list[torch.device]:
        return [self.run.device] if self.run.device.type == "cuda" else []

    def _generators(self) -> list[Tensor]:
        """The states of the global generators the model draws from."""
        return [torch.get_rng_state(), *(torch.cuda.get_rng_state(d) for d in self._devices())]

    def _restore(self, states: list[Tensor]) -> None:
        torch.set_rng_state(states[0])
        for device, state in zip(self._devices(), states[1:]):
            torch.cuda.set_rng_state(state, device)

    def _note(self, losses: Tensor, terms: Tensor, step: int | Tensor) -> None:
        """Note on the device which members' losses are not finite, first at ``step``, and which of their terms."""
        bad = ~torch.isfinite(losses.detach()) & (self.first_bad < 0)
        self.first_bad.copy_(torch.where(bad, step, self.first_bad))
        self.bad_loss.copy_(torch.where(bad, losses.detach().float(), self.bad_loss))
        self.bad_terms.copy_(torch.where(bad[:, None], ~torch.isfinite(terms), self.bad_terms))

    def take_step(self, store: ImageDataset, stopping: int | None) -> int:
        """Train every member one step; when ``stopping``, only check the step's losses and save.

        The whole step computes under the recipe's TF32 flags (:func:`~vaezoo.training.loop.precision_flags`).

        A checkpoint due at this step (every ``checkpoint_every`` steps, and when stopping) is written for
        each member whose losses so far were finite, with its RNG states at the start of the step; such a
        step runs eagerly, to know its losses before it saves.

        Returns:
            The number of images of the step.
        """
        with precision_flags(self.precision):
            return self._take_step(store, stopping)

    def _take_step(self, store: ImageDataset, stopping: int | None) -> int:
        plan, run, every = self.plan, self.run, self.members[0].card.train.checkpoint_every
        due = self.step != self.members[0].saved and (
            stopping is not None or self.step > 0 and self.step % every == 0)
        index = torch.cat([m.batch_index(store, plan, run) for m in self.members])
        x = store.batch(index).unflatten(0, (len(self.members), -1))
        rngs = []
        for i, m in enumerate(self.members):
            with m.streams.active():
                rngs.append(rng_state(run) if due else None)
                if store.binarize:
                    x[i] = store.draw_pixels(x[i])
        noise = self._noise(x)
        if self.graphs and not due:
            if self.graph is None or not self.graph.fits(x, noise):
                self.graph = _CapturedStep.capture(self, x, noise)
            if self.graph is not None:
                self.shown = self.graph.replay(x, noise, self.step)
                return self._stepped(x)
        losses, terms, z = self.losses(x, noise, self.step)
        self._note(losses, terms, self.step)
        if due:
            kept = self.check()
            if len(kept) < x.shape[0]:  # the stack was rebuilt without the members that diverged
                rngs, x, noise = [rngs[i] for i in kept], x[kept], [n[kept] for n in noise]
                if kept:
                    losses, terms, z = self.losses(x, noise, self.step)
                    self._note(losses, terms, self.step)
            for i, rng in enumerate(rngs):
                self._save(i, rng)
        if stopping is not None or not self.members:
            return 0
        self.optimizer.zero_grad(set_to_none=self.graph is None)  # a captured graph keeps its gradients
        losses.sum().backward()
        try:
            self.optimizer_step()
            if self.parts:
                self._update_parts(store, z)
        except StepOverflow as exc:  # the stack's optimisers are its members' alike: each stops, the other stacks go on
            self._stop_all(str(exc))
            return 0
        self.shown = losses.detach()
        return self._stepped(x)

    def _stepped(self, x: Tensor) -> int:
        self.step += 1
        for m in self.members:
            m.step = self.step
        if self.step % self.check_every == 0:
            self.check()
        return x.shape[0] * x.shape[1]

    def check(self) -> list[int]:
        """Read the non-finite flags (waiting for the device) and stop the members they name.

        A stopped member keeps its last checkpoint; its ``error`` says why, and it joins :attr:`stopped`.

        Returns:
            The indices, among the members before the check, of those that go on.
        """
        first = self.first_bad.tolist()
        kept = [i for i, f in enumerate(first) if f < 0]
        if len(kept) == len(first):
            return kept
        values, flags = self.bad_loss.tolist(), self.bad_terms.tolist()
        for i in sorted(set(range(len(first))) - set(kept)):
            m = self.members[i]
            terms = [name for name, bad in zip(self.term_names, flags[i]) if bad]
            self._stop(m, diverged(values[i], first[i], self.plan, terms, m.checkpoint, m.saved))
        states = [self._optimizer_state(i) for i in kept]
        part_states = [self._part_states(i) for i in kept]
        self._write_back(kept)
        if kept:
            self._restack([self.members[i] for i in kept], states, part_states)
        else:
            self.members = []
        return kept

    def _stop_all(self, why: str) -> None:
        """Stop every member, each at its last checkpoint, ``why`` (one line) saying what stopped them."""
        for m in self.members:
            self._stop(m, f"{why}; {last_good(m.checkpoint, m.saved)}")
        self.members = []

    def _stop(self, m: Member, why: str) -> None:
        """Stop member ``m`` at its last checkpoint, ``why`` saying what stopped it."""
        m.error = f"{m.label}: {why}"
        m.step = m.saved or 0  # its model holds the weights of its last checkpoint
        self.stopped.append(m)

    def _write_back(self, indices: Sequence[int]) -> None:
        """Copy the stacked weights of the members at ``indices`` into their own models and training parts."""
        stacked = {**self.params, **self.part_params, **self.buffers}
        with torch.no_grad():
            for i in indices:
                model = self.members[i].model
                params, buffers = _part_tensors(model)
                for name, tensor in [*model.named_parameters(), *model.named_buffers(), *params.items(),
                                     *buffers.items()]:
                    tensor.copy_(stacked[name][i])

    def _optimizer_state(self, i: int) -> dict:
        """Member ``i``'s optimiser state, as its own optimiser would hold it."""
        return _slice_state(self.optimizer, i, self.members[i].optimizer.state_dict()["param_groups"])

    def _part_states(self, i: int) -> dict[str, dict]:
        """Member ``i``'s optimiser state of each training part, as its own optimisers would hold them."""
        own = self.members[i].parts.optimizers
        return {name: _slice_state(o, i, own[name].state_dict()["param_groups"])
                for name, o in self.parts.optimizers.items()}

    def _save(self, i: int, rng: dict | None) -> None:
        m = self.members[i]
        self._write_back([i])
        check_run_folder(m.checkpoint, self.step, m.had_folder or m.saved is not None)
        fix = Phrase("make room, then continue with {resume:True} ({last})", last=last_good(m.checkpoint, m.saved))
        m.card = on_machines(m.card, m.machines, this_machine(self.run, m.began, self.formulation, self.size))
        write_checkpoint(m.checkpoint, m.card, m.model, self._optimizer_state(i), self.step, rng, fix,
                         m.parts.state_dict(self._part_states(i)) if m.parts else None)
        m.saved = self.step

    def finish(self) -> None:
        """Write each member's weights into its model, and a checkpoint of the step reached unless written."""
        self._write_back(range(len(self.members)))
        for i, m in enumerate(self.members):
            if m.saved != self.step:
                with m.streams.active():
                    rng = rng_state(self.run)
                self._save(i, rng)

    def values(self) -> dict[str, float]:
        """The members' last losses, for the progress display."""
        if self.shown is None:
            return {}
        return {f"loss {m.label}": v for m, v in zip(self.members, self.shown.tolist())}


class _CapturedStep:
    """A stack's whole step (forward, backward, optimiser) captured as a CUDA graph, with its static inputs."""

    def __init__(self, graph, x: Tensor, noise: list[Tensor], step: Tensor, losses: Tensor):
        self.graph, self.x, self.noise, self.step, self.losses = graph, x, noise, step, losses

    def fits(self, x: Tensor, noise: list[Tensor]) -> bool:
        return x.shape == self.x.shape and [n.shape for n in noise] == [n.shape for n in self.noise]

    def replay(self, x: Tensor, noise: list[Tensor], step: int) -> Tensor:
        """Run the step on ``x`` and ``noise`` at ``step``; the members' losses (overwritten by the next replay)."""
        self.x.copy_(x)
        for static, n in zip(self.noise, noise):
            static.copy_(n)
        self.step.fill_(step)
        self.graph.replay()
        return self.losses

    @classmethod
    def capture(cls, stack: Stack, x: Tensor, noise: list[Tensor]) -> _CapturedStep | None:
        """Capture ``stack``'s step, its weights and optimiser state left as they were; None if it cannot be.

        Capturing needs a few warm-up steps first (on a side stream, as CUDA graphs require); they change
        the weights and the optimiser state, which are then put back.
        """
        weights = {k: v.detach().clone() for k, v in stack.params.items()}
        state = copy.deepcopy(stack.optimizer.state_dict()["state"])
        x, noise = x.clone(), [n.clone() for n in noise]
        step = step_tensor(stack.step, x.device)

        def train_step() -> Tensor:
            losses, _, _ = stack.losses(x, noise, step)
            losses.sum().backward()
            stack.optimizer_step()
            return losses

        try:
            side = torch.cuda.Stream(x.device)
            side.wait_stream(torch.cuda.current_stream(x.device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    stack.optimizer.zero_grad(set_to_none=True)
                    train_step()
            torch.cuda.current_stream(x.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            stack.optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                losses, terms, _ = stack.losses(x, noise, step)
                stack._note(losses, terms, step)
                losses.sum().backward()
                stack.optimizer_step()
            captured = cls(graph, x, noise, step, losses.detach())
        except Exception as exc:  # noqa: BLE001 - whatever stops the capture, the step can still run eagerly
            first = first_line(exc) or type(exc).__name__
            warnings.warn(f"the ensemble's step cannot be captured as a CUDA graph ({first}); it runs eagerly",
                          TrainingWarning, stacklevel=2)
            stack.graphs, captured = False, None
            stack.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for k, v in stack.params.items():
                v.copy_(weights[k])
            index = {id(p): i for i, p in enumerate(stack.optimizer.param_groups[0]["params"])}
            for p, now in stack.optimizer.state.items():
                before = state.get(index[id(p)], {})
                for key, value in now.items():
                    if isinstance(value, Tensor):
                        value.copy_(before[key]) if key in before else value.zero_()
        return captured


def fit_ensemble(runs: Sequence[tuple[VAE, Card, Path, str]], dataset: ImageDataset, resume: bool,
                 max_steps: int | None, run: Run, formulation: str | None = None,
                 read: dict[Path, Checkpoint] | None = None) -> list[Member]:
    """Train each ``(model, card, out, label)`` of ``runs``, members stacked by :func:`stack_key`.

    ``formulation`` chooses how a :class:`Stack` runs its members' forward passes (default: the faster on
    the device).

    Each member resumes from its own checkpoint (``resume``), taken out of ``read`` where it was read already;
    members at different steps, or whose cards differ in more than the seed, the floats of their ``model`` tables
    and their learning rates (a sweep of ``beta``, ``lr``: one stack), go in different stacks, which step in turn.

    Returns:
        The members, each at the step it reached, its weights in its model; a member whose loss became NaN
        or inf carries the reason in ``error`` and stopped at its last checkpoint.

    Raises:
        Interrupted: SIGINT, SIGTERM or SIGHUP stopped the run; every member's checkpoint holds the step reached.
        TrainingError: a member's checkpoint cannot be resumed, or the models cannot be stacked.
    """
    plans = {out: Plan.of(card.train, len(dataset), run.world) for _, card, out, _ in runs}
    members = [Member.start(card, out, label, model, plans[out], resume, run, read)
               for model, card, out, label in runs]
    store = device_store(dataset, run.device)
    check_before_training(store, [(m.model, m.card, plans[out], m.label) for m, (_, _, out, _) in zip(members, runs)])
    groups: dict[str, list[Member]] = {}
    for m in members:
        groups.setdefault(stack_key(m), []).append(m)
    stacks = [Stack(group, plans[group[0].out], run, formulation) for group in groups.values()]
    last = {id(s): s.plan.total if max_steps is None else min(s.plan.total, max_steps) for s in stacks}
    reported: set[int] = set()

    def values() -> dict[str, float]:
        return {k: v for s in stacks for k, v in s.values().items()}

    def report_stopped() -> None:
        for m in (m for s in stacks for m in s.stopped if id(m) not in reported):
            reported.add(id(m))
            note(m.error)

    per_epoch = {s.plan.per_epoch for s in stacks}  # members of other batch sizes count other epochs: none is shown
    reporter = Reporter(max(s.plan.total for s in stacks), min(m.step for m in members),
                        per_epoch.pop() if len(per_epoch) == 1 else None)
    # a caller's torch.no_grad() or set_grad_enabled(False) holds no sway over the steps
    with torch.enable_grad(), distribution_checks(False), StopSignals(defer=True) as signals, reporter:
        for s in stacks:
            for m in s.members:
                begin = f"resuming at step {m.step} of" if m.saved is not None else "training"
                stop = until(last[id(s)], s.plan.total, m.step)
                shared = f"{len(s.members)} runs in one step" if len(s.members) > 1 else "alone in its step"
                note(f"{m.label}: {begin} {s.plan.total:,} steps ({s.plan.per_epoch:,} per epoch){stop}, {shared}, "
                     f"a checkpoint every {m.card.train.checkpoint_every:,} steps in {m.checkpoint}")
        while todo := [s for s in stacks if s.members and s.step < last[id(s)]]:
            stopping = signals.stop_requested(run.world, run.device)
            images = sum(s.take_step(store, stopping) for s in todo)
            report_stopped()
            if stopping is not None:
                for s in stacks:
                    s.finish()
                raise Interrupted(stopping, min(s.step for s in todo), members[0].checkpoint)
            reporter.update(min(s.step for s in todo), images, values)
        for s in stacks:
            s.check()
            s.finish()
        report_stopped()
        stopping = signals.stop_requested(run.world, run.device)
        if stopping is not None:  # it came after the last step: the checkpoints above hold the run
            raise Interrupted(stopping, min(m.step for m in members), members[0].checkpoint)
    return members


class _Within(nn.Module):
    """A view of a model whose forward pass calls a given function: ``functional_call(_Within(model), tensors,
    (fn, *args))`` runs ``fn(*args)`` with ``tensors`` in place of the model's parameters and buffers and of its
    training parts' (named by their place in the model, ``regularizers.0.discriminator.0.weight``), whichever of
    the model's methods ``fn`` calls. It holds the model's own parameters, buffers and submodules."""

    def __init__(self, model: nn.Module):
        super().__init__()
        for key in ("_parameters", "_buffers", "_modules"):
            self.__dict__[key] = model.__dict__[key]

    def forward(self, fn: Callable, *args):
        return fn(*args)


def _part_tensors(model: VAE) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and the buffers of ``model``'s training parts, by their place in the model
    (``regularizers.0.discriminator.0.weight``)."""
    parts = model.training_parts().items()
    return ({f"{where}.{name}": t for where, part in parts for name, t in part.named_parameters()},
            {f"{where}.{name}": t for where, part in parts for name, t in part.named_buffers()})


def _stack_parts(models: Sequence[VAE]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The training parts' parameters and buffers of ``models`` stacked along a new first dimension, as
    ``stack_module_state`` stacks the models' own (parameters as leaves that take gradients)."""
    params, buffers = zip(*(_part_tensors(m) for m in models))
    return ({k: torch.stack([p[k].detach() for p in params]).requires_grad_(params[0][k].requires_grad)
             for k in params[0]},
            {k: torch.stack([b[k] for b in buffers]) for k in buffers[0]})


def _stack_states(states: list[dict], optimizer: torch.optim.Optimizer) -> dict:
    """A state for ``optimizer`` (of stacked parameters) from the members' own optimiser states."""
    params = optimizer.param_groups[0]["params"]
    stacked = {}
    for index, first in states[0]["state"].items():
        stacked[index] = {key: torch.stack([s["state"][index][key] for s in states])
                          if key != "step" and isinstance(value, Tensor) and value.shape == params[index].shape[1:]
                          else value
                          for key, value in first.items()}
    return {"state": stacked, "param_groups": optimizer.state_dict()["param_groups"]}


def _slice_state(optimizer: torch.optim.Optimizer, i: int, param_groups: list[dict]) -> dict:
    """Member ``i``'s optimiser state out of ``optimizer`` (of stacked parameters), with its own ``param_groups``."""
    params = optimizer.param_groups[0]["params"]
    state = optimizer.state_dict()["state"]
    return {"state": {index: {key: value[i].clone() if isinstance(value, Tensor) and key != "step"
                              and value.shape == params[index].shape else value
                              for key, value in per_param.items()}
                      for index, per_param in state.items()},
            "param_groups": param_groups}
