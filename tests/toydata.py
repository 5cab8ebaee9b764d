"""A test plugin registering ``toy_bars``, a tiny synthetic dataset to train on in seconds.

:mod:`trainkit` installs it the way a third-party plugin is installed (a
``*.dist-info`` with an entry point in the ``vaezoo`` group). Like any plugin,
it keeps its top level light: torch is imported inside the factory.
"""

import vaezoo

DATASET = "toy_bars"


def toy_bars(root=None, split: str = "train", size: int = 96, nan: bool = False):
    """``size`` images of 16x16 with labels 0 (horizontal bar), 1 (vertical bar), 2 (square).

    Args:
        root: unused (the images are generated).
        split: "train" or "test"; each has its own fixed random stream.
        size: number of images.
        nan: every pixel NaN, to make a run diverge.
    """
    import torch

    from vaezoo.data import ImageDataset

    g = torch.Generator().manual_seed({"train": 0, "test": 1}[split])
    labels = torch.arange(size) % 3
    images = torch.zeros(size, 1, 16, 16, dtype=torch.uint8)
    for i, (label, at) in enumerate(zip(labels.tolist(), torch.randint(2, 12, (size,), generator=g).tolist())):
        if label == 0:
            images[i, 0, at:at + 3, :] = 1
        elif label == 1:
            images[i, 0, :, at:at + 3] = 1
        else:
            images[i, 0, at - 2:at + 3, at - 2:at + 3] = 1
    flips = torch.rand(images.shape, generator=g) < 0.03
    images = images ^ flips.to(torch.uint8)
    if nan:
        return ImageDataset(torch.full(images.shape, float("nan")), scale=1.0, labels=labels)
    return ImageDataset(images, scale=1.0, labels=labels)


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    from vaezoo.data import DataInfo, Dataset

    class ToyBars(Dataset):
        def info(self, split="train", size=96, nan=False):
            return DataInfo(size=size, image_size=16, channels=1)

        def load(self, root=None, split="train", size=96, nan=False):
            return toy_bars(root, split, size, nan)

    register(DATASET, ToyBars())
