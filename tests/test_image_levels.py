"""Images whose levels are not 8-bit (PIL's modes ``I`` and ``F``) read as they are seen: scaled to 8 bits as
torchvision's ``ToDtype(torch.uint8, scale=True)`` scales them, not clipped at 255 by PIL's convert()."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vaezoo.data.images import read_images
from vaezoo.errors import DataError


def read(path, mode: str = "L"):
    return read_images([path], mode, 4, False, "image_folder")


def halves(left, right, dtype) -> np.ndarray:
    """A 4x4 image, ``left`` on its left half and ``right`` on its right."""
    levels = np.full((4, 4), right, dtype=dtype)
    levels[:, :2] = left
    return levels


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_a_32_bit_integer_tiff_is_scaled_from_its_32_bits(tmp_path, mode):
    # PIL's convert() clipped every level above 255: the image was all white
    Image.fromarray(halves(2 ** 29, 2 ** 30, np.int32)).save(tmp_path / "deep.tif")  # an eighth and a quarter of 2^32
    assert Image.open(tmp_path / "deep.tif").mode == "I"
    assert (read(tmp_path / "deep.tif", mode)[0, :, 0].tolist() == [[32, 32, 64, 64]] * len(mode))


def test_a_16_bit_pgm_pil_opens_as_32_bit_integers_is_scaled_from_its_16_bits(tmp_path):
    Image.fromarray(halves(0x4000, 0xFFFF, np.uint16)).save(tmp_path / "grey.pgm")
    assert Image.open(tmp_path / "grey.pgm").mode == "I"
    assert read(tmp_path / "grey.pgm")[0, 0, 0].tolist() == [64, 64, 255, 255]


def test_a_float_tiff_is_read_from_0_black_to_1_white(tmp_path):
    # its levels were clipped at 255 and cast: 0.5 was 0, black
    Image.fromarray(halves(0.25, 1.0, np.float32)).save(tmp_path / "float.tif")
    assert Image.open(tmp_path / "float.tif").mode == "F"
    assert read(tmp_path / "float.tif")[0, 0, 0].tolist() == [64, 64, 255, 255]


@pytest.mark.parametrize("levels, said", [
    (halves(0.0, 255.0, np.float32), "is a float image with levels from 0 to 255, not levels from 0 (black) to 1 "
                                     "(white); save it scaled to [0, 1], or as an 8- or 16-bit image"),
    (halves(0.0, np.nan, np.float32), "is a float image with NaN or infinite levels, not levels from 0 (black) to 1 "
                                      "(white); save it scaled to [0, 1], or as an 8- or 16-bit image"),
    (halves(-7, 9, np.int32), "has negative levels (down to -7); save it with levels from 0, as an 8- or 16-bit "
                              "image")])
def test_levels_that_cannot_be_read_as_grey_levels_are_refused_naming_the_image(tmp_path, levels, said):
    Image.fromarray(levels).save(tmp_path / "odd.tif")
    with pytest.raises(DataError) as info:
        read(tmp_path / "odd.tif")
    assert str(info.value) == f"image_folder image {tmp_path / 'odd.tif'} {said}"
