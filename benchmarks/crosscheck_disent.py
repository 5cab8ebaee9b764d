"""Cross-check vaezoo's disentanglement metrics against the ``disent`` package on the same codes.

The mean codes of all 737,280 dSprites images under a zoo entry (saved once to ``--codes-dir``)
are scored three ways for each metric disent implements:

- vaezoo: the metric's pure function with its defaults and seed 0, as ``vaezoo eval`` computes it;
- disent, same points: disent's own computation (``disent.metrics._<metric>._compute_*``) on the
  very train/test points vaezoo drew, which isolates the implementations from the sampling;
- disent, own run: disent's metric end to end (its sampling, its defaults), ``np.random.seed(0)``,
  reading the same codes through a ``representation_function`` that looks them up.

disent is never a vaezoo dependency: run this in an environment of its own,

    python3 -m venv /work/venv-disent
    /work/venv-disent/bin/pip install torch==2.14.1 disent
    /work/venv-disent/bin/pip install -e .
    OMP_NUM_THREADS=1 /work/venv-disent/bin/python benchmarks/crosscheck_disent.py --card betatcvae-dsprites
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np


def dataset_codes(card_name: str, directory: Path) -> tuple[np.ndarray, np.ndarray]:
    """The mean codes ``(737280, D)`` of every dSprites image in grid order, and the grid's factor classes."""
    from vaezoo.assemble import load_model
    from vaezoo.entries.catalog import get_card
    from vaezoo.data.dsprites import GRID_SIZE, dsprites, factor_classes
    from vaezoo.metrics.sampling import code_table

    path = directory / f"vaezoo-codes-{card_name}.npy"
    if not path.exists():
        data, model = dsprites(), load_model(get_card(card_name))
        codes = code_table(model, data)[np.arange(GRID_SIZE)]
        np.save(path, codes)
    return np.load(path), factor_classes()


def disent_dataset(codes: np.ndarray, factors: np.ndarray):
    """A disent dataset whose observation at grid position i is code i, and its representation function."""
    from disent.dataset import DisentDataset
    from disent.dataset.data import ArrayGroundTruthData

    from vaezoo.data.dsprites import FACTOR_NAMES, FACTOR_SIZES

    assert (np.ravel_multi_index(factors.T, FACTOR_SIZES) == np.arange(len(factors))).all()  # disent's pos_to_idx
    data = ArrayGroundTruthData(codes[:, None, None, :], FACTOR_NAMES, FACTOR_SIZES, array_chn_is_last=True)
    return DisentDataset(data), lambda x: x.reshape(len(x), -1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card", default="betatcvae-dsprites", help="a dSprites zoo entry")
    parser.add_argument("--codes-dir", type=Path, default=Path("/tmp"), help="where the codes are saved (default /tmp)")
    args = parser.parse_args()

    from disent.metrics import (_dci, _mig, _sap, _unsupervised, metric_dci, metric_factor_vae, metric_mig, metric_sap,
                                metric_unsupervised)
    from disent.metrics.utils import discrete_mutual_info, histogram_discretize

    from vaezoo.metrics import dci, factorvae_score, sap, unsupervised
    from vaezoo.metrics.mig import dlib_mig_gaps
    from vaezoo.metrics.sampling import draw, sklearn_seed

    warnings.filterwarnings("ignore")  # LinearSVC's convergence warnings, in disent's runs too
    codes, factors = dataset_codes(args.card, args.codes_dir)
    dataset, represent = disent_dataset(codes, factors)

    def cell(value) -> str:
        return f"{value:10.4f}" if value is not None else f"{'-':>10}"

    def row(name, ours, same, theirs, seconds):
        print(f"{name:30} {cell(ours)} {cell(same)} {cell(theirs)}   {seconds:6.0f} s", flush=True)

    def disent_run(metric, **kwargs):
        np.random.seed(0)
        return metric(dataset, represent, **kwargs)

    print(f"{args.card}: codes {codes.shape}")
    print(f"{'metric':30} {'vaezoo':>10} {'disent/same':>10} {'disent/own':>10}")

    start = time.perf_counter()
    rng = np.random.default_rng(0)
    index = rng.integers(0, len(codes), 10_000)  # as vaezoo's mig_dlib draws
    ours = float(dlib_mig_gaps(codes[index], factors[index]).mean())
    same = _mig._compute_mig(codes[index].T.astype(np.float64), factors[index].T)["mig.discrete_score"]
    row("mig_dlib", ours, same, disent_run(metric_mig)["mig.discrete_score"], time.perf_counter() - start)

    start = time.perf_counter()
    ours = factorvae_score.factorvae_score_from_codes(codes, factors, np.random.default_rng(0))
    unpruned = factorvae_score.factorvae_score_from_codes(codes, factors, np.random.default_rng(0), prune_std=0.0)
    theirs = disent_run(metric_factor_vae)["factor_vae.eval_accuracy"]
    row("factorvae_score", ours, None, theirs, time.perf_counter() - start)
    row("factorvae_score prune_std=0", unpruned, None, theirs, 0)

    start = time.perf_counter()
    rng = np.random.default_rng(0)
    train, test = draw(codes, factors, rng, 10_000), draw(codes, factors, rng, 5_000)
    ours = sap.top_two_gap(sap.sap_matrix(*train, *test, random_state=sklearn_seed(rng)))
    same = _sap._compute_sap(train[0].T, train[1].T, test[0].T, test[1].T, False)["sap.score"]
    row("sap_score", ours, same, disent_run(metric_sap)["sap.score"], time.perf_counter() - start)

    start = time.perf_counter()
    ours = dci.dci_from_codes(codes, factors, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    train, test = draw(codes, factors, rng, 10_000), draw(codes, factors, rng, 5_000)
    np.random.seed(0)
    same = _dci._compute_dci(train[0].T, train[1].T, test[0].T, test[1].T)
    theirs = disent_run(metric_dci)
    seconds = time.perf_counter() - start
    row("dci_disentanglement", ours.disentanglement, same["dci.disentanglement"], theirs["dci.disentanglement"],
        seconds)
    row("dci_completeness", ours.completeness, same["dci.completeness"], theirs["dci.completeness"], 0)
    row("dci_informativeness", ours.informativeness, same["dci.informativeness_test"],
        theirs["dci.informativeness_test"], 0)

    start = time.perf_counter()
    sample = draw(codes, None, np.random.default_rng(0), 10_000)[0]
    theirs = disent_run(metric_unsupervised)
    binned = histogram_discretize(sample.T, num_bins=20)
    mutual = discrete_mutual_info(binned, binned)
    np.fill_diagonal(mutual, 0)
    dims = sample.shape[1]
    row("gaussian_total_correlation", unsupervised.gaussian_total_correlation_of(sample),
        _unsupervised._gaussian_total_correlation(np.cov(sample.T)), theirs["unsup.gauss_total_corr"],
        time.perf_counter() - start)
    row("mutual_info_score", unsupervised.mean_pairwise_mutual_information(sample),
        mutual.sum() / (dims**2 - dims), theirs["unsup.mi_score"], 0)
    for name in ("betavae_score", "modularity", "explicitness"):
        row(f"{name} (not in disent)", None, None, None, 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
