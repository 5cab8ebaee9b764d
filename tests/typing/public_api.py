"""vaezoo's public API as a user's typed code calls it (README.md, docs/plugins.md, CONTRIBUTING.md), for
``mypy --strict``: vaezoo ships ``py.typed``, so a wrong or missing hint here is an error in its users' code.

tests/test_typing.py type-checks this file; it is never run (it would need the network and a GPU's time).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import assert_type

import torch
from torch import Tensor
from torch.distributions import Distribution, Laplace, kl_divergence
from torch.utils.data import DataLoader

import vaezoo
from vaezoo import testing
from vaezoo.assemble import card_dataset
from vaezoo.cli import Command
from vaezoo.context import BuildContext, batch_mean
from vaezoo.data import DataInfo, Dataset, ImageDataset
from vaezoo.data.transforms import for_model
from vaezoo.entries.schema import Card, Metric
from vaezoo.evaluation.report import Comparison, EvalReport, evaluate_card
from vaezoo.latents import LatentFamily, LocationScale, Posterior, Sweep, require_params
from vaezoo.latents.base import distribution_checks
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import FACTORS, Requirement
from vaezoo.metrics.spec import MetricSpec, metric_spec
from vaezoo.model import VAE, VAEOutput, build_vae
from vaezoo.regularizers import Regularizer, select_part
from vaezoo.regularizers.base import OptimizerGroup, UpdateBatch
from vaezoo.training.auxiliary import TrainingParts

# --- a user of the zoo (README.md) ---------------------------------------------------------------------------------


def the_zoo() -> list[object]:
    names: list[str] = vaezoo.list_models("jointvae-*")
    some: list[str] = vaezoo.list_models(["vae-*", "betavae-*"], exclude="*-original-*", where={"beta": "6"})
    card: Card = vaezoo.get_card("jointvae-mnist")
    model: VAE = vaezoo.load("jointvae-mnist", device="cpu")
    from_folder: VAE = vaezoo.load(Path("runs/x"), dtype=torch.float64)
    untrained: VAE = vaezoo.load("jointvae-mnist", pretrained=False, continuous=5)
    built: VAE = vaezoo.build_model(card, device=torch.device("cpu"), dtype=torch.float32)
    hub: VAE = vaezoo.from_pretrained("OWNER/REPO", revision="v1.0", cache_dir=None, local_files_only=False)
    # a model made from a card has it: no None check (README's Quickstart)
    loaded = vaezoo.load("jointvae-mnist")
    headline: Metric = loaded.card.metrics["cluster_accuracy"]
    test: ImageDataset = card_dataset(loaded.card, None, "test")
    cards = [assert_type(vaezoo.build_model(card).card, Card), assert_type(vaezoo.from_pretrained("mine/").card, Card)]
    written: list[Path] = vaezoo.save_pretrained(model, "mine/")
    vaezoo.save_pretrained(torch.compile(model), Path("compiled/"))  # unwrapped, as timm's unwrap_model does
    vaezoo.push_to_hub(torch.nn.DataParallel(model), "OWNER/REPO", private=True)
    return [names, some, from_folder, untrained, built, hub, headline, test, cards, written, vaezoo.__version__]


def the_model(model: VAE, card: Card) -> list[object]:
    test: ImageDataset = card_dataset(card, None, "test")
    x: Tensor = test.batch(slice(0, 8))
    one: Tensor = test.batch(0)
    picked: Tensor = test.batch([0, 2, 4], device="auto")
    image, label = test[0]
    labels: Tensor | None = test.labels
    loader: DataLoader[tuple[Tensor, Tensor]] = DataLoader(test, batch_size=64)
    starts = [start for start, _ in assert_type(test.batches(64, device="cpu"), Iterator[tuple[int, Tensor]])]

    posterior: Posterior = model.encode(x)
    code: Tensor = posterior.mode
    kl: Tensor = posterior.kl()
    kl_parts: dict[str, Tensor] = posterior.kl_parts()
    parts: dict[str, Posterior] = posterior.parts
    samples: Tensor = model.sample(16, generator=torch.Generator().manual_seed(0))
    decoded: Tensor = model.decode(code)
    logits: Tensor = model.decode_logits(code)
    rebuilt: Tensor = model.reconstruct(x)
    out = assert_type(model(x), VAEOutput)  # nn.Module's __call__ says Any
    at_step: VAEOutput = model.forward(x, step=0)
    terms: dict[str, Tensor] = at_step.terms
    raw = torch.randint(0, 256, (28, 28), dtype=torch.uint8)
    given: Tensor = model.preprocess(raw)
    per_image: Tensor = for_model(model).per_image(raw)
    slices: dict[str, slice] = model.part_slices
    size: int = model.code_size
    measured: dict[str, object] = {}
    if model.card is not None:  # a model built from parts directly has none
        metric: Metric = model.card.metrics["cluster_accuracy"]
        measured[metric.command] = metric.value
    return [one, picked, image, label, labels, loader, starts, kl, kl_parts, parts, samples, decoded, logits, rebuilt,
            out.loss, terms, given, per_image, slices, size, measured]


def the_evaluation() -> list[object]:
    report: EvalReport = evaluate_card("jointvae-mnist", data_root=Path("data"), device="auto",
                                       metrics=["cluster_accuracy"],
                                       settings={"importance_log_likelihood": {"samples": 200}}, jobs=1)
    results: dict[str, float] = report.results
    comparisons: list[Comparison] = report.check(tolerance=1e-4)
    agree: list[bool] = [comparison.agrees for comparison in comparisons]
    values: list[float | None] = [comparison.measured for comparison in comparisons]
    checked = assert_type(report.checked, dict[str, Metric])
    failed: dict[str, str] = report.failed
    not_finite: dict[str, str] = report.not_finite
    written: Card = report.write()
    return [results, agree, values, checked, failed, not_finite, written]


def a_training_loop(model: VAE, batches: list[Tensor], optimizer: torch.optim.Optimizer) -> None:
    parts = TrainingParts(model)
    for step, x in enumerate(batches):
        out: VAEOutput = model(x, step=step)
        optimizer.zero_grad()
        torch.autograd.backward(out.loss)
        optimizer.step()
        second = batches[0] if parts.second_batch else None
        parts.step(model, out, step, second=second)


# --- a plugin author (docs/plugins.md, CONTRIBUTING.md) ------------------------------------------------------------


class LaplacePosterior(Posterior):
    """Laplace(loc, scale) per dimension, a Laplace(0, 1) prior."""

    def __init__(self, loc: Tensor, log_scale: Tensor) -> None:
        self.loc, self.log_scale = loc, log_scale
        self.code_size = loc.shape[-1]
        self.laplace = Laplace(loc, log_scale.exp())
        self.standard = Laplace(torch.zeros_like(loc), torch.ones_like(loc))
        self.distribution, self.prior = self.laplace, self.standard

    def rsample(self) -> Tensor:
        return self.laplace.rsample()

    @property
    def mode(self) -> Tensor:
        return self.loc

    def kl(self) -> Tensor:
        divergence: Tensor = kl_divergence(self.laplace, self.standard)
        return divergence

    def location_scale(self) -> LocationScale:
        return LocationScale(self.loc, self.log_scale.exp(), Laplace)


class LaplaceFamily(LatentFamily):
    """A ``dim``-dimensional factorised Laplace latent."""

    example = {"dim": 3}

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = self.code_size = dim
        self.param_size = 2 * dim

    @property
    def prior(self) -> Laplace:
        return Laplace(torch.zeros(()), torch.ones(()))

    def posterior(self, params: Tensor) -> LaplacePosterior:
        require_params(self, params, 2 * self.dim, "2 * dim")
        loc, log_scale = params.chunk(2, dim=-1)
        return LaplacePosterior(loc, log_scale)

    def sample_prior(self, n: int, generator: torch.Generator | None = None,
                     device: torch.device | None = None) -> Tensor:
        u = torch.rand(n, self.dim, generator=generator, device=device) - 0.5
        return -u.sign() * torch.log1p(-2 * u.abs())

    def sweeps(self, steps: int, span: tuple[float, float]) -> list[Sweep]:
        return super().sweeps(steps, span)


class Sparsity(Regularizer):
    """An L1 penalty on one part's code, beside that part's KL."""

    example = {"weight": 1.0}

    def __init__(self, weight: float = 1.0, part: str | None = None) -> None:
        super().__init__()
        self.weight, self.part = weight, part

    def forward(self, posterior: Posterior, z: Tensor, step: int) -> dict[str, Tensor]:
        selected, code = assert_type(select_part(posterior, z, self.part), tuple[Posterior, Tensor])
        return {"l1": self.weight * batch_mean(code.abs()), "kl": batch_mean(selected.kl())}

    def targets(self, posterior: Posterior, step: int) -> dict[str, float]:
        return {"weight": self.weight}


class Critic(Regularizer):
    """A regularizer with a training part of its own."""

    example = {"hidden": 8}
    second_batch = True

    def __init__(self, code_size: int, hidden: int = 8) -> None:
        super().__init__()
        self.add_training_part("critic", torch.nn.Sequential(torch.nn.Linear(code_size, hidden),
                                                             torch.nn.Linear(hidden, 2)))

    def forward(self, posterior: Posterior, z: Tensor, step: int) -> dict[str, Tensor]:
        terms = {"kl": batch_mean(posterior.kl())}
        if self.training:
            terms["tc"] = self.critic(z).mean()
        return terms

    def optimizers(self) -> list[OptimizerGroup]:
        return [OptimizerGroup("critic", "Adam", 1e-4, {"betas": (0.5, 0.9)})]

    def update(self, batch: UpdateBatch) -> dict[str, Tensor]:
        real: Tensor = self.critic(batch.z)
        fake: Tensor = self.critic(batch.second if batch.second is not None else batch.z)
        return {"critic": real.mean() - fake.mean() + batch.step}


@metric_spec(higher_is_better=True, needs=(FACTORS,), quick={"points": 100})
def spread(evaluation: Evaluation, points: int = 1000, seed: int = 0) -> float:
    """The spread of the codes of ``points`` images drawn at random."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, len(evaluation.images), (points,), generator=generator)
    codes = evaluation.codes[rows.numpy()]
    on = assert_type(evaluation.device, torch.device | None)
    model: VAE = evaluation.model
    every: int = evaluation.batch_size
    shared: float = evaluation.shared(("spread", points, seed), lambda: float(codes.std()))
    return shared + 0 * (every + model.code_size + len(str(on)))


def measured_alone(model: VAE, test: ImageDataset) -> float:
    spec: MetricSpec = spread
    value: float = spec(model, test, device="cpu", batch_size=256, points=10)
    return value


def no_second_dimension(model: VAE, info: DataInfo) -> str | None:
    return None if model.code_size >= 2 else "the code has one dimension"


TWO = Requirement("a code of two dimensions", no_second_dimension)


class SparseVAE(VAE):
    """A VAE subclass with a method of its own, as JointVAE adds predict_label."""

    def active(self, x: Tensor) -> Tensor:
        return self.encode(x).mode.abs() > 0.1


def build_sparse_vae(context: BuildContext, image_size: int, channels: int, dim: int = 8) -> SparseVAE:
    return build_vae(context, image_size, channels, latent={"type": "laplace", "dim": dim},
                     regularizers=[{"type": "sparsity", "weight": 1.0}], encoder="mlp_encoder", cls=SparseVAE)


def build_plain_vae(context: BuildContext, image_size: int, channels: int) -> VAE:
    return build_vae(context, image_size, channels, latent={"type": "gaussian", "dim": 4})


class Squares(Dataset):
    """A synthetic dataset of blank squares; a card's options are keyword parameters (``size``) or ``**options``."""

    def info(self, split: str = "train", size: int = 16) -> DataInfo:
        return DataInfo(size=size, image_size=8, channels=1)

    def load(self, root: str | os.PathLike[str] | None = None, split: str = "train",
             **options: object) -> ImageDataset:
        return ImageDataset(torch.zeros(16, 1, 8, 8, dtype=torch.uint8), scale=255.0)

    def record(self, **options: object) -> dict[str, object]:
        """What a run's card records: the size, which its card may leave to the default."""
        return {"size": 16, **options}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("card", help="a zoo name or a card's TOML file")


def run(args: argparse.Namespace) -> int | None:
    card = vaezoo.get_card(args.card)
    print(f"{card.name}: {card.architecture}")
    return None


@vaezoo.hookimpl
def vaezoo_register_commands(register: Callable[[str, Command], None]) -> None:
    register("arch-of", Command(help="print a card's architecture", run=run, add_arguments=add_arguments))


@vaezoo.hookimpl
def vaezoo_register_latent_families(register: Callable[[str, type[LatentFamily]], None]) -> None:
    register("laplace", LaplaceFamily)


def the_kit() -> list[object]:
    added: dict[str, list[str]] = testing.check_plugin("laplace")
    family: LatentFamily = testing.check_latent_family("laplace", dim=3)
    regularizer: Regularizer = testing.check_regularizer("beta", latent={"type": "laplace", "dim": 3}, beta=4.0)
    warm: Regularizer = testing.check_regularizer("warm_kl", arguments={"steps": 10})
    model: VAE = testing.check_architecture("laplacevae", image_size=16, channels=1)
    card: VAE = testing.check_card(Path("cards/laplacevae-mnist.toml"))
    trained: VAE = testing.check_training("cards/laplacevae-mnist.toml", metrics=["elbo"])
    testing.check_dataset("squares", data_root=None)
    net: torch.nn.Module = testing.check_net("mlp_encoder")
    likelihood = testing.check_likelihood("bernoulli")
    testing.check_model(model, subject="my model")
    with distribution_checks(True):
        prior: Distribution = family.prior
    try:
        testing.check_plugin("missing")
    except testing.ConformanceError as exc:
        return [exc]
    return [added, regularizer, warm, card, trained, net, likelihood, prior]
