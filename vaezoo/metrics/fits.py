"""The scikit-learn fits that metrics run in worker processes (:func:`vaezoo.metrics.parallel.process_map`), one
per factor: numpy and scikit-learn only, so that a worker starts without importing torch."""

from __future__ import annotations

import numpy as np


def gbt_fit(train_codes: np.ndarray, train_labels: np.ndarray, test_codes: np.ndarray, test_labels: np.ndarray,
            random_state: int) -> tuple[np.ndarray, float, float]:
    """DCI's gradient-boosted trees for one factor: its importances and its train and test accuracies."""
    from sklearn.ensemble import GradientBoostingClassifier

    model = GradientBoostingClassifier(random_state=random_state).fit(train_codes, train_labels)
    return (np.abs(model.feature_importances_), float(np.mean(model.predict(train_codes) == train_labels)),
            float(np.mean(model.predict(test_codes) == test_labels)))


def explicitness_auc(train_codes: np.ndarray, train_labels: np.ndarray, test_codes: np.ndarray,
                     test_labels: np.ndarray, random_state: int) -> float:
    """Explicitness for one factor: a one-vs-rest logistic regression's mean test AUC over its classes."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.multiclass import OneVsRestClassifier

    classifier = OneVsRestClassifier(LogisticRegression(solver="liblinear", random_state=random_state))
    probabilities = classifier.fit(train_codes, train_labels).predict_proba(test_codes)
    aucs = [roc_auc_score(test_labels == label, probabilities[:, c])
            for c, label in enumerate(classifier.classes_)
            if 0 < np.sum(test_labels == label) < len(test_labels)]
    return float(np.mean(aucs))
