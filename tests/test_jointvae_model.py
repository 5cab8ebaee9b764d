"""The JointVAE architecture starts training where the original code did, and names its categories' labels."""

import math

import pytest
import torch
from pydantic import ValidationError
from torch import nn

from vaezoo.assemble import build_part
from vaezoo.entries.catalog import get_card
from vaezoo.errors import VaezooError
from vaezoo_jointvae.sections import LabelMatching, Labels


@pytest.mark.parametrize("image_size, channels", [(32, 1), (64, 3)])
def test_transposed_convs_initialise_from_their_input_channels(image_size, channels):
    """torch 0.3.1, which the original code ran on, drew U(-b, b) with b = 1 / sqrt(in_channels * 16)."""
    torch.manual_seed(0)
    model = build_part("architecture", {"type": "jointvae", "image_size": image_size, "channels": channels,
                                        "continuous": 10, "discrete": [10]})
    convs = [m for m in model.decoder.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert convs[-1].out_channels == channels
    for conv in convs:
        bound = 1 / math.sqrt(conv.in_channels * 16)
        assert conv.weight.abs().max() <= bound
        assert conv.weight.abs().max() > 0.95 * bound
        assert conv.bias.abs().max() <= bound


@pytest.mark.parametrize("schedule", [[0.0, 5.0, 20], [0.0, 5.0, 20, 30.0, 1.0], [0.0, 5.0, 2.5, 30.0],
                                      [0.0, 5.0, float("nan"), 30.0], [0.0, 5.0, float("inf"), 30.0]])
def test_a_capacity_schedule_of_other_than_four_numbers_or_a_fractional_iterations_is_named(schedule):
    # 3 or 5 numbers said "not enough (too many) values to unpack"; iterations 2.5 was cut to 2, NaN and inf said
    # "cannot convert float ... to integer"
    with pytest.raises(ValueError, match=r"capacity.continuous takes \[min, max, iterations, gamma\], iterations a "
                                         r"whole number, got \["):
        build_part("architecture", {"type": "jointvae", "image_size": 16, "channels": 1, "continuous": 2,
                                    "discrete": [3], "hidden": 16, "capacity": {"continuous": schedule}})


@pytest.fixture(scope="module")
def tiny():
    """An untrained JointVAE with one 10-way categorical part and a second 3-way one, on 1 x 16 x 16 input."""
    torch.manual_seed(0)
    return build_part("architecture", {"type": "jointvae", "image_size": 16, "channels": 1, "continuous": 2,
                                       "discrete": [10, 3], "hidden": 16}).eval()


def with_labels(model, labels):
    """``model`` carrying a copy of the jointvae-mnist card whose ``[labels]`` is ``labels``."""
    sections = {"labels": Labels(labels)} if labels else {}
    model.card = get_card("jointvae-mnist").model_copy(update={"sections": sections})
    return model


def test_predicted_labels_are_categories_through_the_cards_matching(tiny):
    matching = [3, 1, 4, 0, 5, 9, 2, 6, 8, 7]
    model = with_labels(tiny, {"discrete0": LabelMatching(category_to_label=matching, split="test", command="c",
                                                          vaezoo_version="0")})
    x = torch.rand(64, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    categories = model.predict_category(x)
    assert categories.shape == (64, 2)
    assert model.predict_label(x).tolist() == [matching[c] for c in categories[:, 0].tolist()]


@pytest.mark.parametrize("labels, part, message", [
    (None, None, r"'jointvae-mnist' stores no category -> label matching for 'discrete0'; .*vaezoo_jointvae\.labels"),
    ({"discrete0": [0, 1]}, None, r"\[labels.discrete0\] maps 2 categories but the part has 10"),
    ({"discrete0": list(range(10))}, "discrete1", "stores no category -> label matching for 'discrete1'"),
    ({"discrete0": list(range(10))}, "continuous", "'continuous' is not a categorical part of this model"),
    ({"discrete0": list(range(10))}, 0, "^0 is not a categorical part of this model; its categorical parts are "
                                        "discrete0, discrete1$"),  # 0 and '' were taken for the first part
    ({"discrete0": list(range(10))}, "", "^'' is not a categorical part of this model"),
    ({"discrete0": [2] * 9 + [-1]}, None, r"\[labels.discrete0\] gives labels \[2\] to several categories"),
    ({"discrete0": [4, 4, 0, 0, -1, -1, 1, 2, 3, 5]}, None, r"gives labels \[0, 4\] to several categories"),
])
def test_predict_label_says_what_is_missing(tiny, labels, part, message):
    labels = labels and {k: LabelMatching(category_to_label=v, split="test", command="c", vaezoo_version="0")
                         for k, v in labels.items()}
    with pytest.raises(VaezooError, match=message):
        with_labels(tiny, labels).predict_label(torch.rand(2, 1, 16, 16), part)


def test_a_model_without_a_card_cannot_name_labels(tiny):
    tiny.card = None
    with pytest.raises(VaezooError, match=r"this model \(built without a card\) stores no category -> label"):
        tiny.predict_label(torch.rand(2, 1, 16, 16))


@pytest.mark.parametrize("label", ["2", 2.0, True, -2, 2**63])
def test_a_matching_holds_whole_numbers_from_minus_one_within_int64(label):
    with pytest.raises(ValidationError, match="category_to_label.0"):  # "2", 2.0 and True were read as 2, 2, 1
        LabelMatching(category_to_label=[label, 1], split="test", command="c", vaezoo_version="0")
    assert LabelMatching(category_to_label=[-1, 2**63 - 1], split="test", command="c",
                         vaezoo_version="0").category_to_label == [-1, 2**63 - 1]


def test_category_probabilities_carry_the_gradient_of_the_images(tiny):
    """An attribution map of a category needs its probability's gradient with respect to the images: category_probs
    ran under torch.no_grad, so torch.autograd.grad said 'element 0 of tensors does not require grad'."""
    x = torch.rand(4, 1, 16, 16, generator=torch.Generator().manual_seed(0), requires_grad=True)
    probs = tiny.category_probs(x)
    expected = {name: part.probs for name, part in tiny.encode(x).parts.items() if name.startswith("discrete")}
    for name, p in probs.items():
        torch.testing.assert_close(p, expected[name])
        grad, = torch.autograd.grad(p[:, 0].sum(), x, retain_graph=True)
        reference, = torch.autograd.grad(expected[name][:, 0].sum(), x, retain_graph=True)
        torch.testing.assert_close(grad, reference)
        assert grad.abs().sum() > 0
    with torch.no_grad():
        assert not tiny.category_probs(x)["discrete0"].requires_grad
