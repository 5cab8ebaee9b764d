"""The conformance kit: the checks vaezoo runs on every plugin, for plugin authors to call from pytest.

Each ``check_*`` function builds a registered part (or a card's model),
exercises the contract the core relies on, and raises :class:`ConformanceError`
(an ``AssertionError``, so pytest reports a failed test) naming the part and
the rule it breaks. vaezoo's own tests run these same checks on its built-in
parts, so a plugin that passes them behaves like one of those.

>>> from vaezoo import testing
>>> testing.check_plugin("laplace")                       # loads, registers without conflicts
>>> testing.check_latent_family("laplace", dim=3)
>>> testing.check_regularizer("beta", latent={"type": "laplace", "dim": 3})
>>> testing.check_architecture("laplacevae", image_size=16, channels=1)
>>> testing.check_card("vaezoo_laplace/cards/laplacevae-mnist.toml")
>>> testing.check_training("vaezoo_laplace/cards/laplacevae-mnist.toml")  # vaezoo train, in miniature

The part checks end as :func:`check_training` does: they train a small model made with the part for a few
steps, as ``vaezoo train`` would, measure every metric of vaezoo's built-in plugins and of the part's own
plugin that the model can serve, traverse its latent and load the run back (``train=False`` leaves that out).
"""

from __future__ import annotations

import copy
import inspect
import io
import math
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from vaezoo.assemble import build_model, card_dataset, data_info, metric
from vaezoo.assemble import build_part as build
from vaezoo.context import FACTS, BuildContext
from vaezoo.entries.catalog import discover, get_card, parse_card, scan
from vaezoo.entries.schema import Card
from vaezoo.errors import PublishWarning
from vaezoo.terminal import printable
from vaezoo.latents import LatentFamily, Posterior
from vaezoo.latents.base import distribution_checks
from vaezoo.likelihoods import Bernoulli, Likelihood
from vaezoo.model import VAE, latent_sizes
from vaezoo.plugins import KINDS, PluginWarning, get_plugins, registry
from vaezoo.regularizers import Regularizer
from vaezoo.regularizers.base import unregistered_parts

__all__ = [
    "ConformanceError", "check_plugin", "check_latent_family", "check_regularizer", "check_net", "check_likelihood",
    "check_architecture", "check_model", "check_card", "check_training", "check_dataset",
]

KL_TOLERANCE = 1e-5  # a KL may come out this far below zero from rounding
TRIAL_STEPS = 4  # steps of a trial run (check_training)
TRIAL_BATCH = 8  # its batch size
TRIAL_NETS = {"encoder": {"type": "mlp_encoder", "hidden": [32]}, "decoder": {"type": "mlp_decoder", "hidden": [32]}}


class ConformanceError(AssertionError):
    """A plugin's part breaks a rule of the contract vaezoo relies on."""


def _require(condition: bool, subject: str, problem: str) -> None:
    if not condition:
        raise ConformanceError(f"{subject}: {problem}")


@contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed torch's global generator for the block, with ``torch.distributions``' argument checks on (a density
    asked outside its support raises, whatever ``torch.compile`` left them at), and restore both afterwards."""
    with torch.random.fork_rng(devices=[]), distribution_checks(True):
        torch.manual_seed(seed)
        yield


@contextmanager
def _running(subject: str, what: str) -> Iterator[None]:
    """Turn an exception raised by plugin code into a :class:`ConformanceError` saying what was being done."""
    try:
        yield
    except ConformanceError:
        raise
    except Exception as exc:
        raise ConformanceError(f"{subject}: {what} raised {type(exc).__name__}: {printable(exc)}") from exc


def _shape(t: object) -> str:
    return str(tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__


def _require_tensor(t: object, shape: tuple[int, ...], subject: str, what: str,
                    device: torch.device = torch.device("cpu")) -> None:
    """``t`` must be a finite tensor of ``shape`` on ``device`` (the kit's parts are on the CPU, a model may not be)."""
    _require(isinstance(t, Tensor) and tuple(t.shape) == shape, subject,
             f"{what} has shape {_shape(t)}, expected {shape}")
    _require(t.device == device, subject, f"{what} is on {t.device}, not on {device}, where its inputs are")
    _require(bool(torch.isfinite(t).all()), subject, f"{what} has NaN or infinite values")


def _require_scalar(t: object, subject: str, what: str, device: torch.device = torch.device("cpu")) -> None:
    _require_tensor(t, (), subject, what, device)


def _require_gradient(value: Tensor, params: Tensor, subject: str, what: str) -> None:
    """``value`` (a scalar) must depend on ``params`` with a finite, non-zero gradient."""
    _require(_gradient_flows(value, params, subject, what), subject,
             f"{what} does not depend on the encoder's parameters (no gradient flows back)")


def _gradient_flows(value: Tensor, params: Tensor, subject: str, what: str) -> bool:
    """Whether ``value`` (a scalar) has a non-zero gradient with respect to ``params``; a gradient that is not
    finite is refused."""
    if not value.requires_grad:
        return False
    with _running(subject, f"differentiating {what}"):
        (grad,) = torch.autograd.grad(value, params, retain_graph=True, allow_unused=True)
    if grad is None:
        return False
    _require(bool(torch.isfinite(grad).all()), subject, f"the gradient of {what} has NaN or infinite values")
    return bool(grad.abs().sum() > 0)


def _require_batch(batch: object, check: str) -> None:
    """Refuse a ``batch`` that is no whole number of at least 1 before ``check`` builds anything (0 failed a later
    check with a wrong reason, "4" ended in torch's own TypeError)."""
    if isinstance(batch, bool) or not isinstance(batch, int):
        raise TypeError(f"{check}'s batch= is a whole number of images, e.g. 4, not {type(batch).__name__} "
                        f"{batch!r}")
    if batch < 1:
        raise ValueError(f"{check}'s batch= is at least 1 image, got {batch}")


def _owner(kind: str, name: str) -> str:
    return f"{kind} '{name}' of plugin '{registry(kind).plugin_of(name)}'"


def check_plugin(name: str) -> dict[str, list[str]]:
    """Check that plugin ``name`` (its entry-point name) is installed, loads, and registers without conflicts.

    Every registry is filled and every card directory read, so a duplicate
    name, a registration of the wrong type or a card that does not validate
    fails here with the core's message; so does a card written by a vaezoo newer than the oldest that the
    plugin's distribution requires (an older vaezoo may refuse what the card holds), and a card whose metrics
    were measured by a ``vaezoo eval`` of another card or a run's folder (a command its users cannot run).

    Args:
        name: the plugin's name in the ``vaezoo`` entry-point group.

    Returns:
        What the plugin contributes: ``{kind: [names]}`` for each registry kind it fills, and
        ``"card"``: the names of the cards in its card directories.
    """
    if not isinstance(name, str):
        raise TypeError(f"check_plugin takes a plugin's name (its entry point's, as 'vaezoo plugins' lists it), not "
                        f"{type(name).__name__} {name!r}")
    plugins = get_plugins()
    _require(name in plugins.info, f"plugin '{name}'",
             f"not installed: no entry point '{name}' in group 'vaezoo' "
             f"(install the package, e.g. 'pip install -e .', and check VAEZOO_LOAD_PLUGINS)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)  # the failure is reported below
        card_dirs = [d for owner, d in plugins.card_dirs() if owner == name]
        registries = {kind: plugins.registry(kind) for kind in KINDS}
    info = plugins.info[name]
    _require(info.status == "ok", f"plugin '{name}'", f"failed: {info.error}")
    contributed = {kind: [n for n in reg if reg.plugin_of(n) == name] for kind, reg in registries.items()}
    contributed = {kind: names for kind, names in contributed.items() if names}
    cards = []
    for directory in card_dirs:
        _require(directory.is_dir(), f"plugin '{name}'", f"card directory {directory} does not exist")
        for path in sorted(directory.glob("*.toml")):
            with _running(f"plugin '{name}'", f"reading card {path}"):
                cards.append(parse_card(path))
    for card in cards:
        _check_commands(card, f"plugin '{name}'")
    if not info.builtin:
        _check_vaezoo_requirement(info.distribution, cards, f"plugin '{name}'")
    found = scan()  # what every command sees: a card that takes a name found before it is left out
    for skipped in found.skipped:
        _require(not any(Path(skipped.path).parent.resolve() == d.resolve() for d in card_dirs), f"plugin '{name}'",
                 f"card {skipped.path} is skipped: {skipped.reason}")
    if cards:
        contributed["card"] = [card.name for card in cards]
    _require(bool(contributed), f"plugin '{name}'", f"registers nothing and has no cards (hooks: {info.hooks})")
    return contributed


def _check_commands(card: Card, subject: str) -> None:
    """Each ``vaezoo eval`` command a shipped card records names the card, so that its users can run it: the card
    ``vaezoo train`` wrote names the run's folder, which only the machine that trained it has."""
    import shlex

    for metric_name, measured in card.metrics.items():
        try:
            words = shlex.split(measured.command)
        except ValueError:
            continue
        _require(words[:2] != ["vaezoo", "eval"] or words[2:3] == [card.name], subject,
                 f"card '{card.name}' records metric '{metric_name}' as measured by '{printable(measured.command)}', "
                 f"which names another card than '{card.name}' (a run's folder its users do not have); measure the "
                 f"shipped card again with 'vaezoo eval {card.name} --write' (CONTRIBUTING.md, Train and ship weights)")


def _check_vaezoo_requirement(distribution: str, cards: list[Card], subject: str) -> None:
    """The vaezoo ``distribution`` requires admits no release older than the newest that wrote one of ``cards``: an
    older vaezoo may refuse what such a card holds (a release that changes what a card holds raises the version, as
    0.2.0 added ``train.machine``), and pip would install the plugin beside it. A distribution that declares no
    requirement on vaezoo is not checked."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    written = []
    for card in cards:
        try:
            written.append((Version(card.vaezoo_version), card.name))
        except InvalidVersion:
            continue
    try:
        declared = requires(distribution) or []
    except PackageNotFoundError:
        return
    if not written:
        return
    newest, card = max(written)
    for line in declared:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != "vaezoo" or requirement.marker is not None:
            continue
        floors = [Version(spec.version.removesuffix(".*")) for spec in requirement.specifier
                  if spec.operator in (">=", ">", "~=", "==")]
        _require(bool(floors) and max(floors) >= newest, subject,
                 f"card '{card}' was written by vaezoo {newest}, but distribution {distribution} requires "
                 f"'{line.strip()}', which admits an older vaezoo that may refuse what the card holds; declare "
                 f"'vaezoo>={newest}' in the dependencies of its pyproject.toml")


def _part_arguments(subject: str, check: str, arguments: Mapping[str, Any] | None,
                    kwargs: dict[str, Any]) -> dict[str, Any]:
    """A part's arguments given to ``check``: ``arguments`` (for names the check's own keywords take) and ``kwargs``;
    a name given in both is a :class:`ConformanceError`."""
    _require(arguments is None or isinstance(arguments, Mapping), subject,
             f"{check}'s arguments= must be a mapping of the part's arguments, got {type(arguments).__name__}")
    twice = sorted(set(arguments or {}) & set(kwargs))
    _require(not twice, subject, f"{check} was given {', '.join(twice)} both in arguments= and as a keyword; give "
             f"each once")
    return {**(arguments or {}), **kwargs}


def check_latent_family(name: str, batch: int = 4, seed: int = 0, train: bool = True, *,
                        arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> LatentFamily:
    """Check the latent family registered as ``name``, built with ``kwargs``, against the protocol.

    Checks ``param_size``/``code_size``, that the part slices tile the code, the
    shapes and finiteness of ``rsample()``, ``mode``, ``kl()`` (per dimension,
    non-negative, each image's row its own), ``kl_parts()`` (per part, summing to ``kl()``) and
    ``sample_prior()``, that a seeded generator makes ``sample_prior``
    reproducible, that gradients flow from samples and KL to the parameters, and that ``rsample()`` draws its
    noise where an ensemble (``vaezoo train --seeds``) hands each member its own draws.
    Then what viz and the metrics rely on: ``parts`` matches the part slices,
    ``reference_code()`` and every part's ``sweeps()`` fit the code and the KL,
    and a posterior with a per-dimension ``distribution`` gives ``log_prob``,
    ``prior_log_prob`` and a ``log_density_matrix`` whose diagonal is ``log_prob``, of any number of codes
    (so the TC regularizer and the entropy metrics can use it).

    Args:
        name: the registered name, e.g. ``"gaussian"``.
        batch: the batch size to test with.
        seed: seed of the random parameters.
        train: then run :func:`check_training` on a ``vae`` with this latent (small MLP nets, beta 1),
            measuring every metric of the built-in plugins and of the part's own that it can serve.
        arguments: the family's arguments as a mapping, for those named like this function's own (``batch``,
            ``seed``, ``train``); merged with ``kwargs``.
        kwargs: the family's arguments, e.g. ``dim=3``.

    Returns:
        The built family.
    """
    _require_batch(batch, "check_latent_family")
    subject = f"latent family '{name}'"
    kwargs = _part_arguments(subject, "check_latent_family", arguments, kwargs)
    with _running(subject, f"building with {kwargs}"):
        family = build("latent family", {"type": name, **kwargs})
    subject = _owner("latent family", name)
    _require(isinstance(family, LatentFamily), subject, f"built a {type(family).__name__}, not a LatentFamily")
    for attr in ("param_size", "code_size"):
        value = getattr(family, attr, None)
        _require(isinstance(value, int) and value > 0, subject, f"{attr} must be a positive int, got {value!r}")
    _check_slices(family, subject)

    with _seeded(seed):
        _check_posterior(family, batch, subject)
        _check_traversal(family, batch, subject)
    with _running(subject, "sample_prior()"):
        cpu = torch.device("cpu")  # a torch device, as the model passes its own and LatentFamily's hint says
        first = family.sample_prior(batch, generator=torch.Generator().manual_seed(seed), device=cpu)
        again = family.sample_prior(batch, generator=torch.Generator().manual_seed(seed), device=cpu)
    _require_tensor(first, (batch, family.code_size), subject, "sample_prior()")
    _require(torch.equal(first, again), subject, "sample_prior() ignores its generator: one seed gave two samples")
    if train:
        _train_part(subject, registry("latent family").plugin_of(name), "vae",
                    {"latent": {"type": name, **kwargs}, **TRIAL_NETS,
                     "regularizers": [{"type": "beta", "beta": 1.0}]}, seed)
    return family


def _check_posterior(family: LatentFamily, batch: int, subject: str) -> None:
    params = torch.randn(batch, family.param_size, requires_grad=True)
    with _running(subject, "posterior()"):
        posterior = family.posterior(params)
    _require(isinstance(posterior, Posterior), subject, f"posterior() returned a {type(posterior).__name__}, "
             f"not a vaezoo.latents.Posterior")
    _require(posterior.code_size == family.code_size, subject,
             f"the posterior's code_size {posterior.code_size} is not the family's {family.code_size}")
    with _running(subject, "rsample()"):
        z = posterior.rsample()
    _require_tensor(z, (batch, family.code_size), subject, "rsample()")
    with _running(subject, "mode"):
        mode = posterior.mode
    _require_tensor(mode, (batch, family.code_size), subject, "mode")
    _require(torch.equal(mode, posterior.mode), subject, "mode is not deterministic")
    weights = torch.randn(z.shape)  # a weighted sum: a one-hot sample sums to 1
    _require_gradient((z * weights).sum(), params, subject, "rsample()")
    _require_own_draws(lambda: family.posterior(params).rsample(), subject, "rsample()")
    with _running(subject, "kl()"):
        kl = posterior.kl()
    _require(isinstance(kl, Tensor) and kl.dim() == 2 and kl.shape[0] == batch, subject,
             f"kl() has shape {_shape(kl)}, expected (batch={batch}, kl_dims)")
    _require_tensor(kl, tuple(kl.shape), subject, "kl()")
    _require(bool((kl >= -KL_TOLERANCE).all()), subject, f"kl() is negative: min {kl.min().item():.3g}")
    _require_gradient(kl.sum(), params, subject, "kl()")
    _check_kl_parts(family, posterior, kl.detach(), batch, subject)
    with _running(subject, "posterior() of the first image alone"), torch.no_grad():
        alone = family.posterior(params[:1].detach())
        alone_mode, alone_kl = alone.mode, alone.kl()
    _require(torch.allclose(alone_mode, mode[:1].detach(), rtol=1e-4, atol=1e-5)
             and torch.allclose(alone_kl, kl[:1].detach(), rtol=1e-4, atol=1e-5), subject,
             "the mode or kl() of an image changes with the other images of its batch; each row must be its image's "
             "own (a KL summed or averaged over the batch makes the card's losses depend on the batch size)")


def _check_traversal(family: LatentFamily, batch: int, subject: str) -> None:
    """The protocol viz and the metrics use: parts, reference code, sweeps and per-dimension densities."""
    with _running(subject, "parts"):
        parts = family.parts
    _require(list(parts) == list(family.part_slices()), subject,
             f"parts {list(parts)} and part_slices() {list(family.part_slices())} must name the same parts")
    with _running(subject, "reference_code()"):
        reference = family.reference_code()
    _require_tensor(reference, (family.code_size,), subject, "reference_code()")
    posterior = family.posterior(torch.randn(batch, family.param_size))
    for name, part in parts.items():
        width = family.part_slices()[name].stop - family.part_slices()[name].start
        _check_sweeps(name, part, posterior.parts[name], (-2.0, 2.0), subject)
        piece = posterior.parts[name]
        if piece.distribution is None:
            continue
        z = piece.rsample().detach()
        with _running(subject, f"log densities of part '{name}'"):
            log_prob, matrix = piece.log_prob(z), piece.log_density_matrix(z)
        _require_tensor(log_prob, (batch, width), subject, f"log_prob() of '{name}'")
        _require_tensor(matrix, (batch, batch, width), subject, f"log_density_matrix() of '{name}'")
        _require(torch.allclose(torch.diagonal(matrix, dim1=0, dim2=1).T, log_prob, atol=1e-5), subject,
                 f"log_density_matrix()[i, i] of '{name}' is not log_prob() of example i")
        with _running(subject, f"log_density_matrix() of part '{name}' of one code"):
            row = piece.log_density_matrix(z[:1])
        _require_tensor(row, (1, batch, width), subject, f"log_density_matrix() of one code of '{name}'")
        _require(torch.allclose(row, matrix[:1], atol=1e-5), subject,
                 f"log_density_matrix() of the codes z[:1] of '{name}' is not the first row of that of z")
        if piece.prior is not None and bool(piece.prior.support.check(z).all()):  # defined on its support only
            with _running(subject, f"prior_log_prob() of part '{name}'"):
                prior = piece.prior_log_prob(z)
            _require_tensor(prior, (batch, width), subject, f"prior_log_prob() of '{name}'")


def _check_sweeps(name: str, part: LatentFamily, posterior: Posterior, span: tuple[float, float],
                  subject: str) -> None:
    """The sweeps of latent part ``name`` over ``span`` fit its code and KL, and keep each dimension inside
    the support of its prior."""
    width = part.code_size
    with _running(subject, f"sweeps() of part '{name}'"):
        sweeps = part.sweeps(5, span)
        kl_dims = posterior.kl().shape[-1]
    _require(bool(sweeps), subject, f"part '{name}' has no sweeps(): a traversal would skip it")
    for sweep in sweeps:
        columns = range(width)[sweep.columns]
        _require(len(columns) > 0 and 0 <= sweep.kl_index < kl_dims, subject,
                 f"part '{name}': a sweep sets columns {sweep.columns} (of {width}) and reads KL entry "
                 f"{sweep.kl_index} (of {kl_dims})")
        _require_tensor(sweep.values, (sweep.values.shape[0], len(columns)), subject, f"a sweep of '{name}'")
        if len(columns) == 1:  # one dimension: its values must be codes the prior can give
            codes = part.reference_code().repeat(len(sweep.values), 1)
            codes[:, sweep.columns] = sweep.values.to(codes.dtype)
            _require_in_support(part, codes, subject, f"sweeps() of part '{name}', dimension {columns[0]},")


def _require_in_support(family: LatentFamily, codes: Tensor, subject: str, what: str) -> None:
    """Every code ``(n, code_size)`` lies in the support of ``family``'s prior."""
    support = family.prior.expand((family.code_size,)).support
    inside = support.check(codes)
    _require(bool(inside.all()), subject, f"{what} leaves the prior's support {support}: "
             f"{codes[~inside].tolist()[:3]} (keep a sweep inside it: see LatentFamily.sweeps)")


def _check_slices(family: LatentFamily, subject: str) -> None:
    slices = family.part_slices()
    _require(isinstance(slices, Mapping) and bool(slices), subject, "part_slices() must be a non-empty dict")
    start = 0
    for part, s in slices.items():
        _require(s.start == start and s.stop > s.start, subject,
                 f"part '{part}' has slice {s}; part slices must tile the code in order from 0")
        start = s.stop
    _require(start == family.code_size, subject, f"part slices end at {start}, not at code_size {family.code_size}")


def _check_kl_parts(family: LatentFamily, posterior: Posterior, kl: Tensor, batch: int, subject: str) -> None:
    with _running(subject, "kl_parts()"):
        parts = posterior.kl_parts()
    _require(list(parts) == list(family.part_slices()) == list(posterior.parts), subject,
             f"kl_parts() {list(parts)}, part_slices() {list(family.part_slices())} and posterior.parts "
             f"{list(posterior.parts)} must name the same parts in the same order")
    for part, value in parts.items():
        _require_tensor(value, (batch,), subject, f"kl_parts()['{part}']")
    total = sum(v.detach() for v in parts.values())
    _require(torch.allclose(total, kl.sum(-1), rtol=1e-5, atol=1e-5), subject,
             "kl_parts() does not sum to kl() summed over its dimensions")


def _require_own_draws(compute: Callable[[], object], subject: str, what: str) -> None:
    """``compute`` draws its random numbers only through what an ensemble (``vaezoo train --seeds``, ``--sweep``)
    hands each member its own draws of; a draw elsewhere (``torch.normal``, ``torch.bernoulli``, a gamma sampler)
    leaves torch's generator where a replay of the recorded draws does not, and the ensemble refuses the model."""
    from vaezoo.training.ensemble import NoiseTape

    tape = NoiseTape()
    with torch.random.fork_rng(devices=[]):  # with autograd: a forward may differentiate (a gradient penalty)
        before = torch.get_rng_state()
        with _running(subject, what), tape:
            compute()
        after = torch.get_rng_state()
        torch.set_rng_state(before)
        for draw in tape.draws:
            draw()
        replayed = torch.get_rng_state()
    _require(torch.equal(after, replayed), subject,
             f"{what} draws random numbers through an operation an ensemble ('vaezoo train --seeds') cannot hand "
             f"each member its own draws of, so it would refuse the model; draw through torch.rand, randn, randint, "
             f"their *_like forms or fills such as normal_ (not torch.normal, torch.bernoulli, a gamma, beta or "
             f"Dirichlet sampler, nor torch.randperm: argsort torch.rand instead)")


def check_regularizer(name: str, latent: Mapping[str, Any] | None = None, batch: int = 8,
                      steps: tuple[int, ...] = (0, 1000), seed: int = 0, train: bool = True, *,
                      arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> Regularizer:
    """Check the regularizer registered as ``name``, built with ``kwargs``, against the protocol.

    At each of ``steps`` it must return named scalar terms, all finite, the same
    for the same step (a schedule is a function of the step it is given), with a finite
    gradient; at one of them at least (a warm-up may weigh its terms 0 at step 0) the
    gradient must flow to the posterior's parameters; ``targets()`` must return
    numbers; a random draw of ``forward`` must be one an ensemble (``vaezoo train --seeds``) hands each member its
    own of; and a copy restored from its ``state_dict`` must give the same terms.
    A regularizer that draws random numbers (FactorVAE permutes codes) is checked with
    torch's generator seeded with ``seed`` before each computation, so it must give the same
    terms under the same random state.

    It is built knowing the latent's sizes (``code_size``, ``part_sizes``), as in a model. A
    regularizer with training parts (:meth:`~vaezoo.regularizers.Regularizer.add_training_part`)
    must name an existing ``torch.optim`` optimiser for parts it has, and its :meth:`update` must
    give named finite scalar losses whose gradient reaches its training parts and nothing else, drawing its random
    numbers (a permutation) as ``forward`` must;
    in eval mode its terms must not depend on its training parts (a published model has none);
    and a copy restored from its ``training_state_dict`` must give the same terms and losses.

    Args:
        name: the registered name, e.g. ``"capacity"``.
        latent: the latent family spec to regularize (default ``{"type": "gaussian", "dim": 4}``);
            a regularizer of named parts needs a joint latent with those parts.
        batch: the batch size to test with.
        steps: training steps to evaluate at.
        seed: seed of the random parameters.
        train: then run :func:`check_training` on a ``vae`` with this regularizer on ``latent`` (small MLP
            nets), measuring every metric of the built-in plugins and of the part's own that it can serve.
        arguments: the regularizer's arguments as a mapping, for those named like this function's own (a warm-up's
            ``steps``, a ``seed``); merged with ``kwargs``.
        kwargs: the regularizer's arguments.

    Returns:
        The built regularizer.
    """
    _require_batch(batch, "check_regularizer")
    subject = f"regularizer '{name}'"
    kwargs = _part_arguments(subject, "check_regularizer", arguments, kwargs)
    _require(isinstance(steps, Sequence) and len(steps) > 0
             and all(isinstance(s, int) and not isinstance(s, bool) for s in steps), subject,
             f"check_regularizer's own steps= (the training steps it checks the terms at, a tuple of ints) got "
             f"{steps!r}; give a regularizer argument named 'steps' as arguments={{'steps': {steps!r}}}")
    with _running(subject, f"building the latent {latent}"):
        family = build("latent family", dict(latent or {"type": "gaussian", "dim": 4}))
    context = BuildContext(builder=build, **latent_sizes(family))
    with _running(subject, f"building with {kwargs}"), _seeded(seed):
        regularizer = build("regularizer", {"type": name, **kwargs}, context)
        restored = build("regularizer", {"type": name, **kwargs}, context)
    subject = _owner("regularizer", name)
    _require(isinstance(regularizer, Regularizer), subject,
             f"built a {type(regularizer).__name__}, not a vaezoo.regularizers.Regularizer")
    _require(not (problem := unregistered_parts(regularizer)), subject, str(problem))
    with _seeded(seed):
        params = torch.randn(batch, family.param_size, requires_grad=True)
        posterior = family.posterior(params)
        z = posterior.rsample()
    _require_own_draws(lambda: regularizer(posterior, z, steps[0]), subject, f"forward at step {steps[0]}")
    terms_at, flows = {}, False
    for step in steps:
        with _running(subject, f"forward at step {step}"), _seeded(seed):
            terms_at[step] = terms = regularizer(posterior, z, step)
            targets = regularizer.targets(posterior, step)
        _require(isinstance(terms, dict) and bool(terms), subject,
                 f"forward must return a non-empty dict of named terms, got {type(terms).__name__}")
        for term, value in terms.items():
            _require(isinstance(term, str), subject, f"term names must be strings, got {term!r}")
            _require(term != "reconstruction", subject, "a term is named 'reconstruction', the likelihood's term, "
                     "which it would replace in the loss; give it a name of its own")
            _require_scalar(value, subject, f"term '{term}' at step {step}")
        _require(isinstance(targets, dict) and all(isinstance(k, str) and isinstance(v, int | float)
                                                   for k, v in targets.items()),
                 subject, f"targets() must return {{name: number}}, got {targets!r}")
        flows = _gradient_flows(sum(terms.values()), params, subject, f"the terms at step {step}") or flows
    _require(flows, subject, f"the terms depend on the encoder's parameters at none of the steps {tuple(steps)} (no "
             f"gradient flows back); a schedule that switches its terms off at these steps is checked at others "
             f"with steps=")
    with _running(subject, "load_state_dict(state_dict())"):
        restored.load_state_dict(regularizer.state_dict())
        restored.load_training_state_dict(regularizer.training_state_dict())
    for step in steps:
        with _running(subject, f"forward at step {step} again"):
            with _seeded(seed):
                again = regularizer(posterior, z, step)
            with _seeded(seed):
                from_restored = restored(posterior, z, step)
        for term, value in terms_at[step].items():
            _require(term in again and torch.equal(value, again[term]), subject,
                     f"term '{term}' at step {step} changed when computed again under the same random state; "
                     f"derive schedules from the step argument and draw random numbers from torch's generator")
            _require(term in from_restored and torch.equal(value, from_restored[term]), subject,
                     f"term '{term}' at step {step} differs in a copy restored from state_dict(); keep "
                     f"schedule state in buffers so that a checkpoint saves it")
    if regularizer.training_parts():
        _check_training_parts(regularizer, restored, posterior, z, params, steps[-1], seed, subject)
    if train:
        _train_part(subject, registry("regularizer").plugin_of(name), "vae",
                    {"latent": dict(latent or {"type": "gaussian", "dim": 4}), **TRIAL_NETS,
                     "regularizers": [{"type": name, **kwargs}]}, seed)
    return regularizer


def _check_training_parts(regularizer: Regularizer, restored: Regularizer, posterior: Posterior, z: Tensor,
                          params: Tensor, step: int, seed: int, subject: str) -> None:
    """The checks of :func:`check_regularizer` of a regularizer with training parts (see there)."""
    from vaezoo.regularizers.base import UpdateBatch

    parts = regularizer.training_parts()
    with _running(subject, "optimizers()"):
        groups = regularizer.optimizers()
    for group in groups:
        _require(group.part in parts, subject, f"optimizers() names part '{group.part}'; its training parts are "
                 f"{list(parts)}")
        _require(isinstance(getattr(torch.optim, group.name, None), type), subject,
                 f"optimizers() names '{group.name}', which is not a torch.optim optimiser")
    with _seeded(seed):
        second = posterior.rsample().detach() if regularizer.second_batch else None
    batch = UpdateBatch(z.detach(), second, step)
    _require_own_draws(lambda: regularizer.update(batch), subject, f"update() at step {step}")
    with _running(subject, f"update() at step {step}"), _seeded(seed):
        losses = regularizer.update(batch)
    _require(isinstance(losses, dict) and bool(losses), subject,
             f"update() must return a non-empty dict of named losses of its training parts, got {losses!r}")
    weights = [p for part in parts.values() for p in part.parameters()]
    for name, value in losses.items():
        _require_scalar(value, subject, f"update()'s loss '{name}'")
        grads = torch.autograd.grad(value, [params, *weights], retain_graph=True, allow_unused=True)
        _require(grads[0] is None, subject, f"update()'s loss '{name}' depends on the encoder's parameters; its "
                 f"losses train its training parts alone (use batch.z, which is detached)")
        _require(any(g is not None and bool(g.abs().sum() > 0) for g in grads[1:]), subject,
                 f"update()'s loss '{name}' sends no gradient to its training parts")
    with _running(subject, f"update() at step {step} in a copy restored from training_state_dict()"), _seeded(seed):
        again = restored.update(batch)
    for name, value in losses.items():
        _require(name in again and torch.equal(value, again[name]), subject,
                 f"update()'s loss '{name}' differs in a copy restored from training_state_dict()")
    regularizer.eval()
    try:
        with _running(subject, f"forward in eval mode at step {step}"), _seeded(seed), torch.no_grad():
            before = regularizer(posterior, z, step)
            for p in weights:
                p.add_(1.0)
            after = regularizer(posterior, z, step)
            for p in weights:
                p.sub_(1.0)
    finally:
        regularizer.train()
    for name, value in before.items():
        _require(name in after and torch.equal(value, after[name]), subject,
                 f"term '{name}' in eval mode depends on its training parts, which a published model does not "
                 f"have; compute such a term in training mode only (if self.training)")


def check_net(name: str, image_size: int = 32, channels: int = 1, code_size: int = 4, batch: int = 4, seed: int = 0,
              *, arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> nn.Module:
    """Check the net registered as ``name`` against the protocol: an encoder, which sets ``out_features`` and
    maps ``(B, channels, image_size, image_size)`` to ``(B, out_features)``, or a decoder (its builder takes
    ``code_size``), which maps ``(B, code_size)`` to ``(B, channels, image_size, image_size)``; the output finite,
    the gradient finite and reaching the input and every parameter, eval mode deterministic.

    Args:
        name: the registered name, e.g. ``"conv_encoder"``.
        image_size, channels, code_size: the geometry it is built for, as a model's data and latent give it.
        batch: the batch size to test with.
        seed: seed of the random input.
        kwargs: the net's own arguments (``hidden``, ...).
        arguments: the net's own arguments as a mapping, for those named like this function's own (``batch``,
            ``seed``); merged with ``kwargs``.

    Returns:
        The built net.
    """
    _require_batch(batch, "check_net")
    subject = _owner("net", name)
    kwargs = _part_arguments(subject, "check_net", arguments, kwargs)
    decoder = "code_size" in inspect.signature(registry("net")[name]).parameters
    geometry = {"image_size": image_size, "channels": channels, **({"code_size": code_size} if decoder else {})}
    with _running(subject, f"building with {kwargs} for {geometry}"):
        net = build("net", {"type": name, **kwargs, **geometry})
    _require(isinstance(net, nn.Module), subject, f"built a {type(net).__name__}, not a torch.nn.Module")
    if decoder:
        expected = (batch, channels, image_size, image_size)
        shape = (batch, code_size)
    else:
        features = getattr(net, "out_features", None)
        _require(isinstance(features, int) and features > 0, subject,
                 f"an encoder sets out_features, the number of features it gives per image; got {features!r}")
        expected, shape = (batch, features), (batch, channels, image_size, image_size)
    with _seeded(seed):
        x = (torch.randn(shape) if decoder else torch.rand(shape)).requires_grad_()
    with _running(subject, "forward"):
        y = net(x)
    _require(isinstance(y, Tensor) and tuple(y.shape) == expected, subject,
             f"gave {tuple(y.shape) if isinstance(y, Tensor) else type(y).__name__} for input {shape}, not {expected}")
    _require(bool(torch.isfinite(y).all()), subject, "its output has NaN or infinite values")
    with _running(subject, "backward"):
        y.square().sum().backward()
    _require(x.grad is not None and bool(torch.isfinite(x.grad).all()) and bool(x.grad.abs().sum() > 0), subject,
             "no finite gradient reaches its input")
    unused = [n for n, p in net.named_parameters() if p.requires_grad and p.grad is None]
    _require(not unused, subject, f"parameters get no gradient: {unused}")
    net.eval()
    with torch.no_grad():
        _require(torch.equal(net(x), net(x)), subject, "two forward passes in eval mode differ")
    return net


def check_likelihood(name: str, image_size: int = 8, channels: int = 1, batch: int = 4, seed: int = 0,
                     *, arguments: Mapping[str, Any] | None = None, **kwargs: Any) -> Likelihood:
    """Check the likelihood registered as ``name`` against the protocol: ``nll(output, x)`` is one finite value
    per pixel, shaped like ``x``, with a finite gradient to the decoder's output; ``mean(output)`` is shaped like
    ``x`` (the images :meth:`vaezoo.model.VAE.decode` gives).

    Args:
        name: the registered name, e.g. ``"bernoulli"``.
        image_size, channels, batch: the shape of the images it is tried on (binary images, which every
            likelihood scores).
        seed: seed of the random output and images.
        kwargs: the likelihood's arguments.
        arguments: the likelihood's arguments as a mapping, for those named like this function's own
            (``channels``, ``seed``, ...); merged with ``kwargs``.

    Returns:
        The built likelihood.
    """
    _require_batch(batch, "check_likelihood")
    subject = _owner("likelihood", name)
    kwargs = _part_arguments(subject, "check_likelihood", arguments, kwargs)
    with _running(subject, f"building with {kwargs}"):
        likelihood = build("likelihood", {"type": name, **kwargs})
    _require(isinstance(likelihood, Likelihood), subject,
             f"built a {type(likelihood).__name__}, not a vaezoo.likelihoods.Likelihood")
    with _running(subject, "state_dict() (a module: its __init__ calls super().__init__())"):
        likelihood.state_dict()
    shape = (batch, channels, image_size, image_size)
    with _seeded(seed):
        output, x = torch.randn(shape, requires_grad=True), torch.rand(shape).round()
    with _running(subject, "nll(output, x)"):
        nll = likelihood.nll(output, x)
    _require(isinstance(nll, Tensor) and nll.shape == x.shape, subject,
             f"nll gave {tuple(nll.shape) if isinstance(nll, Tensor) else type(nll).__name__}, not one value per "
             f"pixel shaped like the images {shape}")
    _require(bool(torch.isfinite(nll).all()), subject, "nll has NaN or infinite values")
    with _running(subject, "backward through nll"):
        nll.sum().backward()
    _require(output.grad is not None and bool(torch.isfinite(output.grad).all()), subject,
             "no finite gradient reaches the decoder's output")
    with _running(subject, "mean(output)"):
        mean = likelihood.mean(output.detach())
    _require(isinstance(mean, Tensor) and mean.shape == x.shape, subject,
             f"mean gave {tuple(mean.shape) if isinstance(mean, Tensor) else type(mean).__name__}, not images "
             f"shaped {shape}")
    return likelihood


def check_architecture(name: str, batch: int = 4, seed: int = 0, train: bool = True, *,
                       arguments: Mapping[str, Any] | None = None, **model_kwargs: Any) -> VAE:
    """Build the architecture registered as ``name`` and run :func:`check_model` on it.

    Args:
        name: the registered name, e.g. ``"jointvae"``.
        batch: the batch size to test with.
        seed: seed of the random inputs.
        train: then run :func:`check_training` on the same model (on the synthetic dataset at its image size
            and channels), measuring every metric of the built-in plugins and of the part's own that it can serve.
        model_kwargs: the builder's arguments, with the facts of the data (``image_size``, ``channels``,
            ...) it takes. When none are given, the model of the first card of this architecture is
            built (the card's dataset gives the facts), or else the builder is called with no arguments.
        arguments: the builder's arguments as a mapping, for those named like this function's own (``batch``,
            ``seed``, ``train``); merged with ``model_kwargs``.

    Returns:
        The built model.
    """
    _require_batch(batch, "check_architecture")
    subject = _owner("architecture", name)
    model_kwargs = _part_arguments(subject, "check_architecture", arguments, model_kwargs)
    cards = [] if model_kwargs else [c for c in discover().values() if c.architecture == name]
    with _running(subject, f"building with {model_kwargs or (cards and cards[0].name) or 'no arguments'}"):
        model = build_model(cards[0]) if cards else build("architecture", {"type": name, **model_kwargs})
    _require(isinstance(model, VAE), subject, f"the builder returned a {type(model).__name__}, not a vaezoo.model.VAE")
    check_model(model, batch=batch, seed=seed, subject=subject)
    if train:
        arguments = cards[0].model if cards else model_kwargs
        _train_part(subject, registry("architecture").plugin_of(name), name, arguments, seed,
                    image_size=model.image_size, channels=model.channels)
    return model


def check_model(model: VAE, batch: int = 4, seed: int = 0, step: int = 0, subject: str | None = None) -> None:
    """Check a built model: forward/backward, shapes, no NaN, eval determinism and a safetensors round trip.

    In training mode the loss must be the sum of finite scalar terms including
    ``reconstruction`` and every parameter must get a finite gradient; in eval
    mode two forwards must agree and decode the posterior's mode; ``sample``
    and ``reconstruct`` must give finite image-shaped outputs; and a copy with
    scrambled weights restored from the model's safetensors file must give the
    same outputs. The model's state and train/eval mode are restored afterwards.

    Args:
        model: the model to check.
        batch: the batch size to test with.
        seed: seed of the random inputs.
        step: the training step passed to ``forward``.
        subject: how to name the model in messages (default: its class).

    Raises:
        TypeError: ``model`` is not a vaezoo model (a name, None, another module), before anything runs.
    """
    if not isinstance(model, VAE):
        raise TypeError(f"check_model checks a built vaezoo model (vaezoo.load or vaezoo.build_model gives one), "
                        f"not {type(model).__name__}; check a card with check_card(NAME)")
    _require_batch(batch, "check_model")
    subject = subject or f"model {type(model).__name__}"
    was_training = model.training
    device = next(model.parameters()).device
    image = (model.channels, model.image_size, model.image_size)
    x = torch.rand(batch, *image, generator=torch.Generator().manual_seed(seed)).to(device)
    state = copy.deepcopy(model.state_dict())  # a training-mode forward may update buffers
    try:
        with _seeded(seed):
            _check_training(model, x, step, subject)
        model.load_state_dict(state)
        _check_eval(model, x, step, seed, subject)
    finally:
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        model.train(was_training)


def _check_training(model: VAE, x: Tensor, step: int, subject: str) -> None:
    model.train()
    model.zero_grad(set_to_none=True)
    with _running(subject, "forward in training mode"):
        out = model(x, step=step)
    _check_output(model, out, x, subject)
    with _running(subject, "backward"):
        out.loss.backward()
    unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    _require(not unused, subject, f"parameters get no gradient from the loss: {unused}")
    bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    _require(not bad, subject, f"parameters get NaN or infinite gradients: {bad}")
    _require(any(bool(p.grad.abs().sum() > 0) for p in model.parameters() if p.grad is not None), subject,
             "the loss has a zero gradient for every parameter")


def _check_eval(model: VAE, x: Tensor, step: int, seed: int, subject: str) -> None:
    model.eval()
    batch, image = x.shape[0], tuple(x.shape[1:])
    with torch.no_grad(), _running(subject, "forward in eval mode"):
        first, second = model(x, step=step), model(x, step=step)
    _check_output(model, first, x, subject)
    _require(torch.equal(first.output, second.output), subject, "two forwards in eval mode differ")
    _require(torch.equal(first.z, first.posterior.mode), subject, "eval mode does not decode the posterior's mode")
    with _running(subject, "sample()"):
        samples = model.sample(batch, generator=torch.Generator().manual_seed(seed))
    _require_tensor(samples, (batch, *image), subject, "sample()", x.device)
    with _running(subject, "reconstruct()"):
        recon = model.reconstruct(x)
    _require_tensor(recon, (batch, *image), subject, "reconstruct()", x.device)
    _check_round_trip(model, x, first.output, step, subject)


def _check_output(model: VAE, out, x: Tensor, subject: str) -> None:
    mode = "training" if model.training else "eval"
    _require_scalar(out.loss, subject, f"the loss in {mode} mode", x.device)
    _require("reconstruction" in out.terms, subject, f"the loss terms {list(out.terms)} lack 'reconstruction'")
    for name, value in {**out.terms, **{f"kl {k}": v for k, v in out.kl.items()}}.items():
        _require_scalar(value, subject, f"'{name}' in {mode} mode", x.device)
    _require(torch.allclose(out.loss, sum(out.terms.values())), subject, "the loss is not the sum of its terms")
    _require_tensor(out.z, (x.shape[0], model.latent.code_size), subject, f"the code z in {mode} mode", x.device)
    _require_tensor(model.likelihood.mean(out.output), tuple(x.shape), subject,
                    f"the decoded mean image in {mode} mode", x.device)


def _check_round_trip(model: VAE, x: Tensor, expected: Tensor, step: int, subject: str) -> None:
    """Save to safetensors, load into a copy whose weights were scrambled, and compare outputs."""
    from vaezoo.store.weights import load_weights, read_safetensors, save_weights

    copied = copy.deepcopy(model)
    with torch.no_grad():
        for p in copied.parameters():
            p.add_(1.0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.safetensors"
        with _running(subject, "saving the state dict as safetensors"):
            save_weights(model.state_dict(), path)
        with _running(subject, "loading its safetensors file"):
            load_weights(copied, read_safetensors(path, device=expected.device), "the saved weights")
    with torch.no_grad():
        output = copied(x, step=step).output
    _require(torch.equal(output, expected), subject, "a copy restored from its safetensors file gives other outputs")


def check_card(card: Card | str | Path, batch: int = 4, seed: int = 0, pretrained: bool = True) -> VAE:
    """Check a zoo card: it validates, its model builds and passes :func:`check_model`, its weights verify and load.

    The card's eval metrics must be registered, its headline must be one of
    its metrics once it has any, and it must state its input: an ``[input]``
    section whose ``transform`` says how the dataset's images became the
    model's input, naming their size (``"... resized to 32x32 ..."``). Weights beside the card must exist and match
    the card's sha256 and size; weights at a URL are checked only when already
    in the cache (nothing is downloaded).

    Args:
        card: a :class:`~vaezoo.entries.schema.Card`, a zoo name, the path of its TOML file or a folder holding it.
        batch: the batch size to test with.
        seed: seed of the random inputs.
        pretrained: load and check the card's weights when it has them.

    Returns:
        The model, with the card's weights when they were loaded.
    """
    from vaezoo.entries.entry import weights_file
    from vaezoo.store.checksums import read_verified
    from vaezoo.store.weights import load_weights, parse_safetensors

    _require_batch(batch, "check_card")
    if not isinstance(card, Card):
        with _running(f"card {card}", "validating"):
            card = get_card(card)
    subject = f"card '{card.name}' ({card.path})" if card.path else f"card '{card.name}'"
    _require(card.architecture in registry("architecture"), subject,
             f"architecture '{card.architecture}' is not registered by any loaded plugin")
    for name in card.eval_metrics:
        _require(name in registry("metric"), subject, f"eval metric '{name}' is not registered")
    _require(not card.metrics or card.headline is None or card.headline in card.metrics, subject,
             f"headline '{card.headline}' is not one of its metrics {sorted(card.metrics)}")
    _check_input(card, subject)
    with _running(subject, "building its model"):
        model = build_model(card)
    check_model(model, batch=batch, seed=seed, step=card.train.steps or 0, subject=subject)
    if not pretrained or card.weights is None:
        return model
    with _running(subject, "finding its weights"):
        path = weights_file(card)
    if path is None:  # at a URL, not downloaded
        return model
    with _running(subject, "verifying its weights"):  # load_weights refuses NaN and infinite values
        data = read_verified(path, card.weights)
        load_weights(model, parse_safetensors(data, path), f"weights of '{card.name}'")
    check_model(model, batch=batch, seed=seed, step=card.train.steps or 0, subject=f"{subject} with its weights")
    return model



def _check_input(card: Card, subject: str) -> None:
    """Every card states its input: how the dataset's images became it, at the size the dataset gives."""
    _require(card.input is not None and bool(card.input.transform.strip()), subject,
             "states no [input]: add a section [input] with transform = how the dataset's images became the "
             "model's input, in words (see CONTRIBUTING.md)")
    with _running(subject, "describing its dataset"):
        size = data_info(card).image_size
    _require(f"{size}x{size}" in card.input.transform, subject,
             f"its [input] transform {card.input.transform!r} does not name the input's size {size}x{size}")


def check_training(card: Card | str | Path, steps: int = TRIAL_STEPS, seed: int = 0,
                   metrics: Sequence[str] | None = None) -> VAE:
    """Do what ``vaezoo train CARD`` does, in miniature, and check that each part of it works.

    The card's recipe (its model, optimiser, precision) is trained for ``steps`` steps of batch 8 on the
    ``synthetic`` dataset (:mod:`vaezoo.data.synthetic`) at the image size and channels of the card's own
    dataset, so nothing is downloaded, through :func:`vaezoo.training.train.train` in a temporary folder. Before
    that, the metrics are matched against the model and the card's own dataset as at step 0 of ``vaezoo train``
    (a metric the model or that dataset cannot serve, such as one needing factors of MNIST, fails, naming it);
    after it, the run must have written its weights and a card holding its losses, all finite,
    and every metric, each measured with its spec's quick settings (:attr:`~vaezoo.metrics.spec.MetricSpec.quick`:
    this checks that a metric works, not its value); a traversal of the trained model must sweep every
    dimension inside its prior's support and decode finite images; and the run's folder must load back with
    :func:`vaezoo.load` to the trained weights. The lines ``vaezoo train`` printed are quoted when something fails.

    Args:
        card: a :class:`~vaezoo.entries.schema.Card`, a zoo name, the path of its TOML file or a folder holding it.
        steps: training steps.
        seed: the run's seed.
        metrics: the registered metrics to measure (default: the card's ``eval_metrics``).

    Returns:
        The trained model, loaded back from the run's folder.
    """
    if not isinstance(card, Card):
        with _running(f"card {card}", "validating"):
            card = get_card(card)
    return _trial(card, f"card '{card.name}'", steps, seed, metrics)


def _trial(card: Card, subject: str, steps: int, seed: int, metrics: Sequence[str] | None, data=None,
           data_root=None) -> VAE:
    """:func:`check_training`, naming what is checked as ``subject`` in messages; ``data`` (a
    :class:`~vaezoo.entries.schema.DataSpec`) trains on that dataset instead, one epoch, read from
    ``data_root``."""
    from vaezoo.entries.schema import DataSpec
    from vaezoo.evaluation.measure import check_metrics
    from vaezoo.metrics.parallel import jobs

    with _running(subject, "describing its dataset"):
        info = data_info(card)
    data = data or DataSpec(name="synthetic", options={"image_size": info.image_size, "channels": info.channels,
                                                       "size": steps * TRIAL_BATCH})
    recipe = card.train.model_copy(update={"data": data, "epochs": 1, "batch_size": TRIAL_BATCH, "seed": seed,
                                           "steps": None, "compile": False})
    names = list(card.eval_metrics if metrics is None else metrics)
    with _running(subject, "looking up its metrics"):
        quick = {name: {**card.settings_of(name), **metric(name).quick} for name in names}
    trial = card.model_copy(update={"train": recipe, "weights": None, "metrics": {}, "sections": {},
                                    "eval_metrics": names, "eval_settings": quick})
    subject = f"{subject}, trained as 'vaezoo train' does"
    with _running(subject, "building its model"):
        model = build_model(trial)
    # against the card's own dataset, as 'vaezoo train' checks at step 0: the synthetic one has every factor
    with _running(subject, "matching its metrics against the model (the check at step 0)"):
        check_metrics(model, card.model_copy(update={"eval_metrics": names, "eval_settings": quick}), metrics)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        said = io.StringIO()
        # one job: the fits' worker processes took more of a trial's time than its fits on a few hundred points
        with redirect_stderr(said), warnings.catch_warnings(record=True) as warned, _running(subject, "training"), \
                jobs(1):
            from vaezoo.training.train import train

            warnings.simplefilter("always", PublishWarning)
            result = train(trial, out, data_root=data_root)
        told = [f"warning: {w.message}" for w in warned if issubclass(w.category, PublishWarning)]
        _check_run(result, trial, out, said.getvalue(), told, subject)
        return _check_loaded(out, result.model, subject, data_root)


def _check_run(result, trial: Card, out: Path, said: str, warned: list[str], subject: str) -> None:
    """The run finished, kept its weights and wrote a card with every metric and its losses, all finite.

    ``said`` is what the run said on stderr, ``warned`` its :class:`~vaezoo.errors.PublishWarning` lines.
    """
    _require(result.card_path is not None and result.card_path.is_file(), subject,
             f"the run stopped at step {result.step} of {result.total} without writing its card")
    written = parse_card(result.card_path)
    _require(written.weights is not None and (out / written.weights.file).is_file(), subject,
             "the run wrote no weights")
    for name in ["reconstruction", *trial.eval_metrics]:
        told = [line for line in warned if f"metric '{name}' " in line]
        _require(name in written.metrics, subject,
                 f"its card lacks '{name}'" + (f": {told[0]}" if told else f"; vaezoo train said: {said[-500:]}"))
    for name, measured in written.metrics.items():  # a metric may be NaN or infinite by definition; a loss may not
        _require(name in trial.eval_metrics or math.isfinite(measured.value), subject,
                 f"its test-set '{name}' came out {measured.value}")


def _check_loaded(out: Path, trained: VAE, subject: str, data_root=None) -> VAE:
    """The run's folder loads to the trained weights, and a traversal of its test images (read from ``data_root``)
    stays in the prior's support."""
    from vaezoo.evaluation import viz
    from vaezoo.hub import load

    with _running(subject, "loading the run's folder with vaezoo.load"):
        loaded = load(out)
    expected = trained.state_dict()
    _require(loaded.state_dict().keys() == expected.keys() and all(
        torch.equal(value, expected[key].cpu()) for key, value in loaded.state_dict().items()), subject,
        "the run's folder loads other weights than the run trained")
    with _running(subject, "encoding its test split"):
        images = card_dataset(loaded.card, data_root, "test").batch(slice(0, TRIAL_BATCH))
        posterior = loaded.encode(images)
    for name, part in loaded.latent.parts.items():
        _check_sweeps(name, part, posterior.parts[name], viz.DEFAULT_SPAN, subject)
    with _running(subject, "traversing its latent (vaezoo show traverse)"):
        traversal = viz.traverse(loaded, data=images, reference=images[0])
    _require(bool(torch.isfinite(traversal.tiles).all()), subject, "its traversal decodes NaN or infinite values")
    return loaded


def check_dataset(name: str, seed: int = 0, data_root: str | Path | None = None, *,
                  arguments: Mapping[str, Any] | None = None, **options: Any) -> None:
    """Check the dataset registered as ``name``, with ``options``, then train on it as ``vaezoo train`` does.

    For each split, "train" and "test", ``info()`` must describe what ``load()`` gives (size, image size,
    channels, factor names, nominal factors), its batches must be float images in [0, 1], and its labels and
    factors must have a row per image. Then a small ``vae`` (MLP nets, a Gaussian latent, a Bernoulli likelihood, or a
    Gaussian one where the first images have grey levels) is trained on its train split,
    one epoch of 8 images a step, and checked as :func:`check_training` checks a run, measuring every
    metric of the built-in plugins and of the dataset's own that it can serve: give options for a small split.

    Args:
        name: the registered name, e.g. ``"dsprites"``.
        seed: the run's seed.
        data_root: where the dataset lives (``--data-root``; default ``VAEZOO_DATA`` or the default folder).
        arguments: the dataset's options as a mapping, for those named like this function's own (a ``seed`` of
            a drawn dataset, ``data_root``); merged with ``options``.
        options: the dataset's options, as a card's ``[train.data]`` gives them.
    """
    from vaezoo.assemble import load_dataset
    from vaezoo.data import DataInfo
    from vaezoo.entries.schema import DataSpec

    subject = _owner("dataset", name)
    options = _part_arguments(subject, "check_dataset", arguments, options)
    _require("split" not in options, subject, "check_dataset checks both splits, 'train' and 'test', itself; give "
             "the dataset's options without split")
    grey = False
    for split in ("train", "test"):
        with _running(subject, f"describing split '{split}' with {options}"):
            info = registry("dataset")[name].info(split, **options)
        _require(isinstance(info, DataInfo), subject,
                 f"info('{split}') returned a {type(info).__name__}, not a vaezoo.data.DataInfo")
        with _running(subject, f"loading split '{split}' with {options}"):
            data = load_dataset(name, data_root, split, **options)
            images = data.batch(slice(0, TRIAL_BATCH))
        said = f"split '{split}': info() says {info}, but load() gives"
        _require(len(data) == info.size, subject, f"{said} {len(data)} images")
        _require(tuple(images.shape[1:]) == (info.channels, info.image_size, info.image_size), subject,
                 f"{said} images {tuple(images.shape[1:])}")
        _require(images.is_floating_point() and bool(((images >= 0) & (images <= 1)).all()), subject,
                 f"split '{split}': batch() gives values that are not floats in [0, 1]; set the dataset's scale")
        grey = grey or Bernoulli().not_a_density_of(images) is not None
        _require(tuple(data.factor_names) == tuple(info.factor_names), subject, f"{said} factors {data.factor_names}")
        _require(set(data.nominal_factors) == set(info.nominal_factors), subject,
                 f"{said} nominal factors {data.nominal_factors}; the metrics read the loaded dataset's")
        for what, rows in (("labels", data.labels), ("factors", data.factors)):
            _require(rows is None or len(rows) == len(data), subject,
                     f"split '{split}': {len(rows) if rows is not None else 0} {what} for {len(data)} images")
    model = {"latent": {"type": "gaussian", "dim": 4}, **TRIAL_NETS, "regularizers": [{"type": "beta", "beta": 1.0}],
             "likelihood": "gaussian" if grey else "bernoulli"}
    _train_part(subject, registry("dataset").plugin_of(name), "vae", model, seed,
                data=DataSpec(name=name, options=options), data_root=data_root)


def _train_part(subject: str, plugin: str, architecture: str, model: Mapping[str, Any], seed: int,
                image_size: int = 16, channels: int = 1, data=None, data_root=None) -> None:
    """:func:`check_training` of ``architecture`` built with ``model``, measuring every metric that it can serve
    of vaezoo's built-in plugins and of ``plugin`` (the part's: another third party's metric is that plugin's to
    check); the facts of the data are the synthetic dataset's, at ``image_size`` and ``channels``, or
    ``data``'s (a :class:`~vaezoo.entries.schema.DataSpec`), which it then trains on."""
    from vaezoo.errors import VaezooError
    from vaezoo.evaluation.measure import check_metrics
    from vaezoo.version import __version__

    card = Card.model_validate({
        "name": "kit-trial", "architecture": architecture, "summary": f"the conformance kit's run of {subject}",
        "dataset": "synthetic", "paper": "none", "license": "none", "vaezoo_version": __version__,
        "model": _without_facts(model),
        "train": {"data": data.model_dump() if data else {
                      "name": "synthetic", "options": {"image_size": image_size, "channels": channels}},
                  "epochs": 1, "batch_size": TRIAL_BATCH, "optimizer": {"name": "Adam", "lr": 1e-3}},
    })
    with _running(subject, f"building a model for a run with {card.model}"):
        model = build_model(card)
    served = []
    metrics, plugins = registry("metric"), get_plugins().info
    for name in metrics:
        if metrics.plugin_of(name) != plugin and not plugins[metrics.plugin_of(name)].builtin:
            continue
        try:
            with _running(subject, f"matching metric '{name}' against a model with it"):
                check_metrics(model, card, [name])
        except ConformanceError as exc:
            if not isinstance(exc.__cause__, VaezooError):  # refused: the model cannot serve it
                raise
            continue
        served.append(name)
    _trial(card, subject, TRIAL_STEPS, seed, served, data, data_root)


def _without_facts(spec: Any) -> Any:
    """``spec`` without the facts of the data (image size, channels, ...), at any depth: a run takes them from
    its dataset."""
    if isinstance(spec, Mapping):
        return {k: _without_facts(v) for k, v in spec.items() if k not in FACTS}
    if isinstance(spec, list | tuple):
        return [_without_facts(v) for v in spec]
    return spec
