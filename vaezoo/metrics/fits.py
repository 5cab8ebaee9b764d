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
    return float(np.mean(aucs)) if aucs else float("nan")  # no class to rank on these test points


def sap_row(train_code: np.ndarray, train_factors: np.ndarray, test_code: np.ndarray, test_factors: np.ndarray,
            random_state: int) -> np.ndarray:
    """SAP's row for one code dimension: for each factor (a column of ``train_factors``), the test accuracy of a
    linear SVM predicting it from that dimension alone (``train_code``, ``test_code``: ``(n, 1)``)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    from vaezoo.errors import ignoring

    scores = np.zeros(train_factors.shape[1])
    # disentanglement_lib ran the same solver with the same iteration limit, warnings and all
    with ignoring(ConvergenceWarning):
        for k in range(train_factors.shape[1]):
            svm = LinearSVC(C=0.01, class_weight="balanced", dual=True, random_state=random_state)
            svm.fit(train_code, train_factors[:, k])
            scores[k] = np.mean(svm.predict(test_code) == test_factors[:, k])
    return scores
