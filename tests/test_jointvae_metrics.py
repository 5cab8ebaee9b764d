"""Known answers for the clustering metric of the JointVAE plugin."""

import numpy as np
import pytest

from vaezoo_jointvae.metrics import contingency, matched_accuracy


def test_contingency_counts_clusters_against_labels():
    predicted = np.array([2, 2, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 2, 2, 0])
    assert contingency(predicted, labels).tolist() == [[0, 1, 0], [1, 0, 2], [2, 0, 0]]


def test_matched_accuracy_matches_each_cluster_to_one_label():
    predicted = np.array([2, 2, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 2, 2, 0])
    assert matched_accuracy(predicted, labels) == pytest.approx(5 / 6)
