"""The metrics' faster paths give the numbers of the straightforward ones: Chen's entropy estimator vectorised
over dimensions against its formula computed directly in float64; the per-factor scikit-learn fits the same for
any number of worker processes; and loading a model imports neither scipy nor scikit-learn."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from torch.distributions import Normal

from vaezoo.metrics import dci, entropy, modularity, parallel, sap


def reference_entropies(mean, logvar, factors, samples, seed):
    """Chen et al.'s estimator, term by term in float64: the draw of :func:`entropy.estimate_entropies`, then
    -mean_s log (1/N) sum_n q(z_s | x_n) for each dimension, for each factor's images sharing the sample's value,
    and for the whole code."""
    mean, logvar = mean.double(), logvar.double()
    n, dims = mean.shape
    generator = torch.Generator().manual_seed(seed)
    picked = torch.randperm(n, generator=generator)[:samples]
    std = torch.exp(0.5 * logvar)
    z = mean[picked] + std[picked] * torch.randn(len(picked), dims, generator=generator, dtype=torch.float64)
    log_q = Normal(mean[None], std[None]).log_prob(z[:, None])  # (samples, N, D)
    marginal = -(torch.logsumexp(log_q, 1) - math.log(n)).mean(0)
    joint = -(torch.logsumexp(log_q.sum(-1), 1) - math.log(n)).mean()
    conditional = []
    for k in range(factors.shape[1]):
        same = factors[picked, k][:, None] == factors[None, :, k]  # (samples, N)
        masked = log_q.masked_fill(~same[..., None], -math.inf)
        conditional.append(-(torch.logsumexp(masked, 1) - same.sum(1, keepdim=True).double().log()).mean(0))
    return marginal, torch.stack(conditional), float(joint)


@pytest.mark.parametrize("use_grid", [True, False])
@pytest.mark.parametrize("log_std", [-1.0, -4.0])  # -4: most exponents far below float32 exp's normal range
def test_vectorised_estimator_equals_the_formula(use_grid, log_std):
    torch.manual_seed(3)
    sizes = (3, 4, 8, 8)
    factors = torch.tensor(np.stack(np.meshgrid(*map(np.arange, sizes), indexing="ij"), -1).reshape(-1, len(sizes)))
    factors = torch.cat([factors, factors])  # two images of each combination
    n, dims = len(factors), 5
    mean = torch.randn(n, dims) + 0.3 * factors[:, :1].float()
    logvar = 2 * (log_std + 0.5 * torch.randn(n, dims))
    got = entropy.estimate_entropies(mean, logvar, factors, samples=300, seed=7, use_grid=use_grid)
    marginal, conditional, joint = reference_entropies(mean, logvar, factors, 300, 7)
    assert torch.allclose(got.marginal, marginal, rtol=0, atol=1e-6)
    assert torch.allclose(got.conditional, conditional, rtol=0, atol=1e-6)
    assert got.joint == pytest.approx(joint, abs=1e-6)


def small_problem(seed=0, n=400, dims=4):
    rng = np.random.default_rng(seed)
    factors = np.stack([rng.integers(0, 3, n), rng.integers(0, 5, n), rng.integers(0, 4, n)], 1)
    codes = factors @ rng.normal(size=(3, dims)) + 0.5 * rng.normal(size=(n, dims))
    half = n // 2
    return codes[:half], factors[:half], codes[half:], factors[half:]


def test_fits_are_the_same_for_any_number_of_jobs():
    problem = small_problem()
    alone = [dci.importance_gbt(*problem, random_state=5), modularity.explicitness_of(*problem, random_state=5)]
    for count in (2, 3):
        with parallel.jobs(count):
            assert parallel.get_jobs() == count
            importance, train, test = dci.importance_gbt(*problem, random_state=5)
            explicitness = modularity.explicitness_of(*problem, random_state=5)
        np.testing.assert_array_equal(importance, alone[0][0])
        assert (train, test, explicitness) == (alone[0][1], alone[0][2], alone[1])


def test_sap_s_fits_in_worker_processes_are_the_svms_fitted_one_by_one():
    from sklearn.svm import LinearSVC

    train_codes, train_factors, test_codes, test_factors = small_problem(n=600)
    expected = np.array([[np.mean(LinearSVC(C=0.01, class_weight="balanced", dual=True, random_state=7)
                                  .fit(train_codes[:, j:j + 1], train_factors[:, k])
                                  .predict(test_codes[:, j:j + 1]) == test_factors[:, k])
                          for k in range(train_factors.shape[1])] for j in range(train_codes.shape[1])])
    for count in (1, 2):
        with parallel.jobs(count):
            np.testing.assert_array_equal(sap.sap_matrix(train_codes, train_factors, test_codes, test_factors, 7),
                                          expected)


def test_jobs_default_to_the_cores_the_process_may_use(monkeypatch):
    monkeypatch.delenv(parallel.JOBS_VARIABLE, raising=False)
    assert parallel.get_jobs() == parallel.default_jobs() >= 1
    monkeypatch.setenv(parallel.JOBS_VARIABLE, "3")
    assert parallel.get_jobs() == 3
    for wrong in ("abc", "0", "-1", "1.5"):  # not silently the default
        monkeypatch.setenv(parallel.JOBS_VARIABLE, wrong)
        with pytest.raises(ValueError, match=f"^VAEZOO_JOBS='{wrong}' is not a whole number of processes >= 1; "):
            parallel.get_jobs()
    for wrong in (0, -1, 2.5, "2", True):  # "2" was Python's "'<' not supported", 2.5 the pool's words, True 1
        with pytest.raises(ValueError, match=rf"^jobs takes a whole number of processes >= 1, e.g. 2, or None for the "
                                             rf"default, got {re.escape(repr(wrong))}$"):
            parallel.set_jobs(wrong)
    with parallel.jobs(np.int64(2)):  # a whole number from numpy, as before the check
        assert parallel.get_jobs() == 2 and type(parallel.get_jobs()) is int


def test_loading_a_model_imports_neither_scipy_nor_sklearn():
    probe = ("import json, sys, vaezoo; vaezoo.load('betatcvae-dsprites'); "
             "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'sklearn'})))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == []


@pytest.fixture
def started(monkeypatch) -> list[int]:
    """The worker counts of the pools of fit workers started during the test, in order."""
    counts = []

    class Counted(parallel.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            counts.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", Counted)
    return counts


def test_a_worker_pool_block_starts_the_fits_processes_once_and_changes_no_score(started):
    problem = small_problem()
    with parallel.jobs(2):
        alone = [dci.importance_gbt(*problem, random_state=5), modularity.explicitness_of(*problem, random_state=5)]
        assert started == [2, 2]  # a pool for each call
        with parallel.worker_pool(), parallel.worker_pool():  # an inner block is the outer one's
            kept = [dci.importance_gbt(*problem, random_state=5), modularity.explicitness_of(*problem, random_state=5)]
        assert started == [2, 2, 2]
    np.testing.assert_array_equal(kept[0][0], alone[0][0])
    assert (kept[0][1:], kept[1]) == (alone[0][1:], alone[1])
    assert parallel._here.pool is None  # stopped at the block's end


def overlapping(block, during=lambda: None, after=lambda: None) -> None:
    """Run the context manager ``block()`` in two threads, the second entering while the first is in it and staying
    after the first has left: ``during()`` runs in the second's block while both are in theirs, ``after()`` once
    the first has left."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with block():
            first_in.set()
            assert second_in.wait(WAIT)
        first_out.set()

    def second():
        assert first_in.wait(WAIT)
        with block():
            during()
            second_in.set()
            assert first_out.wait(WAIT)
            after()

    in_two_threads(first, second)


def in_two_threads(first, second):
    """Run ``first`` and ``second`` each on a thread of its own; re-raise what either raised."""
    errors = []

    def guarded(work):
        try:
            work()
        except BaseException as exc:  # handed to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(work,)) for work in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a thread is still waiting"
    if errors:
        raise errors[0]


WAIT = 30  # seconds an event is waited for before the test fails rather than hangs


def test_jobs_blocks_of_two_threads_each_count_their_own_and_leave_the_setting_as_it_was(monkeypatch):
    """A thread's block set the count of every thread, and the blocks ending in the order they started left the
    second's 'before' (2) as the process's setting: every later evaluation used 2 workers."""
    monkeypatch.delenv(parallel.JOBS_VARIABLE, raising=False)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with parallel.jobs(2):
            first_in.set()
            assert second_in.wait(WAIT)
            seen["first"] = parallel.get_jobs()
        first_out.set()

    def second():
        assert first_in.wait(WAIT)
        with parallel.jobs(3):
            second_in.set()
            assert first_out.wait(WAIT)
            seen["second"] = parallel.get_jobs()

    in_two_threads(first, second)
    assert seen == {"first": 2, "second": 3}
    assert parallel.get_jobs() == parallel.default_jobs()


def test_a_threads_worker_pool_block_ending_leaves_another_threads_pool_running(started):
    """The first thread's block owned the one pool of the process: its end stopped the pool the other thread was
    fitting on (its waiting fits cancelled), and that thread's next call started a pool of its own."""
    def fit_while_both_are_in():
        assert parallel.process_map(abs, [(-1,), (-2,)], jobs=2) == [1, 2]

    def fit_once_the_first_has_left():
        assert parallel.process_map(abs, [(-3,), (-4,)], jobs=2) == [3, 4]

    overlapping(parallel.worker_pool, during=fit_while_both_are_in, after=fit_once_the_first_has_left)
    assert started == [2]


def test_the_script_stays_left_out_until_the_last_threads_workers_have_started():
    """The first thread to end its block gave ``__main__`` its file back while another thread's workers were
    starting, and they ran the user's script (one without ``if __name__ == "__main__":``) again."""
    main = sys.modules["__main__"]
    had = main.__dict__.get("__file__")
    main.__file__ = "script.py"
    seen = {}
    try:
        overlapping(lambda: parallel._script_left_out, after=lambda: seen.update(inside=main.__dict__.get("__file__")))
        assert seen == {"inside": None}
        assert main.__file__ == "script.py"
    finally:
        if had is None:
            main.__dict__.pop("__file__", None)
        else:
            main.__file__ = had


def _conv_model_and_images():
    """A convolutional VAE of 3 Gaussian dimensions, in eval mode, and 300 random 64x64 images."""
    from vaezoo.assemble import build_part
    from vaezoo.data import ImageDataset

    torch.manual_seed(0)
    model = build_part("architecture", {"type": "vae", "image_size": 64, "channels": 1,
                                        "latent": {"type": "gaussian", "dim": 3}}).eval()
    return model, ImageDataset(torch.randint(0, 256, (300, 1, 64, 64), dtype=torch.uint8,
                                             generator=torch.Generator().manual_seed(0)))


def test_a_codes_only_encoding_on_the_cpu_encodes_slices_on_the_threads_and_gives_a_plain_encodings_codes(
        monkeypatch):
    """On a CPU the encoder takes CPU_SLICE images at a time after the first batch, the slices side by side on
    torch's threads (one batch of 1,024 on two threads spent most of the cores' time in OpenMP's waits); the codes,
    the posteriors and the table of mean codes are a plain encoding's, bit for bit."""
    from vaezoo.metrics import parallel
    from vaezoo.metrics.codes import CPU_SLICE, encode_all, mean_codes

    pools, pool = [], parallel.ThreadPoolExecutor
    monkeypatch.setattr(parallel, "ThreadPoolExecutor", lambda n, **named: pools.append(n) or pool(n, **named))
    model, images = _conv_model_and_images()
    with torch.no_grad():
        plain = [model.encode(x) for _, x in images.batches(300, torch.device("cpu"))][0]
    real, calls = model.encode, []
    model.encode = lambda x: calls.append((len(x), threading.get_ident())) or real(x)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        encoding = encode_all(model, images, "cpu", batch_size=128)
        drawn = torch.tensor([299, 0, 150, 7] * 40)
        codes = mean_codes(model, images, drawn, "cpu", batch_size=1024)
    finally:
        torch.set_num_threads(before)
    sizes = [n for n, _ in calls]  # the first batch whole, then slices, then those of the drawn codes
    assert sizes[0] == 128 and max(sizes[1:]) == CPU_SLICE and sum(sizes) == 300 + 160
    # each pass's slices on a pool of torch's two threads (which of them takes a slice is the scheduler's choice)
    assert pools == [2, 2] and threading.get_ident() not in {thread for _, thread in calls[1:]}
    assert torch.get_num_threads() == before
    assert torch.equal(encoding.modes, plain.mode)
    assert torch.equal(encoding.posteriors.scale, plain.location_scale().scale)
    assert torch.equal(codes, plain.mode[drawn])


def test_parallel_imap_reads_its_items_as_the_work_goes_and_yields_in_order():
    """A generator of batches is read at most two items a thread ahead of the result yielded, never whole."""
    read = []

    def items():
        for i in range(50):
            read.append(i)
            yield i

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        results = parallel.parallel_imap(lambda i: (i, torch.get_num_threads()), items())
        first = next(results)
        ahead = len(read)
        rest = list(results)
    finally:
        torch.set_num_threads(before)
    assert first == (0, 1) and ahead <= 4  # two threads, two items each
    assert [i for i, _ in [first, *rest]] == list(range(50)) and {n for _, n in rest} == {1}
    assert torch.get_num_threads() == before


def test_parallel_imap_leaves_the_callers_thread_count_as_it_was_between_items_and_after_an_early_stop():
    """Only the work on the pool's threads runs on one torch thread each: the caller's own torch work between items
    and everything after a consumer stops early (a break, a metric raising mid-way, a generator left suspended) run
    on the threads they had (they ran on one while the generator was suspended). A thread the caller starts while a
    worker is inside an item starts on one thread (docs/known-limits.md), so it is not asserted here: whether a
    worker still is depends on the scheduler."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        results = parallel.parallel_imap(lambda i: torch.get_num_threads(), range(20))
        for inside in results:
            seen.append((inside, torch.get_num_threads()))
            if len(seen) == 3:
                break  # left suspended, not closed
        suspended = torch.get_num_threads()
        results.close()

        def fails(i):
            if i == 5:
                raise ValueError("mid-way")
            return i

        with pytest.raises(ValueError, match="mid-way"):
            for _ in parallel.parallel_imap(fails, range(20)):
                pass
        after_error = torch.get_num_threads()
        with pytest.raises(KeyError):  # the consumer's own error
            for _ in parallel.parallel_imap(lambda i: i, range(20)):
                raise KeyError
        after_consumer_error = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert seen == [(1, 2)] * 3
    assert suspended == 2
    assert after_error == 2 and after_consumer_error == 2


def test_posteriors_kept_whole_stay_in_the_batches_asked_for_and_their_entropies_are_a_plain_encodings(monkeypatch):
    """A family reached only through log_density_matrix (no location_scale) keeps each batch's posterior whole: the
    estimator sums over those batches, so slices of CPU_SLICE changed its entropies' rounding and made it slower."""
    from vaezoo.latents.gaussian import GaussianPosterior
    from vaezoo.metrics.codes import encode_all
    from vaezoo.metrics.entropy import estimate_entropies_from_posteriors

    monkeypatch.setattr(GaussianPosterior, "location_scale", lambda self: None)
    model, images = _conv_model_and_images()
    with torch.no_grad():
        plain = [dict(model.encode(x).parts) for _, x in images.batches(128, torch.device("cpu"))]
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        encoding = encode_all(model, images, "cpu", batch_size=128)
    finally:
        torch.set_num_threads(before)
    assert [len(batch["z"].mode) for batch in encoding.batches] == [128, 128, 44]
    factors = torch.arange(300)[:, None] % 3
    kept, expected = (estimate_entropies_from_posteriors(batches, factors, 200, 0)
                      for batches in (encoding.batches, plain))
    assert torch.equal(kept.marginal, expected.marginal) and kept.joint == expected.joint
