"""Evaluation metrics, each a :class:`~vaezoo.metrics.spec.MetricSpec`: its function, whether higher is better,
what it needs and its settings. ``vaezoo eval`` hands every metric of a card one
:class:`~vaezoo.metrics.evaluation.Evaluation` (``spec.measure(evaluation)``); alone, a spec is called as
``metric(model, dataset, device=None, batch_size=EVAL_BATCH_SIZE, **settings) -> float``.

Metrics are a registry (``vaezoo_register_metrics``); a card lists those ``vaezoo eval``
computes in ``eval_metrics``. The core registers the disentanglement metrics of Locatello et
al. (2019) as disentanglement_lib computes them (docs/metrics.md); all but the last two need a
dataset with ground-truth ``factors``:

- ``mig_chen`` and ``mig_dlib``: the two published variants of the mutual information gap
  (:mod:`vaezoo.metrics.mig`);
- ``total_correlation``: the total correlation of the aggregate posterior
  (:mod:`vaezoo.metrics.entropy`);
- ``betavae_score`` (:mod:`~vaezoo.metrics.betavae_score`), ``factorvae_score``
  (:mod:`~vaezoo.metrics.factorvae_score`), ``sap_score`` (:mod:`~vaezoo.metrics.sap`);
- ``dci_disentanglement``, ``dci_completeness``, ``dci_informativeness`` (:mod:`~vaezoo.metrics.dci`);
- ``modularity`` and ``explicitness`` (:mod:`~vaezoo.metrics.modularity`);
- ``gaussian_total_correlation`` and ``mutual_info_score`` of the mean codes
  (:mod:`~vaezoo.metrics.unsupervised`).

Each also exists as a pure function of arrays (codes or posterior parameters, and factors). The
settings a metric takes (points, bins, seed, ...) are recorded on the card
(:mod:`~vaezoo.metrics.provenance`).
"""
