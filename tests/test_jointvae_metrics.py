"""Known answers for the clustering metric of the JointVAE plugin, and the command that writes its matching."""

import itertools
import shlex
import shutil
import subprocess
import sys
import tomllib

import numpy as np
import pytest
import torch
from vaezoo_jointvae.labels import main
from vaezoo_jointvae.sections import card_labels
from vaezoo_jointvae.metrics import contingency, match_categories, matched_accuracy

from vaezoo.entries.catalog import get_card
from vaezoo.entries.entry import write_card


def test_contingency_counts_clusters_against_labels():
    predicted = np.array([2, 2, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 2, 2, 0])
    assert contingency(predicted, labels).tolist() == [[0, 1, 0], [1, 0, 2], [2, 0, 0]]


def test_matched_accuracy_matches_each_cluster_to_one_label():
    predicted = np.array([2, 2, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 2, 2, 0])
    assert matched_accuracy(predicted, labels) == pytest.approx(5 / 6)


def test_each_category_is_matched_to_the_label_it_agrees_with_most():
    predicted = np.array([2, 2, 0, 1, 1, 1])
    labels = np.array([0, 0, 1, 2, 2, 0])
    assert match_categories(predicted, labels).tolist() == [1, 2, 0]


def test_categories_left_without_a_label_are_minus_one():
    predicted = np.array([0, 0, 1, 1, 2, 3])
    labels = np.array([0, 0, 1, 1, 0, 1])
    assert match_categories(predicted, labels, categories=5).tolist() == [0, 1, -1, -1, -1]
    assert match_categories(np.array([0, 0, 1]), np.array([2, 2, 1])).tolist() == [2, 1]


@pytest.mark.parametrize("seed", range(5))
def test_the_matching_is_the_best_one_to_one_assignment(seed):
    rng = np.random.default_rng(seed)
    predicted, labels = rng.integers(0, 4, 40), rng.integers(0, 4, 40)
    best = max(np.mean(np.array(perm)[predicted] == labels) for perm in itertools.permutations(range(4)))
    matching = match_categories(predicted, labels, categories=4)
    assert np.mean(matching[predicted] == labels) == pytest.approx(best)
    assert matched_accuracy(predicted, labels) == pytest.approx(best)


def test_the_labels_command_has_its_help_under_python_OO():
    """Its description was the module's docstring, which -OO strips: an AttributeError traceback."""
    result = subprocess.run([sys.executable, "-OO", "-m", "vaezoo_jointvae.labels", "--help"], capture_output=True,
                            text=True, timeout=120)
    assert (result.returncode, result.stderr) == (0, "")
    assert "Measure which dataset label each category of a JointVAE stands for" in " ".join(result.stdout.split())


def test_the_labels_command_writes_the_matching_that_the_zoo_card_holds(mnist_root, tmp_path, capsys):
    zoo = get_card("jointvae-original-mnist")
    card = tmp_path / "mine.toml"
    write_card(zoo.model_copy(update={"name": "mine", "sections": {}}), card)
    card.write_text("# my own notes on this card\n" + card.read_text())
    shutil.copy(zoo.path.parent / zoo.weights.file, tmp_path / zoo.weights.file)
    assert main([str(card), "--data-root", str(mnist_root)]) == 0
    assert "labels" not in tomllib.loads(card.read_text())  # without --write the card is left alone
    assert main([str(card), "--data-root", str(mnist_root), "--write"]) == 0
    out = capsys.readouterr().out
    assert f"accuracy on test {zoo.metrics['cluster_accuracy'].value:.4f}" in out
    written = get_card(card)
    assert card.read_text().startswith("# my own notes on this card\n")  # the card is updated, not rewritten
    assert card_labels(written)["discrete0"].category_to_label == card_labels(zoo)["discrete0"].category_to_label
    # "mine" is no zoo name: the command names the card by its path, so that it runs as written
    assert card_labels(written)["discrete0"].command == shlex.join(
        ["python", "-m", "vaezoo_jointvae.labels", str(card), "--data-root", str(mnist_root)])
    assert written.model_dump(exclude={"sections"}) == zoo.model_copy(update={"name": "mine"}).model_dump(
        exclude={"sections"})


def test_the_labels_command_reports_a_bad_card_in_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "missing.toml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_the_labels_command_stopped_by_ctrl_c_says_so_in_one_line_and_leaves_the_card(tmp_path, capsys,
                                                                                       monkeypatch):
    import vaezoo_jointvae.labels

    zoo = get_card("jointvae-original-mnist")
    card = tmp_path / "mine.toml"
    write_card(zoo.model_copy(update={"name": "mine", "sections": {}}), card)
    before = card.read_bytes()

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(vaezoo_jointvae.labels, "measure_matching", interrupted)
    assert main([str(card), "--write"]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"  # was a traceback
    assert card.read_bytes() == before


def _small_jointvae(seed: int = 0):
    import torch

    from vaezoo.assemble import build_part

    torch.manual_seed(seed)
    spec = {"type": "jointvae", "image_size": 64, "channels": 1, "continuous": 2, "discrete": [3]}
    return build_part("architecture", spec).eval()


def test_shape_accuracy_matches_the_categorical_argmax_to_dsprites_shapes():
    from vaezoo.assemble import load_dataset
    from vaezoo_jointvae.metrics import shape_accuracy

    data = load_dataset("dsprites", subset=500, subset_seed=3)
    model = _small_jointvae()
    predicted = model.predict_category(data.batch(slice(None)))[:, 0].numpy()
    shapes = data.factors[:, data.factor_names.index("shape")].numpy()
    assert shape_accuracy(model, data) == pytest.approx(matched_accuracy(predicted, shapes))
    assert shape_accuracy(model, data, batch_size=7) == shape_accuracy(model, data)


def test_shape_accuracy_scores_the_categorical_part_of_any_model():
    import torch

    from vaezoo.assemble import build_part, load_dataset
    from vaezoo_jointvae.metrics import categorical_parts, shape_accuracy

    torch.manual_seed(0)
    latent = {"type": "joint", "parts": [{"type": "gaussian", "name": "position", "dim": 2},
                                         {"type": "gumbel_categorical", "name": "kind", "categories": 3}]}
    model = build_part("architecture", {"type": "vae", "image_size": 64, "channels": 1, "latent": latent}).eval()
    assert categorical_parts(model) == ["kind"]
    data = load_dataset("dsprites", subset=300, subset_seed=1)
    predicted = model.encode(data.batch(slice(None))).parts["kind"].logits.argmax(-1).numpy()
    shapes = data.factors[:, data.factor_names.index("shape")].numpy()
    assert shape_accuracy(model, data) == pytest.approx(matched_accuracy(predicted, shapes))


def test_shape_accuracy_needs_a_shape_factor_and_a_categorical(mnist_root):
    from vaezoo.assemble import build_part, load_dataset
    from vaezoo.errors import VaezooError
    from vaezoo_jointvae.metrics import shape_accuracy

    digits = load_dataset("mnist", mnist_root, "test", image_size=64)  # the model's size: only the factors are missing
    with pytest.raises(VaezooError, match=r"^metric 'shape_accuracy' needs a dataset with a 'shape' factor .*; its "
                                          r"dataset has none"):
        shape_accuracy(_small_jointvae(), digits)
    with pytest.raises(VaezooError, match=r"^metric 'shape_accuracy' needs a latent part with a categorical prior "
                                          r".*; the latent gaussian\(2\) has none"):
        shape_accuracy(build_part("architecture", {"type": "jointvae", "image_size": 64, "channels": 1,
                                                   "continuous": 2, "discrete": []}),
                       load_dataset("dsprites", subset=10))


def test_labels_of_any_whole_numbers_are_matched_without_a_table_up_to_the_largest():
    big = 10**12  # a table up to the largest label asked for petabytes
    predicted, labels = np.array([0, 0, 1, 2]), np.array([big, big, 7, 7])
    assert match_categories(predicted, labels, categories=3).tolist() == [big, 7, -1]
    assert matched_accuracy(predicted, labels) == pytest.approx(3 / 4)


def _labelled(labels):
    """Eight random 64 x 64 images carrying ``labels``."""
    import torch

    from vaezoo.data import ImageDataset

    return ImageDataset(torch.rand(8, 1, 64, 64, generator=torch.Generator().manual_seed(0)), scale=1.0,
                        labels=labels)


@pytest.mark.parametrize("labels, message", [
    ("torch.full((8,), -1)", "needs labels of at least 0, got -1 for 8 images"),  # scored 1.0
    ("torch.arange(8) % 2 - 1", "needs labels of at least 0, got -1 for 4 images"),
    ("torch.zeros(8, 1, dtype=torch.long)", r"needs one label per image \(8\); .* shape \(8, 1\)"),  # scored
    ("torch.zeros(3, dtype=torch.long)", r"needs one label per image \(8\)"),
    ("torch.zeros(8)", "needs whole-number labels .*, got float32 labels; give class numbers"),
    ("torch.zeros(8, dtype=torch.bool)", "needs whole-number labels .*, got bool labels"),
])
def test_cluster_accuracy_names_labels_it_cannot_score(labels, message):
    import torch

    from vaezoo.errors import VaezooError
    from vaezoo_jointvae.metrics import cluster_accuracy

    dataset = _labelled(torch.arange(8) % 3)
    dataset.labels = eval(labels, {"torch": torch})  # after it was made, which refuses some (tests/test_data.py)
    with pytest.raises(VaezooError, match=f"^cluster_accuracy {message}"):
        cluster_accuracy(_small_jointvae(), dataset)


def test_cluster_accuracy_takes_labels_of_any_whole_numbers():
    import torch

    from vaezoo_jointvae.metrics import cluster_accuracy

    digits = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    model = _small_jointvae()
    assert cluster_accuracy(model, _labelled(digits * 10**9 + 5)) == cluster_accuracy(model, _labelled(digits))
    assert cluster_accuracy(model, _labelled(digits.numpy())) == cluster_accuracy(model, _labelled(digits))


def test_cluster_accuracy_of_nan_logits_is_refused_not_scored_as_category_0():
    import torch

    from vaezoo.errors import MetricError
    from vaezoo_jointvae.metrics import cluster_accuracy

    model = _small_jointvae()
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))  # weights changed by hand: loading checks them, this does not
    with pytest.raises(MetricError, match="8 of the 8 codes drawn hold NaN or infinite values"):
        cluster_accuracy(model, _labelled(torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])))


@pytest.mark.parametrize("change, message", [
    (lambda f: f.float().index_fill_(0, torch.tensor([0]), float("nan")), "factors hold NaN for 1 of its 16 images"),
    (lambda f: f[:10], r"factors are its images' factor classes, \(16, K\) .* got shape \(10, 3\)"),  # IndexError
    (lambda f: f[:, 0], r"got shape \(16,\)"),
    (lambda f: f[:, 1:], r"names 3 factors \(shape, x, y\) but holds 2 per image"),
])
def test_shape_accuracy_names_factors_it_cannot_score(change, message):
    from vaezoo.data.synthetic import synthetic
    from vaezoo.errors import MetricError
    from vaezoo_jointvae.metrics import shape_accuracy

    data = synthetic("test", image_size=64, size=16)
    data.factors = change(data.factors)  # after the dataset was made, which refuses most of them (tests/test_data.py)
    with pytest.raises(MetricError, match=f"^shape_accuracy: .*{message}"):  # a NaN shape was scored as a class
        shape_accuracy(_small_jointvae(), data)


def _labels_in_a_process(script: str, tmp_path):
    """Run ``script`` in a fresh Python process in ``tmp_path``: the command's signal handling is process-wide."""
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_the_labels_command_stopped_by_sigterm_while_writing_says_so_and_leaves_the_card_whole(tmp_path):
    """SIGTERM killed it with the default action (exit -15, no word), leaving the card's temporary file beside it."""
    zoo = get_card("jointvae-original-mnist")
    card = tmp_path / "mine.toml"
    write_card(zoo.model_copy(update={"name": "mine", "sections": {}}), card)
    before = card.read_bytes()
    result = _labels_in_a_process(
        "import os, signal, sys, numpy\n"
        "import vaezoo.store.files as files, vaezoo_jointvae.labels as labels\n"
        "labels.measure_matching = lambda *args: ('discrete0', numpy.arange(10), 0.5)\n"
        "files.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGTERM)  # while the card's new text is written\n"
        "sys.exit(labels.main(['mine.toml', '--write']))\n", tmp_path)
    assert (result.returncode, result.stderr) == (143, "error: stopped by SIGTERM\n")
    assert card.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


def test_a_ctrl_c_once_the_labels_command_is_done_leaves_its_exit_code(tmp_path):
    """A Ctrl-C during the interpreter's shutdown (torch's takes about a second) made a finished command fail."""
    result = _labels_in_a_process(
        "import atexit, os, runpy, signal, sys, time\n"
        "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.2)))\n"
        "sys.argv = ['labels', 'missing.toml']\n"
        "runpy.run_module('vaezoo_jointvae.labels', run_name='__main__')\n", tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
