"""Unsupervised accuracy of a JointVAE's discrete code."""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from vaezoo.data import EVAL_BATCH_SIZE, ImageDataset
from vaezoo.errors import VaezooError


def contingency(predicted: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Square table of counts: row = predicted cluster, column = label."""
    size = int(max(predicted.max(), labels.max())) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (predicted, labels), 1)
    return counts


def matched_accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy after matching predicted clusters to labels one-to-one (Hungarian matching)."""
    counts = contingency(predicted, labels)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / len(labels))


@torch.no_grad()
def predicted_categories(model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE) -> np.ndarray:
    """The first categorical part's argmax for every image of ``dataset``."""
    if not getattr(model, "discrete_parts", None):
        raise VaezooError("cluster_accuracy needs a model with a categorical latent part")
    return torch.cat([model.predict_category(x)[:, 0].cpu() for _, x in dataset.batches(batch_size, device)]).numpy()


def cluster_accuracy(model, dataset: ImageDataset, device=None, batch_size: int = EVAL_BATCH_SIZE) -> float:
    """Accuracy of the first categorical part's argmax, its categories matched to the labels."""
    if dataset.labels is None:
        raise VaezooError("cluster_accuracy needs a labelled dataset")
    return matched_accuracy(predicted_categories(model, dataset, device, batch_size), dataset.labels.numpy())
