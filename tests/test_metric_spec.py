"""Metrics as specs: a registered metric carries its function, direction, needs and settings."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from vaezoo.assemble import metric, metric_suite
from vaezoo.data import ImageDataset
from vaezoo.errors import DeviceError, MetricError
from vaezoo.metrics.evaluation import Evaluation
from vaezoo.metrics.provenance import metric_parameters
from vaezoo.metrics.requirements import FACTORS, requires
from vaezoo.metrics.spec import MetricSpec, metric_spec


def images(count: int = 6) -> ImageDataset:
    return ImageDataset(torch.zeros(count, 1, 4, 4, dtype=torch.uint8))


class Model(torch.nn.Module):
    """Stands for a model where a metric's result does not depend on it."""

    def encode(self, x):
        raise AssertionError("not encoded here")


MODEL = Model()


def test_a_spec_s_settings_are_its_keyword_defaults_and_measure_passes_them():
    @metric_spec(higher_is_better=False, needs=(FACTORS,))
    def spread(evaluation, points: int = 10, seed: int = 0, label: str | None = None) -> float:
        """How spread out."""
        return points + seed + len(evaluation.dataset)

    assert (spread.higher_is_better, spread.needs, dict(spread.settings)) == (False, (FACTORS,),
                                                                              {"points": 10, "seed": 0})
    assert spread.__doc__ == "How spread out."
    evaluation = Evaluation(MODEL, images())
    assert spread.measure(evaluation) == 16 and spread.measure(evaluation, seed=4) == 20
    assert dataclasses.replace(spread, settings={"points": 1, "seed": 0}).measure(evaluation) == 7
    assert spread(MODEL, images(2), points=3) == 5  # called alone, on an evaluation of its own


@pytest.mark.parametrize("value", [np.True_, np.array(False), torch.tensor(True)], ids=["numpy", "0-d", "torch"])
def test_a_metric_returning_a_numpy_or_torch_truth_value_is_refused_as_a_bool_is(value):
    """float() took them as 1.0 and 0.0, and a card recorded the comparison as a measured number."""
    @metric_spec()
    def above_chance(evaluation) -> float:
        return value

    with pytest.raises(TypeError, match=r"^it returned (bool|ndarray|Tensor) .*, not a number \(a metric returns "
                                        r"one float\)$"):
        above_chance.measure(Evaluation(MODEL, images()))


@pytest.mark.parametrize("arguments, error, message", [
    ({"batch_size": 0}, MetricError, r"^batch_size must be a whole number >= 1, got 0$"),
    ({"batch_size": -1}, MetricError, "got -1"), ({"batch_size": 2.5}, MetricError, "got 2.5"),
    ({"batch_size": True}, MetricError, "got True"),
    ({"device": "bogus"}, DeviceError, "'bogus' is not a device"),
    ({"device": 500}, DeviceError, r"^device '500' is not available on this machine, which has cpu"),
    ({"device": 256}, DeviceError, r"^device '256' is not available on this machine, which has cpu"),
])
def test_a_metric_called_alone_refuses_a_batch_size_or_device_it_cannot_use(arguments, error, message):
    """Called alone, a metric's common arguments met range(), torch.cat or torch.device deep inside; a points count
    given as the third argument, the device, was cuda:-12 for 500 (torch keeps the index in 8 bits: "Found no NVIDIA
    driver" on a CPU, and 256 was cuda:0 on a GPU)."""
    with pytest.raises(error, match=message):
        metric("mutual_info_score")(MODEL, images(), **arguments)


@pytest.mark.parametrize(("model", "dataset", "said"), [
    (None, images(), "got NoneType as the model"), (images(), MODEL, "got ImageDataset as the model"),
    (MODEL, None, "got NoneType as the dataset"), (MODEL, torch.zeros(2, 1, 4, 4), "got Tensor as the dataset")])
def test_a_metric_called_alone_on_no_model_or_no_dataset_says_what_it_takes(model, dataset, said):
    """metric('elbo')(None, ds), its arguments swapped, or a tensor as the dataset, met AttributeError inside."""
    with pytest.raises(TypeError, match=f"^a metric measures .*, {said}(;|$)"):
        metric("elbo")(model, dataset)


def test_a_torch_dataset_of_ones_own_is_refused_saying_how_to_give_its_images_as_an_image_dataset():
    """A torch Dataset of your own or a Subset of a vaezoo dataset (random_split's) was refused naming
    its type alone, without saying how to measure one's own images."""
    pixels = torch.rand(6, 1, 4, 4)
    theirs = torch.utils.data.TensorDataset(pixels, torch.zeros(6))
    said = (r"^a metric measures a model on a vaezoo\.data\.ImageDataset, got TensorDataset as the dataset; give the "
            r"card's \(vaezoo\.assemble\.card_dataset\(model\.card\)\), or your images as one: "
            r"ImageDataset\(images\), images a uint8 tensor \(N, C, H, W\) or one of floats in \[0, 1\] with "
            r"scale=1\.0, and labels= or factors= where the metric reads them$")
    with pytest.raises(TypeError, match=said):
        metric("mutual_info_score")(MODEL, theirs)
    with pytest.raises(TypeError, match=said.replace("TensorDataset", "Subset")):
        Evaluation(MODEL, torch.utils.data.Subset(images(), [0, 1]))  # as evaluate(..., dataset=) builds one
    assert Evaluation(MODEL, ImageDataset(pixels, scale=1.0)).dataset.batch(0).equal(pixels[0])  # as it says


def test_the_losses_given_a_torch_dataset_say_how_to_give_its_images_as_the_metrics_do():
    """losses(model, Subset, ...) met AttributeError: 'Subset' object has no attribute 'batches'."""
    from vaezoo.evaluation.measure import losses

    with pytest.raises(TypeError, match=r"^the losses are measured on a vaezoo\.data\.ImageDataset, got Subset as the "
                                        r"dataset; give the card's .*ImageDataset\(images\)"):
        losses(MODEL, torch.utils.data.Subset(images(), [0, 1]), step=None, batch_size=2)


def test_a_metric_is_named_by_a_string_and_its_seed_and_bins_are_checked_before_anything_runs():
    """metric(None) was 'NoneType object is not iterable'; seed=-1 ran, seed=2**70 overflowed inside numpy, and
    bins=1 gave a MIG of 0, which --write would record."""
    with pytest.raises(TypeError, match=r"^a metric is named by a string, e\.g\. '.*', got NoneType$"):
        metric(None)
    for settings, said in (({"seed": -1}, "seed = -1 is not a whole number (int), at least 0"),
                           ({"seed": 2**70}, f"seed = {2**70} is not a whole number (int), at least 0 and at most "),
                           ({"bins": 1}, "bins = 1 is not a whole number (int), at least 2")):
        with pytest.raises(MetricError, match=re.escape(said)):
            metric("mutual_info_score")(MODEL, images(), **settings)


def test_a_plugin_s_plain_function_becomes_a_spec_with_its_needs_and_settings():
    @requires(FACTORS)
    def plain(model, dataset, device=None, batch_size=64, points: int = 5) -> float:
        return points * len(dataset) + batch_size

    spec = MetricSpec.of(plain)
    assert (spec.higher_is_better, spec.needs, dict(spec.settings)) == (True, (FACTORS,), {"points": 5})
    assert spec.measure(Evaluation(MODEL, images(3), batch_size=1), points=2) == 7
    assert MetricSpec.of(spec) is spec and metric_parameters(plain, points=9) == {"points": 9}


def test_the_core_registers_each_metric_with_its_direction_and_the_disentanglement_suite_in_card_order():
    lower = {"total_correlation", "gaussian_total_correlation", "mutual_info_score"}
    for name in ("mig_chen", "mig_dlib", "betavae_score", "dci_completeness", "elbo", *lower):
        assert metric(name).higher_is_better == (name not in lower), name
    assert metric_suite("disentanglement") == [
        "mig_chen", "total_correlation", "mig_dlib", "betavae_score", "factorvae_score", "sap_score",
        "dci_disentanglement", "dci_completeness", "dci_informativeness", "modularity", "explicitness",
        "gaussian_total_correlation", "mutual_info_score"]
    assert "elbo" not in metric_suite("disentanglement") and metric("cluster_accuracy").needs


def test_a_plain_metrics_settings_are_refused_under_its_own_name():
    def code_usage(model, dataset, device=None, batch_size=64, threshold: float = 0.1) -> float:
        return 1.0

    with pytest.raises(MetricError, match="^metric 'code_usage': threshold = 'x' is not a number"):
        MetricSpec.of(code_usage).measure(None, threshold="x")


@pytest.mark.parametrize("direction", [1, "yes", None])
def test_a_spec_s_direction_is_true_or_false_as_the_card_recording_it_takes(direction):
    """A card's higher_is_better takes only true or false: a spec saying 1 failed every 'eval --write' of it."""
    with pytest.raises(TypeError, match=r"higher_is_better of metric 'score' is True or False, got"):
        @metric_spec(higher_is_better=direction)
        def score(evaluation) -> float:
            return 0.0
