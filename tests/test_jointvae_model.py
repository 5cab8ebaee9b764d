"""The JointVAE architecture starts training where the original code did."""

import math

import pytest
import torch
from torch import nn

from vaezoo.assemble import build_part


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
