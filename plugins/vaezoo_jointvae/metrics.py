"""Unsupervised accuracy of a latent's categorical part (matched to labels or to a factor), and the matching."""

from __future__ import annotations

import numpy as np
import torch
from torch.distributions import Categorical

from vaezoo.context import layout_text
from vaezoo.errors import MetricError, VaezooError
from vaezoo.metrics.codes import dataset_factors, finite_codes
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.requirements import Requirement
from vaezoo.metrics.spec import metric_spec


def contingency(predicted: np.ndarray, labels: np.ndarray, size: int | None = None) -> np.ndarray:
    """Square table of counts: row = predicted cluster, column = label.

    Args:
        predicted, labels: one cluster and one label per example.
        size: rows and columns; default the largest cluster or label + 1.
    """
    size = size or int(max(predicted.max(), labels.max())) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (predicted, labels), 1)
    return counts


def match_categories(predicted: np.ndarray, labels: np.ndarray, categories: int | None = None) -> np.ndarray:
    """The label each category stands for: the one-to-one matching that agrees with most labels (Hungarian).

    Args:
        predicted: the category of each example.
        labels: its label, a whole number of at least 0 (:func:`checked_labels`); any such numbers, not only
            ``0..k-1``.
        categories: the number of categories; default the largest predicted + 1.

    Returns:
        ``(categories,)`` int64: the label of category ``i`` at ``i``, -1 for a category left without one
        (more categories than labels).
    """
    from scipy.optimize import linear_sum_assignment  # here: loading a model must not import scipy (~0.5 s)

    categories = categories or int(predicted.max()) + 1
    # the table has a row per label there is, not per number up to the largest (ids of 10^7 asked for petabytes)
    values, classes = np.unique(labels, return_inverse=True)
    size = max(categories, len(values))
    rows, cols = linear_sum_assignment(contingency(predicted, classes.reshape(-1), size), maximize=True)
    matching = np.full(categories, -1, dtype=np.int64)
    kept = (rows < categories) & (cols < len(values))
    matching[rows[kept]] = values[cols[kept]]
    return matching


def checked_labels(labels, count: int, metric: str) -> np.ndarray:
    """``labels`` (a tensor or an array) as ``(count,)`` int64, refused in one line unless they are one whole number
    of at least 0 per image: float or bool labels failed inside numpy's indexing, labels of shape ``(N, 1)`` were
    scored as a wrong number, and -1 (a split's "no label") was counted as the largest label.

    Args:
        labels: a dataset's ``labels``.
        count: the images of the dataset.
        metric: names the metric (or the command) in the error.
    """
    values = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
    if values.shape != (count,):
        raise VaezooError(f"{metric} needs one label per image ({count:,}); the dataset's labels have shape "
                          f"{values.shape}")
    if values.dtype.kind not in "iu":
        raise VaezooError(f"{metric} needs whole-number labels (an integer tensor), got {values.dtype} labels; "
                          f"give class numbers, e.g. labels.long()")
    if count and (low := values.min()) < 0:
        raise VaezooError(f"{metric} needs labels of at least 0, got {int(low)} for {int((values < 0).sum()):,} "
                          f"images; leave the images without a label out of the dataset")
    return values.astype(np.int64)


def matched_accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy after matching predicted clusters to labels one-to-one (:func:`match_categories`)."""
    return float(np.mean(match_categories(predicted, labels)[predicted] == labels))


def categorical_parts(model) -> list[str]:
    """Names of the latent's parts whose prior is a categorical distribution, in code order: a JointVAE's
    ``discrete0, ...``, and those of any family (a plugin's included) that declares such a prior."""
    latent = getattr(model, "latent", None)
    parts = latent.parts.items() if latent is not None else ()
    return [name for name, family in parts if isinstance(family.prior, Categorical)]


def _categorical_missing(model, info) -> str | None:
    return None if categorical_parts(model) else f"the latent {layout_text(model.latent.layout())} has none"


def _shape_missing(model, info) -> str | None:
    return None if "shape" in info.factor_names else (
        f"its dataset has factors {', '.join(info.factor_names)}" if info.factor_names else "its dataset has none")


CATEGORICAL_PART = Requirement("a latent part with a categorical prior (e.g. a JointVAE's)", _categorical_missing)
SHAPE_FACTOR = Requirement("a dataset with a 'shape' factor (e.g. dsprites)", _shape_missing)


def predicted_categories(evaluation: Evaluation, metric: str = "cluster_accuracy") -> np.ndarray:
    """The first categorical part's argmax for every image of ``evaluation``'s dataset.

    The codes come from the table the disentanglement metrics share (:attr:`Evaluation.codes`), so a card that
    lists these metrics encodes its images once.

    Args:
        evaluation: a VAE with a categorical latent part (:func:`categorical_parts`) on the images.
        metric: names the metric in the error a model without a categorical part gets.

    Returns:
        ``(N,)`` int64 categories.

    Raises:
        MetricError: a code is NaN or infinite (:func:`vaezoo.metrics.codes.finite_codes`).
    """
    model = evaluation.model
    parts = categorical_parts(model)
    if not parts:
        raise VaezooError(f"{metric} needs a model with a categorical latent part (e.g. a JointVAE)")
    codes = evaluation.codes[np.arange(len(evaluation.dataset))]
    return finite_codes(codes[:, model.part_slices[parts[0]]]).argmax(1)  # NaN codes: refused, not category 0


def matching_of(model, dataset, device=None):
    """The category -> label matching of ``model`` (a JointVAE) on the labelled ``dataset``, encoded on ``device``
    (``"auto"`` too: :func:`vaezoo.devices.usable_device`).

    Returns:
        ``(part, matching, accuracy)``: the first categorical part's name, ``(k,)`` labels (-1: none) and the
        fraction of images whose matched category is their label.
    """
    labels = checked_labels(dataset.labels, len(dataset), "the category -> label matching")
    predicted = predicted_categories(Evaluation(model, dataset, device))
    part = model.discrete_parts[0]
    matching = match_categories(predicted, labels, model.part_slices[part].stop - model.part_slices[part].start)
    return part, matching, float(np.mean(matching[predicted] == labels))


@metric_spec(needs=(CATEGORICAL_PART,))
def cluster_accuracy(evaluation: Evaluation) -> float:
    """Accuracy of the first categorical part's argmax, its categories matched to the labels (e.g. digits)."""
    labels = evaluation.dataset.labels
    if labels is None:
        raise VaezooError("cluster_accuracy needs a labelled dataset (e.g. mnist)")
    labels = checked_labels(labels, len(evaluation.dataset), "cluster_accuracy")  # before the encoding
    return matched_accuracy(predicted_categories(evaluation), labels)


def factor_accuracy(evaluation: Evaluation, factor: str, metric: str = "factor_accuracy") -> float:
    """Accuracy of the first categorical part's argmax, its categories matched to a ground-truth factor's values.

    Args:
        evaluation: a VAE with a categorical latent part (:func:`categorical_parts`) on images with ground-truth
            ``factors``; all of them are scored.
        factor: one of the dataset's ``factor_names``.
        metric: names the metric in errors.
    """
    dataset = evaluation.dataset
    factors = dataset_factors(dataset, metric)  # one row per image, no NaN (a class of its own)
    if factors is None or factor not in dataset.factor_names:
        have = f"factors {', '.join(dataset.factor_names)}" if factors is not None and dataset.factor_names else (
            "no factors")
        raise VaezooError(f"{metric} needs a dataset with a '{factor}' factor (e.g. dsprites); this one has {have}")
    if len(dataset.factor_names) != factors.shape[1]:  # the column of the name would be another factor's
        raise MetricError(f"{metric}: the dataset names {len(dataset.factor_names)} factors "
                          f"({', '.join(dataset.factor_names)}) but holds {factors.shape[1]} per image")
    values = factors[:, dataset.factor_names.index(factor)].cpu().numpy()
    values = np.unique(values, return_inverse=True)[1]  # classes 0..k-1 whatever the dataset numbers them
    return matched_accuracy(predicted_categories(evaluation, metric), values)


@metric_spec(needs=(CATEGORICAL_PART, SHAPE_FACTOR))
def shape_accuracy(evaluation: Evaluation) -> float:
    """:func:`factor_accuracy` on the ``shape`` factor: how well the categorical tells dSprites' three shapes."""
    return factor_accuracy(evaluation, "shape", metric="shape_accuracy")
