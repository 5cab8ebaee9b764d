"""Regularizers: beta-weighted KL, annealed capacity, total correlation."""

from vaezoo.regularizers.base import Regularizer, select_part
from vaezoo.regularizers.beta import Beta
from vaezoo.regularizers.capacity import Capacity, CapacityGroup
from vaezoo.regularizers.total_correlation import TotalCorrelation, decompose_kl, log_importance_weights

__all__ = [
    "Regularizer", "select_part", "Beta", "Capacity", "CapacityGroup",
    "TotalCorrelation", "decompose_kl", "log_importance_weights",
]
