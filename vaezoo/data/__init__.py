"""Datasets: registered :class:`Dataset` objects that describe a split and load it as an :class:`ImageDataset`.

Plugins register datasets with the ``vaezoo_register_datasets`` hook; a card's recipe names one and
gives its options (e.g. ``image_size``). Loading by name goes through :func:`vaezoo.assemble.load_dataset`.
"""

from vaezoo.data.base import (EVAL_BATCH_SIZE, DataInfo, Dataset, DataRoot, ImageDataset, check_data_root, data_root,
                              default_data_dir)

__all__ = ["EVAL_BATCH_SIZE", "DataInfo", "Dataset", "DataRoot", "ImageDataset", "check_data_root", "data_root",
           "default_data_dir"]
