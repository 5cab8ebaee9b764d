"""Datasets: a registry of factories ``(root, split, image_size, **options) -> ImageDataset``."""

from vaezoo.data.base import ImageDataset, data_root

__all__ = ["ImageDataset", "data_root", "load_dataset"]


def load_dataset(name: str, root=None, split: str = "train", **options) -> ImageDataset:
    """Load the registered dataset ``name``; ``options`` come from the card's recipe."""
    from vaezoo.plugins import registry

    return registry("dataset")[name](root=root, split=split, **options)
