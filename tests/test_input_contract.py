"""The input contract: the transform into a model's input, the checks of its public methods, outputs on the
data's scale, and answers in the dataset's labels, down to raw MNIST through the transform."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from kit import MNIST_ROOT, require_shared
from PIL import Image
from vaezoo_jointvae.sections import card_labels

import vaezoo
from vaezoo.assemble import build_part, card_dataset, data_info, load_model
from vaezoo.data.transforms import ModelInput, for_model
from vaezoo.entries.catalog import get_card, list_cards
from vaezoo.errors import DtypeError, InputError, VaezooError

CATEGORIES = 10


@pytest.fixture(scope="module")
def model():
    """A small untrained JointVAE on 1 x 32 x 32 input, as the MNIST cards take."""
    torch.manual_seed(0)
    return build_part("architecture", {"type": "jointvae", "image_size": 32, "channels": 1, "continuous": 2,
                                       "discrete": [CATEGORIES], "hidden": 16}).eval()


def digits(n: int, size: int = 28, seed: int = 0) -> torch.Tensor:
    """``n`` random 8-bit grey images ``(n, size, size)``."""
    return torch.randint(0, 256, (n, size, size), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def pil_resized(image: np.ndarray, size: int = 32) -> np.ndarray:
    """What vaezoo.data.torchvision_sets does to each MNIST digit."""
    return np.array(Image.fromarray(image).resize((size, size), Image.BILINEAR))


# --- the transform ------------------------------------------------------------------------------------------

def test_uint8_digits_are_resized_as_the_dataset_pipeline_resizes_them(model):
    raw = digits(5)
    expected = torch.from_numpy(np.stack([pil_resized(d) for d in raw.numpy()])).unsqueeze(1).float().div(255)
    assert torch.equal(model.preprocess(raw.unsqueeze(1)), expected)


def test_every_way_of_giving_one_image_gives_the_same_input(model):
    raw = digits(1)[0]
    expected = model.preprocess(raw[None, None])
    assert expected.shape == (1, 1, 32, 32)
    for given in (raw, raw[None], raw.numpy(), Image.fromarray(raw.numpy()), (Image.fromarray(raw.numpy()), 7),
                  (raw[None], torch.tensor(7))):
        assert torch.equal(model.preprocess(given), expected), type(given)


def test_per_image_is_a_dataset_transform_whose_batches_the_model_takes(model):
    images = [Image.fromarray(d.numpy()) for d in digits(6)]

    class Digits(torch.utils.data.Dataset):
        def __init__(self, transform):
            self.transform = transform

        def __len__(self):
            return len(images)

        def __getitem__(self, i):
            return self.transform(images[i]), i

    batch, _ = next(iter(torch.utils.data.DataLoader(Digits(for_model(model).per_image), batch_size=4)))
    assert torch.equal(batch, torch.cat([model.preprocess(image) for image in images[:4]]))
    model.encode(batch)
    stacked, _ = next(iter(torch.utils.data.DataLoader(Digits(model.preprocess), batch_size=4)))
    with pytest.raises(InputError, match=r"got shape \(4, 1, 1, 32, 32\): batches of batches of one image, .* "
                                         r"transform=vaezoo.data.transforms.for_model\(model\).per_image"):
        model.encode(stacked)
    with pytest.raises(InputError, match="per_image takes one image, got 2"):
        for_model(model).per_image(digits(2).unsqueeze(1))


def test_input_of_the_right_size_is_only_scaled():
    contract = ModelInput(channels=1, image_size=28)
    raw = digits(3)
    assert torch.equal(contract(raw.unsqueeze(1)), raw.unsqueeze(1).float() / 255)
    floats = torch.rand(3, 1, 28, 28)
    assert torch.equal(contract(floats), floats)


def test_binary_images_are_zero_and_one():
    binary = torch.rand(2, 1, 64, 64) > 0.5
    assert torch.equal(ModelInput(channels=1, image_size=64)(binary), binary.float())


def test_float_images_of_another_size_are_resized_and_stay_in_range():
    out = ModelInput(channels=1, image_size=32, interpolation="lanczos")(torch.rand(2, 1, 28, 28))
    assert out.shape == (2, 1, 32, 32) and out.min() >= 0 and out.max() <= 1


def test_colour_images_become_grey_as_pil_converts_them():
    rgb = np.random.default_rng(0).integers(0, 256, (28, 28, 3), dtype=np.uint8)
    grey = pil_resized(np.array(Image.fromarray(rgb, "RGB").convert("L")))
    expected = torch.from_numpy(grey).float().div(255)[None, None]
    contract = ModelInput(channels=1, image_size=32)
    assert torch.equal(contract(Image.fromarray(rgb, "RGB")), expected)
    assert torch.equal(contract(torch.from_numpy(rgb).permute(2, 0, 1)[None]), expected)


def test_grey_images_become_rgb_for_a_colour_model():
    raw = digits(1, size=64)[0]
    out = ModelInput(channels=3, image_size=64)(raw)
    assert out.shape == (1, 3, 64, 64) and torch.equal(out[0, 0], out[0, 2]) and torch.equal(out[0, 1], raw / 255)


@pytest.mark.parametrize("given, message", [
    (torch.rand(2, 1, 28, 28) * 255, r"float images must be in \[0, 1\], got values in \[[\d.e-]+, 2\d\d"),
    (digits(100), r"a 3-d input is one image \(C, H, W\), and 100 is not a channel count .* images.unsqueeze\(1\)"),
    (torch.zeros(1, 1, 1, 28, 28, dtype=torch.uint8), r"images are \(H, W\), \(C, H, W\) or \(N, C, H, W\)"),
    (torch.zeros(28, 28, dtype=torch.int64), "integer images must be uint8"),
    (torch.rand(1, 3, 32, 32), "the model takes 1-channel images, got 3 channels of floats"),
    (torch.zeros(1, 2, 28, 28, dtype=torch.uint8), "cannot turn 2-channel images into the model's 1 channels"),
    ("digit.png", "cannot turn str into model input"),
    (digits(3), r"a \(3, H, W\) input could be one RGB image or three grey images; pass images.unsqueeze\(1\)"),
    (torch.rand(1, 1, 28, 28) * 2 - 1, r"got values in \[-[\d.e-]+, [\d.e-]+\]; map images in \[-1, 1\] with "
                                       r"\(x \+ 1\) / 2"),
    (np.zeros((28, 28, 3), dtype=np.uint8), r"and 28 is not a channel count .* image.permute\(2, 0, 1\) \(numpy: "
                                            r"image.transpose\(2, 0, 1\)\)"),
    (torch.zeros(1, 1, 0, 0, dtype=torch.uint8), r"images of shape \(1, 1, 0, 0\) have no pixels to give"),
    (Image.new("L", (0, 0)), "the PIL image is 0x0 pixels"),
    (Image.new("I;16", (28, 28)), "a PIL image of mode 'I;16' holds integers of no fixed range"),
    (Image.new("F", (28, 28), 2.0), r"float images must be in \[0, 1\], got values in \[2, 2\]"),
    # a rounding above 1 read "[1, 1]" (the range the message says is taken) and was told to divide by 255
    (torch.full((1, 1, 28, 28), 1.0000001), r"got values in \[1\.0000001\d*, 1\.0000001\d*\]; clamp values just "
                                           r"outside it \(a rounding's, a resize's\) with x\.clamp\(0, 1\), or pass"),
    (torch.full((28, 28), float("nan")), r"float images hold NaN or infinite values; give finite values in \[0, 1\]$"),
    (torch.full((28, 28), float("inf")), r"float images hold NaN or infinite values"),
    (torch.rand(1, 1, 28, 28, requires_grad=True), r"float images of 28x28 that require grad: resizing them to the "
                                                    r"model's 32x32 goes through PIL, which carries no gradients"),
])
def test_what_cannot_become_input_is_one_line_saying_why(model, given, message):
    with pytest.raises(InputError, match=message) as caught:
        model.preprocess(given)
    assert "\n" not in str(caught.value)


def test_decode_takes_codes_of_the_code_size_in_any_float_dtype_and_sample_a_count(model):
    half = load_model(get_card("jointvae-mnist"), dtype=torch.float16, pretrained=False)
    assert half.decode(torch.zeros(2, 20)).dtype == torch.float16  # float32 codes converted, as encode converts
    for codes, got in ((torch.zeros(4, 11), r"float32 of shape \(4, 11\)"),
                       (torch.zeros(12), r"float32 of shape \(12,\)"), (torch.zeros(2, 12, dtype=torch.long), "int64")):
        with pytest.raises(InputError, match=rf"the decoder takes float codes \(B, 12\) \(code_size 12\), got {got}"):
            model.decode(codes)
    for n in (-1, 2.0, True):
        with pytest.raises(InputError, match="sample takes the number of images, a whole number >= 0"):
            model.sample(n)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_decode_refuses_codes_that_are_not_finite_as_encode_refuses_such_images(model, value):
    # model.decode(codes) of codes holding NaN returned NaN images without a word, where encode refuses NaN images
    codes = torch.zeros(3, model.code_size)
    codes[1, 0] = value
    with pytest.raises(InputError, match=r"^the decoder takes finite codes, got NaN or infinite values in 1 of the 3 "
                                         r"codes \(row 1\); give finite codes$"):
        model.decode(codes)
    assert torch.isfinite(model.decode(codes[[0, 2]])).all()


def test_reconstruct_says_the_models_own_codes_are_not_finite_naming_the_images_rows(model):
    # an encoder giving NaN codes made reconstruct say "the decoder takes finite codes", codes the caller never gave
    broken = copy.deepcopy(model)
    broken.head.register_forward_hook(lambda module, args, out: out.index_fill(0, torch.tensor([0, 2]), float("nan")))
    with pytest.raises(VaezooError, match=r"^the model's own codes for these images are not finite: NaN or infinite "
                                          r"values for 2 of the 3 images \(rows 0, 2\), which are valid images; "):
        broken.reconstruct(torch.rand(3, 1, 32, 32))
    assert torch.isfinite(model.reconstruct(torch.rand(3, 1, 32, 32))).all()


def test_sample_takes_numpy_and_torch_counts_and_refuses_what_is_no_generator(model):
    """np.int64(2) and torch.tensor(2) were refused as "not a whole number >= 0"; generator=1 was torch.randn's
    traceback from inside the latent family."""
    for n in (np.int64(2), torch.tensor(2)):
        assert model.sample(n).shape == (2, 1, 32, 32)
    with pytest.raises(InputError, match=r"^sample's generator is a torch.Generator \(or None\), got int; "):
        model.sample(2, generator=1)


@pytest.mark.parametrize("checked", ["no", 0, None, torch.tensor([True])])
def test_checked_that_is_no_truth_value_is_refused_not_taken_as_one(model, checked):
    """checked="no" skipped the check of the images, as True does."""
    for call in (model.encode, model):
        with pytest.raises(InputError, match=r"^checked is True or False \(whether the images are known to fit\), "
                                             r"got "):
            call(torch.rand(2, 1, 32, 32), checked=checked)
    assert model.encode(torch.rand(2, 1, 32, 32), checked=np.True_).mode.shape == (2, model.code_size)


def test_sample_checks_its_count_before_the_latent_family_is_asked_for_codes(model, monkeypatch):
    """A huge n met torch's allocation error (or, beyond 2^63, its overflow) inside the family's sample_prior; a
    tensor of one element and a 0-d bool tensor were taken as counts; 0 asked the family for no codes."""
    for n in (torch.tensor([2]), torch.tensor(True), np.array([2])):
        with pytest.raises(InputError, match="^sample takes the number of images, a whole number >= 0, got "):
            model.sample(n)
    monkeypatch.setattr(model.latent, "sample_prior", lambda *a, **k: pytest.fail("the family was asked"))
    for n in (10**12, 2**63, np.int64(2**62)):
        with pytest.raises(InputError, match=rf"^sample of {int(n):,} images would take [\d,.]+ GiB for the images "
                                             rf"alone, more than the [\d,.]+ GiB of memory of cpu; draw fewer at a "
                                             rf"time$"):
            model.sample(n)
    assert model.sample(0).shape == model.sample(torch.tensor(0)).shape == (0, 1, 32, 32)


def test_images_codes_and_a_generator_on_another_device_than_the_model_are_named(model):
    """On a GPU, encode(x), model(x), reconstruct(x) and predict_label(x) of CPU images were torch's "Input type
    (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same", decode of CPU codes "Expected
    all tensors to be on the same device", and sample with a CPU generator "Expected a 'cuda' device type for
    generator" from inside the latent family. The meta device stands for the GPU here."""
    import copy

    elsewhere = copy.deepcopy(model).to("meta")
    x = torch.rand(2, 1, 32, 32)
    for call in (elsewhere.encode, elsewhere, elsewhere.reconstruct):
        with pytest.raises(InputError, match=r"^the images are on cpu and the model on meta; move them there with "
                                             r"x.to\('meta'\) \(model.preprocess\(images\) gives images there\)$"):
            call(x)
    with pytest.raises(InputError, match=r"^the codes are on cpu and the model on meta; move them there with "
                                         r"z.to\('meta'\)$"):
        elsewhere.decode(torch.zeros(2, elsewhere.code_size))
    with pytest.raises(InputError, match=r"^sample's generator is on cpu and the model on meta; make it there: "
                                         r"torch.Generator\('meta'\)"):
        elsewhere.sample(2, generator=torch.Generator())


def test_images_on_the_meta_device_are_named_by_their_device_before_their_values_are_read(model):
    """Were torch's "Tensor.item() cannot be called on meta tensors", from the check of the images' range."""
    x = torch.empty(2, 1, 32, 32, device="meta")
    for call in (model.encode, model, model.reconstruct):
        with pytest.raises(InputError, match=r"^the images are on meta and the model on cpu; move them there with "
                                             r"x.to\('cpu'\)"):
            call(x)


def test_sparse_images_and_codes_are_refused_in_one_line(model):
    """encode, forward, reconstruct and preprocess of sparse images, and decode of sparse codes, were torch's
    "Could not run 'aten::aminmax' (or 'aten::ne.Scalar') with arguments from the 'SparseCPU' backend ..." from the
    checks of their values."""
    x = torch.rand(2, 1, 32, 32)
    for name, call in {**public_calls(model), "preprocess": model.preprocess}.items():
        with pytest.raises(InputError, match=r"^the model takes images as a dense tensor, got a sparse_coo one; "
                                             r"give x.to_dense\(\)$"):
            call(x.to_sparse())
    with pytest.raises(InputError, match=r"^the decoder takes codes as a dense tensor, got a sparse_coo one; give "
                                         r"z.to_dense\(\)$"):
        model.decode(torch.zeros(2, model.code_size).to_sparse())


def test_forward_refuses_a_step_tensor_of_several_values(model):
    """step=torch.tensor([1, 2]) was blamed on the capacity regularizer, whose term then held two values ("term
    'capacity_continuous' is a tensor of shape (2,), not a scalar tensor")."""
    capacity = build_part("architecture", {"type": "jointvae", "image_size": 32, "channels": 1, "continuous": 2,
                                           "discrete": [CATEGORIES], "hidden": 16,
                                           "capacity": {"continuous": [0.0, 5.0, 100, 30.0]}})
    x = torch.rand(2, 1, 32, 32)
    with pytest.raises(InputError, match=r"^forward\(\) takes step, the training step, as a whole number >= 0 or a "
                                         r"0-d tensor, got a tensor of shape \(2,\)$"):
        capacity(x, step=torch.tensor([1, 2]))
    with pytest.raises(InputError, match=r"^forward\(\) takes step, the training step, as a whole number >= 0 or a "
                                         r"0-d tensor, got a bool tensor$"):  # it ran as step 1
        capacity(x, step=torch.tensor(True))
    assert capacity(x, step=torch.tensor(3.0, dtype=torch.float64)).loss.dim() == 0  # a captured loop's step


def test_a_model_on_the_meta_device_is_refused_in_one_line(model):
    """A model moved to the meta device, given images or codes there, was torch's "Tensor.item() cannot be called on
    meta tensors" from the checks of their values (and from torch.autocast past them)."""
    on_meta = copy.deepcopy(model).to("meta")
    x = torch.empty(2, 1, 32, 32, device="meta")
    z = torch.empty(2, on_meta.code_size, device="meta")
    calls = (lambda: on_meta.encode(x), lambda: on_meta(x), lambda: on_meta.reconstruct(x),
             lambda: on_meta.decode(z), lambda: on_meta.sample(2), lambda: on_meta.predict_category(x))
    for call in calls:
        with pytest.raises(VaezooError, match=r"^the model is on the meta device, which holds no weights, so it "
                                              r"computes no images or codes; load it onto a device that holds them: "
                                              r"vaezoo.load\(NAME, device='cpu'\)$"):
            call()


def test_forward_refuses_a_step_that_is_no_whole_number(model):
    """step=-1 and 1.5 were taken (a capacity's target went below its minimum); step='x' was a TypeError from
    inside the capacity regularizer."""
    capacity = build_part("architecture", {"type": "jointvae", "image_size": 32, "channels": 1, "continuous": 2,
                                           "discrete": [CATEGORIES], "hidden": 16,
                                           "capacity": {"continuous": [0.0, 5.0, 100, 30.0]}})
    x = torch.rand(2, 1, 32, 32)
    for step in (-1, 1.5, "x", True):
        with pytest.raises(InputError, match=r"^forward\(\) takes step, the training step, a whole number >= 0, "
                                             r"got "):
            capacity(x, step=step)
    assert torch.equal(capacity.eval()(x, step=np.int64(7)).loss, capacity(x, step=7).loss)
    with pytest.raises(InputError, match=r"^targets\(\) takes step, the training step, a whole number >= 0, got -1$"):
        capacity.targets(capacity.encode(x), -1)  # a capacity below its minimum


def test_a_list_of_images_of_any_kinds_and_sizes_is_one_batch(model):
    """A list of PIL images, as an image processor takes them, was 'cannot turn list into model input'."""
    raw = digits(3)
    given = [Image.fromarray(raw[0].numpy()), raw[1], raw[2:3].numpy(), (Image.fromarray(raw[0].numpy()), 7),
             Image.fromarray(raw[1].numpy()).resize((40, 40))]
    batch = model.preprocess(given)
    assert batch.shape == (5, 1, 32, 32)
    torch.testing.assert_close(batch[:3], model.preprocess(raw.unsqueeze(1)))
    assert torch.equal(batch[3], batch[0])
    with pytest.raises(InputError, match=r"^an empty list holds no image to turn into model input$"):
        model.preprocess([])
    with pytest.raises(InputError, match=r"^per_image takes one image, got 2"):
        for_model(model).per_image(given[:2])


def test_a_dataloaders_batch_as_it_comes_is_its_images_and_a_list_of_two_images_stays_two(model):
    """A DataLoader's batch of (image, label) samples is a list [images, labels] (its default collate makes a list
    of a tuple): preprocess(batch) read it as a list of images and refused the labels, 'images are (H, W), (C, H, W)
    or (N, C, H, W), got shape (4,)'."""
    raw = digits(4).unsqueeze(1)
    samples = torch.utils.data.TensorDataset(raw, torch.arange(4))
    batch = next(iter(torch.utils.data.DataLoader(samples, batch_size=4)))
    assert isinstance(batch, list)
    expected = model.preprocess(raw)
    assert torch.equal(model.preprocess(batch), expected)
    assert torch.equal(model.preprocess([raw[0, 0].numpy(), 3]), expected[:1])  # one sample made a list
    two = [Image.fromarray(raw[0, 0].numpy()), raw[1:2]]  # two images, the second a batch of one
    assert torch.equal(model.preprocess(two), expected[:2])
    assert model.preprocess([raw[:2], [raw[2, 0], raw[3, 0]]]).shape == (4, 1, 32, 32)  # images, then a list of them


def test_a_dataloaders_batch_of_targets_in_rows_is_never_taken_for_an_image(model):
    """A batch whose targets are rows, [images (N, C, H, W), targets (N, K)], was read as a list of two images: float
    factors (a dSprites-like split's) became one more grey image of N x K pixels, N + 1 images and no error. Integer
    targets, which no image is, are targets; rows an image could be are refused, naming both readings (a batch of one
    mask too, which was one more grey image)."""
    raw = digits(4).unsqueeze(1)
    attributes = torch.randint(0, 2, (4, 40))  # CelebA's, int64
    batch = next(iter(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(raw, attributes), batch_size=4)))
    assert torch.equal(model.preprocess(batch), model.preprocess(raw))
    mask = torch.zeros(1, 32, 32, dtype=torch.uint8)  # a batch of one segmentation mask, or a grey image (1, H, W)
    for images, rows in ((raw, torch.rand(4, 6)), (raw, np.random.default_rng(0).random((4, 6))), (raw[:1], mask)):
        with pytest.raises(InputError, match=rf"^a list of images \({len(images)}, 1, 28, 28\) and a "
                                             rf"(float32|float64|uint8) \({len(images)}, \d+(, 32)?\) tensor could be "
                                             r"a DataLoader's \[images, targets\] or two images; give the images"):
            model.preprocess([images, rows])
    grey = digits(1)[0]  # (H, W): not as many rows as the batch has images, so an image
    assert model.preprocess([raw, grey]).shape == (5, 1, 32, 32)


def test_a_pil_float_image_keeps_its_values():
    values = np.linspace(0, 1, 32 * 32, dtype=np.float32).reshape(32, 32)
    out = ModelInput(channels=1, image_size=32)(Image.fromarray(values, mode="F"))
    assert torch.equal(out[0, 0], torch.from_numpy(values))  # not truncated to 8 bits (all but 1.0 became 0)


# --- the checks of the public methods -----------------------------------------------------------------------

def public_calls(model):
    return {
        "encode": model.encode,
        "forward": model,
        "reconstruct": model.reconstruct,
        "predict_category": model.predict_category,
        "category_probs": model.category_probs,
    }


@pytest.mark.parametrize("given, got", [
    (torch.rand(2, 1, 28, 28), r"got shape \(2, 1, 28, 28\)"),
    (torch.rand(1, 32, 32), r"got shape \(1, 32, 32\): one image without the batch dimension; give "
                            r"x\.unsqueeze\(0\), a batch of one image, or turn images into model input"),
    (torch.rand(2, 3, 32, 32), r"got shape \(2, 3, 32, 32\)"),
    (torch.randint(0, 256, (2, 1, 32, 32), dtype=torch.uint8), "got uint8 values"),
    (torch.rand(2, 1, 32, 32) * 255, r"got values in \[0\.\d+, 2\d\d\.\d+\]"),
    (torch.rand(2, 1, 32, 32) - 0.5, r"got values in \[-0\.\d+, 0\.\d+\]"),
    (torch.full((2, 1, 32, 32), -1e-9, dtype=torch.float64), r"got values in \[-1e-09, -1e-09\]"),
    (torch.full((2, 1, 32, 32), 1 + 1e-12, dtype=torch.float64), r"got values in \[1\.000000000001, 1\.000000000001\]"),
    ([[0.5]], "got list"),
])
def test_public_methods_refuse_what_the_model_does_not_take(model, given, got):
    expected = r"the model takes float images \(N, 1, 32, 32\) in \[0, 1\], " + got
    for name, call in public_calls(model).items():
        with pytest.raises(InputError, match=expected) as caught:
            call(given)
        message = str(caught.value)
        assert "\n" not in message and "model.preprocess(images)" in message, name


def pixels_set(index: tuple[int, ...], value: float) -> torch.Tensor:
    """Two images in [0, 1] whose pixel ``index`` is ``value``."""
    x = torch.rand(2, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    x[index] = value
    return x


@pytest.mark.parametrize("given, images", [
    (pixels_set((1, 0, 3, 4), float("nan")), 1),
    (pixels_set((0, 0, 0, 0), float("inf")), 1),
    (torch.full((2, 1, 32, 32), float("nan")), 2),
    (torch.full((2, 1, 32, 32), float("-inf"), dtype=torch.float64), 2),
])
def test_public_methods_name_nan_or_infinite_pixels_not_a_range_of_nan(model, given, images):
    """One NaN pixel made the range 'got values in [nan, nan]', and the message sent the caller to
    model.preprocess(images), which refuses NaN too."""
    expected = (rf"^the model takes float images \(N, 1, 32, 32\) in \[0, 1\], got NaN or infinite values in "
                rf"{images} of the 2 images; give finite values in \[0, 1\]$")
    for call in public_calls(model).values():
        with pytest.raises(InputError, match=expected):
            call(given)


def test_what_the_transform_gives_every_public_method_takes(model):
    x = model.preprocess(digits(3).unsqueeze(1))
    for call in public_calls(model).values():
        call(x)
    assert model.encode(x[:0]).mode.shape[0] == 0  # an empty batch has no range to check


# --- outputs on the data's scale ----------------------------------------------------------------------------

def test_decode_gives_images_and_decode_logits_says_it_gives_logits(model):
    z = model.latent.sample_prior(4, generator=torch.Generator().manual_seed(0))
    logits = model.decode_logits(z)
    images = model.decode(z)
    assert torch.equal(images, torch.sigmoid(logits))
    assert logits.min() < 0 or logits.max() > 1  # raw logits are not images
    for out in (images, model.sample(4), model.reconstruct(model.preprocess(digits(4).unsqueeze(1)))):
        assert out.shape[1:] == (1, 32, 32) and out.min() >= 0 and out.max() <= 1


# --- the cards' input section -------------------------------------------------------------------------------

@pytest.mark.parametrize("card", list_cards(), ids=lambda card: card.name)
def test_every_zoo_card_states_its_input(card):
    assert card.input is not None and card.input.transform
    info = data_info(card)
    assert f"{info.image_size}x{info.image_size}" in card.input.transform


def test_the_contract_takes_geometry_from_the_dataset_and_the_rest_from_the_card():
    card = get_card("jointvae-mnist")
    contract = for_model(load_model(card, pretrained=False))
    info = data_info(card)
    assert (contract.channels, contract.image_size) == (info.channels, info.image_size) == (1, 32)
    assert (contract.interpolation, contract.description) == (card.input.interpolation, card.input.transform)
    assert str(contract) == "float images (N, 1, 32, 32) in [0, 1]"


@pytest.mark.parametrize("given", [get_card("jointvae-mnist"), "jointvae-mnist"], ids=["card", "name"])
def test_the_contract_of_a_card_is_asked_of_a_model_built_from_it(given):
    """torchvision's weights.transforms() comes without a model: for_model(card) said only that a Card has no
    attribute 'channels'; it names what to give instead, which works."""
    with pytest.raises(TypeError, match=r"^for_model takes a model .* for_model\(vaezoo.build_model\(card\)\)$"):
        for_model(given)
    assert str(for_model(vaezoo.build_model(given))) == "float images (N, 1, 32, 32) in [0, 1]"


# --- raw MNIST through the transform, and answers in digits -------------------------------------------------

MNIST_CARDS = ["jointvae-mnist", "jointvae-original-mnist"]


@pytest.fixture(scope="module")
def raw_mnist_test():
    """MNIST's test split as torchvision gives it: 28x28 uint8 digits and their labels."""
    require_shared(MNIST_ROOT / "MNIST" / "raw")
    import torchvision

    return torchvision.datasets.MNIST(str(MNIST_ROOT), train=False, download=False)


@pytest.mark.parametrize("name", MNIST_CARDS)
def test_raw_mnist_through_the_transform_is_what_eval_sees(name, raw_mnist_test):
    card = get_card(name)
    model = load_model(card, pretrained=False)
    evaluated = card_dataset(card, MNIST_ROOT, "test")
    given = model.preprocess(raw_mnist_test.data.unsqueeze(1))
    assert torch.equal(given, evaluated.batch(slice(None)))  # the same bits: the same predictions as vaezoo eval
    samples = [raw_mnist_test[i] for i in range(8)]  # (PIL image, digit), as torchvision hands them out
    assert torch.equal(torch.cat([model.preprocess(sample) for sample in samples]), given[:8])


def test_the_dataset_a_model_expects_is_read_from_what_names_its_card():
    """card_dataset took only a Card: its zoo name, as build_model and load take, failed with "'str' object has no
    attribute 'train'"."""
    require_shared(MNIST_ROOT / "MNIST" / "raw")
    by_card = card_dataset(get_card("vae-mnist"), MNIST_ROOT, "test")
    for name in ("vae-mnist", get_card("vae-mnist").path):
        by_name = card_dataset(name, MNIST_ROOT, "test")
        assert len(by_name) == len(by_card) == 10_000
        assert torch.equal(by_name.batch(slice(0, 64)), by_card.batch(slice(0, 64)))
    with pytest.raises(TypeError, match="a model's card is model.card"):
        card_dataset(load_model(get_card("vae-mnist"), pretrained=False))


@pytest.mark.parametrize("name", MNIST_CARDS)
def test_predicted_digits_are_as_accurate_as_the_cards_cluster_accuracy(name, raw_mnist_test):
    card = get_card(name)
    model = vaezoo.load(name)
    labels = model.predict_label(model.preprocess(raw_mnist_test.data.unsqueeze(1)))
    accuracy = (labels == raw_mnist_test.targets).double().mean().item()
    assert accuracy == pytest.approx(card.metrics["cluster_accuracy"].value, abs=5e-5)  # the card keeps 4 digits
    assert sorted(card_labels(card)["discrete0"].category_to_label) == list(range(10))


# --- dtypes -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_float_images_of_another_dtype_are_converted_to_the_models(model, dtype):
    x = model.preprocess(digits(3).unsqueeze(1))
    expected = model.encode(x.to(dtype).to(torch.float32)).mode
    for call in public_calls(model).values():
        call(x.to(dtype))  # a raw torch error (mat1 and mat2 must have the same dtype) before
    assert torch.equal(model.encode(x.to(dtype)).mode, expected)
    assert model(x.to(dtype)).loss.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_a_model_loaded_in_another_dtype_takes_float32_images(dtype):
    model = vaezoo.load("jointvae-mnist", dtype=dtype)
    assert model.head.weight.dtype == dtype
    x = torch.rand(2, 1, 32, 32)  # float32, as a dataset or torch.rand gives them
    posterior = model.encode(x)
    assert posterior.mode.dtype == dtype and torch.isfinite(posterior.mode).all()
    assert model.reconstruct(x).dtype == dtype and model(x).loss.dtype == dtype
    assert model.preprocess(digits(1)[0]).dtype == dtype


@pytest.mark.parametrize("dtype", [torch.complex64, torch.int64, torch.float8_e4m3fn, "float17"])
def test_a_dtype_a_model_cannot_take_is_refused_in_one_line_before_anything_is_built(dtype, monkeypatch):
    built = []
    monkeypatch.setattr("vaezoo.assemble.model_context", lambda card: built.append(card))
    for call in (vaezoo.load, vaezoo.build_model):
        with pytest.raises(DtypeError) as caught:
            call("jointvae-mnist", dtype=dtype)
        message = str(caught.value)
        assert message == (f"dtype {dtype!r} cannot be a model's parameters' type; use one of torch.float32, "
                           f"torch.float64, torch.float16, torch.bfloat16 (or its name, 'float16')")
    assert built == []


@pytest.mark.parametrize("name, dtype", [("float16", torch.float16), ("torch.bfloat16", torch.bfloat16),
                                         ("bf16", torch.bfloat16), ("float64", torch.float64)])
def test_a_dtype_may_be_given_by_its_name(name, dtype):
    model = vaezoo.load("jointvae-mnist", dtype=name)
    assert {p.dtype for p in model.parameters()} == {dtype}


def test_a_model_tells_its_code_size_and_a_posterior_its_parts():
    model = vaezoo.load("jointvae-mnist")
    assert model.code_size == model.latent.code_size == 20
    assert repr(model.encode(torch.rand(2, 1, 32, 32))) == (
        "JointPosterior(batch=2, code_size=20, parts={'continuous': GaussianPosterior(batch=2, code_size=10), "
        "'discrete0': CategoricalPosterior(batch=2, code_size=10)})")


class Calls(torch.nn.Module):
    """A module whose forward is ``fn(model, *inputs)``: what torch.export exports of a model's method."""

    def __init__(self, model, fn):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, *inputs):
        return self.fn(self.model, *inputs)


def exported(module: torch.nn.Module, *inputs: torch.Tensor):
    """``module`` exported with torch.export, run on ``inputs``."""
    return torch.export.export(module, inputs).module()(*inputs)


def test_a_zoo_model_exports_with_torch_export_and_computes_what_it_computes_eagerly():
    """The input check's value test and the distributions' argument checks read values, which a traced program
    cannot branch on: neither runs under torch.export (or torch.compile)."""
    model = vaezoo.load("jointvae-mnist")
    reconstruct = Calls(model, lambda m, x: (m.reconstruct(x), m.encode(x).mode))
    x = torch.rand(4, 1, 32, 32)
    torch.testing.assert_close(exported(reconstruct, x), reconstruct(x))
    with pytest.raises(InputError, match=r"got values in \[-0\.9"):  # eagerly, the values are still checked
        model.encode(x * 2 - 1)
    z = model.encode(x).mode
    torch.testing.assert_close(exported(Calls(model, lambda m, z: m.decode(z)), z), model.decode(z))
    with pytest.raises(InputError, match="the decoder takes finite codes"):  # eagerly, the codes' values are checked
        model.decode(z * float("inf"))


def test_forward_exports_through_a_module_returning_its_tensors_as_the_docs_say():
    """forward's output holds the posterior, an object: the model itself does not export (docs/architecture.md says
    so and how to export it), a module returning the output's tensors does, and computes what forward computes."""
    model = vaezoo.load("jointvae-mnist")

    def tensors(m, x):
        out = m(x)
        return out.loss, out.output, out.z, out.terms, out.kl

    x = torch.rand(4, 1, 32, 32)
    torch.testing.assert_close(exported(Calls(model, tensors), x), tensors(model, x))
    with pytest.raises(RuntimeError, match="VAEOutput'> in output, which is not a known type"):
        torch.export.export(model, (x,))


def test_per_image_gradients_under_torch_func_are_each_images_own(model):
    """Per-image gradients with torch.func (vmap of grad) of a model in eval mode, the images checked once beforehand
    (checked=True: under vmap their values cannot be read): the categorical mode's F.one_hot checked its indices'
    values, which vmap of grad cannot, and stopped with 'vmap: It looks like you're ... data-dependent control
    flow'. (torch.func.grad imports torch._dynamo, seconds the first time in a process, as torch.export does.)"""
    x = torch.rand(2, 1, 32, 32, generator=torch.Generator().manual_seed(0))
    model.check_input(x)

    def loss(image):
        return model(image[None], checked=True).loss

    grads = torch.func.vmap(torch.func.grad(loss))(x)
    for image, grad in zip(x, grads):
        alone = image.clone().requires_grad_()
        torch.testing.assert_close(grad, torch.autograd.grad(loss(alone), alone)[0])
