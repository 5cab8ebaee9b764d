"""Evaluation on a test split: the losses every model has, plus the metrics its card lists."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

from vaezoo.assemble import card_dataset, card_metric, data_info, metric
from vaezoo.data import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.devices import usable_device
from vaezoo.entries.schema import Card
from vaezoo.errors import MetricError, UnknownNameError, VaezooError
from vaezoo.latents import Posterior
from vaezoo.metrics.codes import EncodingBuilder, inference
from vaezoo.metrics.evaluation import CountedImages, Evaluation, require_image_dataset
from vaezoo.metrics.requirements import unmet
from vaezoo.model import VAE
from vaezoo.plugins import registry
from vaezoo.store.locks import GENERATORS
from vaezoo.terminal import progress


def losses(model: VAE, dataset: ImageDataset | CountedImages, step: int | None, batch_size: int, device=None,
           posteriors: Callable[[Posterior], None] | None = None) -> dict[str, float]:
    """Test-set reconstruction loss per image, KL per latent part and the objective at ``step``.

    The model is put in eval mode: the code is the posterior's mode, so the numbers are deterministic, and
    the objective is the training loss's formula at the mean code, not its average over sampled codes
    (docs/metrics.md, "The losses beside them"). The pass runs in inference mode, a convolutional decoder's weights
    in ``channels_last`` order (:func:`vaezoo.metrics.codes.inference`); the model is left as it was.

    Args:
        model: the model, on ``device``.
        dataset: the images to score.
        step: the training step the objective's schedules (e.g. capacities) are taken at; None (a
            model whose training step is unknown, such as a converted checkpoint) leaves the objective out.
        batch_size: images per forward pass. The reconstruction and KL do not depend on it; the
            objective does, as in training (a capacity's ``|KL - C|`` and a TC estimate are taken per
            batch), so :func:`evaluate` passes the recipe's batch size.
        device: where to run (``"auto"`` too: :func:`vaezoo.devices.usable_device`).
        posteriors: called with each batch's q(z|x), in the dataset's order (to keep the pass's encoding).

    Returns:
        ``{"reconstruction", "objective", "kl_<part>" for each latent part}``, each averaged over the images.

    Raises:
        PluginError: the latent family gave a code or a KL that is not finite (:meth:`VAE.check_output`).
        TypeError: ``dataset`` is a torch ``Dataset`` of another kind, saying how to make an ImageDataset of it.
    """
    if not isinstance(dataset, CountedImages):
        require_image_dataset(dataset, "the losses are measured")
    totals: dict[str, float] = defaultdict(float)
    start = 0
    with inference(model):
        for _, x in dataset.batches(batch_size, usable_device(device)):
            out = model(x, step=step or 0)
            model.check_output(out, f"of the batch of test images from {start:,}")  # no NaN code reaches a card
            start += len(x)
            if posteriors is not None:
                posteriors(out.posterior)
            weight = x.shape[0] / len(dataset)
            totals["reconstruction"] += out.terms["reconstruction"].item() * weight
            if step is not None:
                totals["objective"] += out.loss.item() * weight
            for part, value in out.kl.items():
                totals[f"kl_{part}"] += value.item() * weight
    return dict(totals)


def evaluate(model: VAE, card: Card, data_root=None, device=None, batch_size: int = EVAL_BATCH_SIZE,
             metrics: Sequence[str] | None = None,
             on_error: Callable[[str, Exception], None] | None = None,
             dataset: ImageDataset | None = None) -> dict[str, float]:
    """Every number ``vaezoo eval`` reports for ``card`` on its dataset's test split.

    Args:
        model: the model ``card`` describes, with its weights.
        card: gives the dataset (``train.data``), the step the run ended at and the metrics to compute.
        data_root: where the dataset lives (see :func:`vaezoo.data.data_root`).
        device: where to run (``"auto"`` too: :func:`vaezoo.devices.usable_device`).
        batch_size: images per encoder pass of the metrics, which encode without decoding (the losses use the
            recipe's batch size; their pass is also the metrics' encoding of every image, so that the image is not
            encoded again). Every metric is handed one :class:`~vaezoo.metrics.evaluation.Evaluation`, which keeps
            what they share.
        metrics: compute these registered metrics only (not the losses); default: the losses and the card's
            ``eval_metrics``. Each runs with its settings updated with the card's ``eval_settings`` of it.
        on_error: when given, a metric that raises as it is measured is left out of the results and
            ``on_error(name, exception)`` is called instead, so that the other metrics are still measured (a metric
            unknown or that the model cannot serve is refused all the same, before any data is read).
        dataset: the card's test split, already read (:func:`vaezoo.assemble.card_dataset`; several runs of one
            dataset read it once); default: read it.

    Returns:
        :func:`losses` and each of the card's ``eval_metrics`` (metrics are a registry plugins extend), or the
        ``metrics`` asked for.

    Raises:
        UnknownNameError, MetricError: a metric unknown or that the model cannot serve (:func:`check_metrics`,
            before any data is read), or, without ``on_error``, one that raised (naming it and its plugin).
    """
    names = list(metrics) if metrics is not None else card.eval_metrics
    # an unknown or unservable metric fails here, before any data is read; with on_error, as vaezoo eval names it
    check_metrics(model, card, names if on_error is None else metrics)
    with GENERATORS:  # seeded draws from torch's global generators: one evaluation or run at a time in the process
        dataset = card_dataset(card, data_root, "test") if dataset is None else dataset
        evaluation = Evaluation(model, dataset, device, batch_size)
        results: dict[str, float] = {}
        if metrics is None:
            encoding = EncodingBuilder()
            with progress(f"eval {card.name}: losses", len(evaluation.dataset)) as task, evaluation.reporting(task):
                results = losses(model, evaluation.images, card.train.steps, card.train.batch_size, evaluation.device,
                                 encoding.add)
            _share(encoding, evaluation)
        for name in names:
            try:
                with progress(f"eval {card.name}: {name}") as task, evaluation.reporting(task):
                    results[name] = metric(name).measure(evaluation, **card.settings_of(name))
            except Exception as exc:
                if on_error is None:
                    raise MetricError(failure(name, exc)) from exc
                on_error(name, exc)
        return results


def failure(name: str, exc: Exception) -> str:
    """One line saying that metric ``name`` raised ``exc``, naming the plugin that registered it."""
    plugin = registry("metric").plugin_of(name)
    return f"metric '{name}' of plugin '{plugin}' failed: {type(exc).__name__}" + (f": {exc}" if str(exc) else "")


def why_not_finite(name: str, value: float, registered: bool) -> str:
    """One line saying that the result ``name`` is ``value``, not a finite number, and why: a registered metric's
    spec says when it gives one (its ``not_finite``), or the line names its plugin as saying nothing of it; a loss
    (``registered`` False) is not finite for some test image."""
    shown = "NaN" if math.isnan(value) else f"{value:g}"
    if not registered:
        why = "the loss of some test image is not finite"
    elif metric(name).not_finite:
        why = metric(name).not_finite
    else:
        why = f"metric '{name}' of plugin '{registry('metric').plugin_of(name)}' does not say when it gives one"
    return f"{name} is {shown}, not a finite number: {why}"


def check_metrics(model: VAE, card: Card, metrics: Sequence[str] | None = None) -> None:
    """Refuse, before any data is read, a metric that ``model`` cannot serve or the card sets wrongly.

    The card's ``eval_settings`` of each metric must be settings the metric takes, of the types it states. Each
    metric states what it needs (:mod:`vaezoo.metrics.requirements`: ground-truth factors, a location-scale
    posterior, densities, a normalised likelihood); this matches those needs against the model and the facts
    of the card's test split, through the latent protocol only. Training calls it at step 0, so that a run
    never learns at the end that its card asks for a metric its model cannot give.

    Args:
        model: the model ``card`` describes (built; its weights do not matter).
        card: gives the dataset and, by default, the metrics (``eval_metrics``).
        metrics: check these registered metrics instead of the card's.

    Raises:
        UnknownNameError: a metric is not registered.
        MetricError: one line naming each metric the model cannot serve and what is missing, or the first
            entry of the card's ``eval_settings`` that names no registered metric or a setting it does not take.
    """
    names = list(card.eval_metrics if metrics is None else metrics)
    specs = {name: metric(name) if metrics is not None else card_metric(card, name)  # an unknown name fails first
             for name in names}
    for name, settings in card.eval_settings.items():  # a misspelt name would leave its metric at its defaults
        try:
            metric(name).check_settings(settings, f"metric '{name}'")
        except (ValueError, UnknownNameError) as exc:
            raise MetricError(f"card '{card.name}': eval_settings: {exc}") from None
    if not any(spec.needs for spec in specs.values()):
        return
    info = data_info(card, "test")
    refused = [f"metric '{name}' {reason}" for name, spec in specs.items()
               for reason in unmet(spec.needs, model, info)]
    if refused:
        if metrics is None:
            raise MetricError(f"card '{card.name}': " + ". ".join(refused)
                              + " (remove it from eval_metrics)")
        raise MetricError.about("card '{name}': {refused} (leave it out of {metrics})", name=card.name,
                                refused=". ".join(refused))


def _share(encoding: EncodingBuilder, evaluation: Evaluation) -> None:
    """Give the metrics the losses' pass as their encoding of every image, so that they encode none again."""
    try:
        evaluation.take_encoding(encoding.encoding())
    except VaezooError:
        pass  # continuous parts of mixed families: a metric that needs them encodes and says so itself
