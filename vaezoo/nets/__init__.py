"""Encoders and decoders that compute their geometry from ``image_size`` and ``channels``."""

from vaezoo.nets.conv import ConvDecoder, ConvEncoder
from vaezoo.nets.mlp import MLPDecoder, MLPEncoder

__all__ = ["ConvEncoder", "ConvDecoder", "MLPEncoder", "MLPDecoder"]
