"""Evaluation metrics: ``metric(model, dataset, device=None, batch_size=EVAL_BATCH_SIZE) -> float``.

Metrics are a registry (``vaezoo_register_metrics``); a card lists those ``vaezoo eval``
computes in ``eval_metrics``. The core registers the disentanglement metrics, which
need a dataset with ground-truth ``factors``:

- ``mig_chen`` and ``mig_dlib``: the two published variants of the mutual information gap
  (:mod:`vaezoo.metrics.mig`);
- ``total_correlation``: the total correlation of the aggregate posterior
  (:mod:`vaezoo.metrics.entropy`).

Each also exists as a pure function of arrays (codes or posterior parameters, and factors).
"""
