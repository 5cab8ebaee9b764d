"""Datasets: a registry of factories ``(root, split, **options) -> ImageDataset``.

Plugins register factories with the ``vaezoo_register_datasets`` hook; a card's
recipe names one and gives its options (e.g. ``image_size``). ``root`` is
``--data-root``; see :func:`data_root` for where vaezoo looks when it is None.
"""

from vaezoo.data.base import EVAL_BATCH_SIZE, DataRoot, ImageDataset, data_root, default_data_dir

__all__ = ["EVAL_BATCH_SIZE", "DataRoot", "ImageDataset", "data_root", "default_data_dir", "load_dataset"]


def load_dataset(name: str, root=None, split: str = "train", **options) -> ImageDataset:
    """Load the registered dataset ``name``.

    Args:
        name: a registered dataset ("mnist", ...).
        root: the folder holding it (``--data-root``), or None for ``VAEZOO_DATA`` or the default folder.
        split: "train" or "test".
        options: the factory's keyword arguments, from the card's recipe.
    """
    import inspect

    from vaezoo.errors import DataError
    from vaezoo.plugins import registry

    factory = registry("dataset")[name]
    try:
        inspect.signature(factory).bind(root=root, split=split, **options)
    except TypeError as exc:
        raise DataError(f"dataset '{name}' does not take the options {options} ({exc}); "
                        f"check the card's [train.data] options") from None
    return factory(root=root, split=split, **options)
