"""Importing checkpoints of the original JointVAE code: ``vaezoo convert jointvae-original``.

The reference for every comparison is the original layer stack (jointvae/models.py of
github.com/Schlumberger/joint-vae) written out below with plain torch.nn, so that its
state dict has the original key layout and its outputs do not depend on the converter.
"""

from __future__ import annotations

import json
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from kit import ORIGINAL_JOINTVAE, OpensAFile, make_card, read_metadata, require_shared, write_toml
from torch import nn

import vaezoo
from vaezoo.assemble import build_model, data_info, load_dataset
from vaezoo.cli import main
from vaezoo.entries.catalog import get_card, parse_card
from vaezoo.entries.entry import load_state_dict
from vaezoo.errors import VaezooError
from vaezoo.plugins import registry
from vaezoo.store.checksums import sha256_of
from vaezoo.store.weights import load_weights
from vaezoo.testing import check_card

GEOMETRY = {"mnist": (1, 32), "fashion_mnist": (1, 32), "dsprites": (1, 64), "chairs": (1, 64), "celeba": (3, 64)}


def original_jointvae(channels: int, image_size: int, continuous: int, discrete: list[int]) -> nn.ModuleDict:
    """The original JointVAE's layers, keyed as in its state dicts; 64x64 adds a conv on each side."""

    def down(c_in, c_out):
        return [nn.Conv2d(c_in, c_out, 4, stride=2, padding=1), nn.ReLU()]

    def up(c_in, c_out):
        return [nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1), nn.ReLU()]

    big = image_size == 64
    layers = {
        "img_to_features": nn.Sequential(*down(channels, 32), *(down(32, 32) if big else []), *down(32, 64),
                                         *down(64, 64)),
        "features_to_hidden": nn.Sequential(nn.Linear(64 * 4 * 4, 256), nn.ReLU()),
        "latent_to_features": nn.Sequential(nn.Linear(continuous + sum(discrete), 256), nn.ReLU(),
                                            nn.Linear(256, 64 * 4 * 4), nn.ReLU()),
        "features_to_img": nn.Sequential(*(up(64, 64) if big else []), *up(64, 32), *up(32, 32),
                                         nn.ConvTranspose2d(32, channels, 4, stride=2, padding=1), nn.Sigmoid()),
    }
    if continuous:
        layers["fc_mean"] = nn.Linear(256, continuous)
        layers["fc_log_var"] = nn.Linear(256, continuous)
    if discrete:
        layers["fc_alphas"] = nn.ModuleList(nn.Linear(256, k) for k in discrete)
    return nn.ModuleDict(layers).eval()


@torch.no_grad()
def original_outputs(net: nn.ModuleDict, x: torch.Tensor) -> dict:
    """The original model in reconstruction mode: the Gaussian mean and the one-hot argmax are decoded."""
    hidden = net["features_to_hidden"](net["img_to_features"](x).flatten(1))
    out: dict = {"probs": [F.softmax(fc(hidden), dim=1) for fc in (net["fc_alphas"] if "fc_alphas" in net else [])]}
    code = []
    if "fc_mean" in net:
        out["mean"], out["log_var"] = net["fc_mean"](hidden), net["fc_log_var"](hidden)
        code.append(out["mean"])
    code += [F.one_hot(p.argmax(1), p.shape[1]).float() for p in out["probs"]]
    features = net["latent_to_features"](torch.cat(code, dim=1)).view(-1, 64, 4, 4)
    out["reconstruction"] = net["features_to_img"](features)
    return out


def assert_same_outputs(model, net: nn.ModuleDict, x: torch.Tensor) -> None:
    """The converted ``model`` encodes and reconstructs ``x`` as the original ``net`` does, to 1e-5."""
    expected = original_outputs(net, x)
    parts = model.encode(x).parts
    if "mean" in expected:
        torch.testing.assert_close(parts["continuous"].mean, expected["mean"], rtol=0, atol=1e-5)
        torch.testing.assert_close(parts["continuous"].logvar, expected["log_var"], rtol=0, atol=1e-5)
    assert model.discrete_parts == [f"discrete{i}" for i in range(len(expected["probs"]))]
    for name, probs in zip(model.discrete_parts, expected["probs"]):
        torch.testing.assert_close(parts[name].probs, probs, rtol=0, atol=1e-5)
    torch.testing.assert_close(model.reconstruct(x), expected["reconstruction"], rtol=0, atol=1e-5)


def write_checkpoint(path: Path, dataset: str, continuous: int, discrete: list[int], seed: int = 0) -> nn.ModuleDict:
    """Save a randomly initialised original model's state dict to ``path``; return the model."""
    torch.manual_seed(seed)
    net = original_jointvae(*GEOMETRY[dataset], continuous, discrete)
    torch.save(net.state_dict(), path)
    return net


def convert(path: Path, out: Path, dataset: str) -> Path:
    return registry("converter")["jointvae-original"](path, out, dataset=dataset)


def load_card(path: Path):
    """The model a converted card describes, with its weights, in eval mode (the zoo may hold the same name)."""
    card = parse_card(path)
    model = build_model(card)
    load_weights(model, load_state_dict(card), str(path))
    return model.eval()


@pytest.mark.slow
def test_original_mnist_checkpoint_keeps_its_accuracy_and_reconstructions(tmp_path, mnist_root, capsys):
    require_shared(ORIGINAL_JOINTVAE)
    args = ["convert", "jointvae-original", str(ORIGINAL_JOINTVAE), "--dataset", "mnist", "--out", str(tmp_path)]
    assert main(args) == 0
    card_path = Path(capsys.readouterr().out.strip())
    assert main(["eval", str(card_path), "--data-root", str(mnist_root), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["metrics"]
    print(f"cluster_accuracy of the converted original checkpoint: {results['cluster_accuracy']:.4%}")
    assert results["cluster_accuracy"] == pytest.approx(0.8873, abs=0.0005)

    model = load_card(card_path)
    shipped = vaezoo.load("jointvae-original-mnist")  # the zoo's entry is this conversion
    assert all(torch.equal(shipped.state_dict()[k], v) for k, v in model.state_dict().items())
    net = original_jointvae(1, 32, 10, [10])
    net.load_state_dict(torch.load(ORIGINAL_JOINTVAE, map_location="cpu", weights_only=True))
    x = load_dataset("mnist", mnist_root, "test", image_size=32).batch(slice(0, 1000))
    assert_same_outputs(model, net, x)


@pytest.mark.parametrize("dataset, continuous, discrete", [
    ("dsprites", 6, [3]),
    ("celeba", 32, [10]),
    ("chairs", 32, [2, 2, 2]),
    ("mnist", 4, [10, 5, 3]),
    ("mnist", 0, [10]),
    ("fashion_mnist", 10, []),
])
def test_converted_model_matches_the_original_layers(tmp_path, dataset, continuous, discrete):
    net = write_checkpoint(tmp_path / "model.pt", dataset, continuous, discrete)
    card_path = convert(tmp_path / "model.pt", tmp_path / "out", dataset)

    card = parse_card(card_path)
    channels, size = GEOMETRY[dataset]
    assert not {"channels", "image_size"} & set(card.model)  # the dataset knows them
    info = data_info(card)
    assert (info.channels, info.image_size) == (channels, size)
    assert (card.model["continuous"], card.model["discrete"]) == (continuous, discrete)
    assert card.license.startswith("unknown") and "commit" not in card.summary  # not a published checkpoint
    model = load_card(card_path)
    x = torch.rand(6, channels, size, size, generator=torch.Generator().manual_seed(1))
    assert_same_outputs(model, net, x)


RELEASES = {"mnist": "mnist", "fashion": "fashion_mnist", "dsprites": "dsprites", "chairs": "chairs",
            "celeba": "celeba"}


def published(release: str) -> Path:
    """The original code's released checkpoint ``release`` in ../shared; skips when it is absent (require_shared)."""
    path = ORIGINAL_JOINTVAE.parent / f"{release}.pt"
    require_shared(path)
    return path


@pytest.mark.parametrize("release", list(RELEASES))
def test_each_published_checkpoint_converts_with_its_recipe_licence_and_layers(tmp_path, release):
    path, dataset = published(release), RELEASES[release]
    specs = json.loads(path.with_name(f"{release}.specs.json").read_text())
    card_path = convert(path, tmp_path, dataset)

    card = parse_card(card_path)
    assert (card.model["continuous"], card.model["discrete"]) == (specs["latent_spec"]["cont"],
                                                                 specs["latent_spec"]["disc"])
    assert card.model["capacity"] == {"continuous": specs["cont_capacity"], "discrete": specs["disc_capacity"]}
    assert (card.train.epochs, card.train.batch_size, card.train.optimizer.lr) == (
        specs["epochs"][0], specs["batch_size"], specs["lr"][0])
    assert specs["dataset"] == dataset == card.train.data.name
    licence = path.with_name("LICENSE").read_text()
    copyright_line = next(line for line in licence.splitlines() if line.startswith("Copyright"))
    assert licence.startswith("MIT License") and card.license == f"MIT ({copyright_line})"
    assert copyright_line in card.summary and "commit 80fa464" in card.summary
    assert f"trained_models/{release}/model.pt" in card.summary and "Emilien Dupont" in card.summary

    net = original_jointvae(*GEOMETRY[dataset], specs["latent_spec"]["cont"], specs["latent_spec"]["disc"])
    net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    channels, size = GEOMETRY[dataset]
    x = torch.rand(8, channels, size, size, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    # in float64: trained weights make float32's summation order show at 1e-5 in the decoded pixels
    assert_same_outputs(load_card(card_path).double(), net.double(), x)


@pytest.mark.parametrize("release", list(RELEASES))
def test_the_zoo_entry_of_each_published_checkpoint_is_its_conversion(tmp_path, release):
    card_path = convert(published(release), tmp_path, RELEASES[release])
    name = f"jointvae-original-{release}"
    entry = check_card(name)
    converted = load_card(card_path).state_dict()
    assert entry.state_dict().keys() == converted.keys()
    assert all(torch.equal(entry.state_dict()[k], v) for k, v in converted.items())
    shipped, fresh = get_card(name), parse_card(card_path)
    # eval --write adds metrics, python -m vaezoo_jointvae.labels --write the labels; the summary says where; the
    # version is the one that wrote each
    made_here = {"name", "summary", "weights", "metrics", "sections", "vaezoo_version"}
    assert shipped.model_dump(exclude=made_here) == fresh.model_dump(exclude=made_here)
    assert shipped.summary.startswith(fresh.summary)
    if not shipped.metrics:
        assert "not measured here" in shipped.summary and f"docs/zoo/{name}.md says how" in shipped.summary


def test_a_published_checkpoint_is_refused_with_another_dataset(tmp_path, capsys):
    path = published("fashion")
    out = tmp_path / "out"
    assert main(["convert", "jointvae-original", str(path), "--dataset", "mnist", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == (f"error: {path} is the original code's released fashion model, trained on fashion_mnist, not "
                   f"mnist; pass --dataset fashion_mnist\n")
    assert not out.exists()


def test_cli_writes_weights_and_a_card_without_metrics(tmp_path, capsys):
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    out = tmp_path / "out"
    assert main(["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist",
                 "--out", str(out)]) == 0
    card_path = Path(capsys.readouterr().out.strip())
    assert card_path == out / "jointvae-original-mnist-converted.toml"  # the zoo's entry is jointvae-original-mnist
    card = parse_card(card_path)
    weights = out / "jointvae-original-mnist-converted.safetensors"
    assert (card.weights.file, card.weights.sha256, card.weights.size) == (
        weights.name, sha256_of(weights), weights.stat().st_size)
    assert card.metrics == {}
    assert card.eval_metrics == ["cluster_accuracy"]
    assert card.model["capacity"] == {"continuous": [0.0, 5.0, 25000, 30.0], "discrete": [0.0, 5.0, 25000, 30.0]}
    assert (card.train.epochs, card.train.batch_size, card.train.optimizer.lr) == (100, 64, 5e-4)
    assert card.parameters == sum(t.numel() for t in torch.load(tmp_path / "model.pt", weights_only=True).values())
    assert json.loads(read_metadata(weights)["trained"])["recipe"]["architecture"] == "jointvae"


def test_cli_names_the_card_and_refuses_a_zoo_name(tmp_path, capsys):
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    args = ["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist"]
    assert main([*args, "--out", str(tmp_path / "mine"), "--name", "my-jointvae"]) == 0
    card_path = Path(capsys.readouterr().out.strip())
    assert card_path == tmp_path / "mine" / "my-jointvae.toml"
    assert parse_card(card_path).name == "my-jointvae" and (tmp_path / "mine" / "my-jointvae.safetensors").is_file()
    assert vaezoo.load(card_path).card.name == "my-jointvae"
    for name, message, code in [("jointvae-original-mnist", "is the name of a built-in zoo entry", 1),
                                ("My Model", "is not a card name", 2), ("", "is not a card name", 2)]:
        assert main([*args, "--out", str(tmp_path / "refused"), "--name", name]) == code
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"error: --name '{name}' {message}")
        assert err.count("\n") == 1 and "--name" in err
        assert not (tmp_path / "refused").exists()


def test_cli_refuses_an_unknown_dataset_in_one_line(tmp_path, capsys):
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    out = tmp_path / "out"
    assert main(["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "fashion",
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "'fashion'" in err and "fashion_mnist" in err
    assert not out.exists()


def test_cli_says_an_out_folder_of_links_in_a_loop_is_one_not_that_its_target_does_not_exist(tmp_path, capsys):
    """``ln -s loop2 loop1; ln -s loop1 loop2``: ``--out loop1`` said that loop1 links to loop2, which does not
    exist."""
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    for out in (tmp_path / "loop1", tmp_path / "loop1" / "sub"):
        assert main(["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist",
                     "--out", str(out)]) == 1
        assert capsys.readouterr().err == (f"error: cannot write in --out {out}: {tmp_path / 'loop1'} is a symbolic "
                                           f"link to loop2, and the links from there lead back in a loop; choose "
                                           f"another --out\n")


def test_cli_says_an_empty_checkpoint_is_empty(tmp_path, capsys):
    """A 0-byte ``.pt`` file was refused as not a state dict torch.load reads (EOFError)."""
    (tmp_path / "empty.pt").touch()
    out = tmp_path / "out"
    assert main(["convert", "jointvae-original", str(tmp_path / "empty.pt"), "--dataset", "mnist",
                 "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"error: {tmp_path / 'empty.pt'} is not a checkpoint torch.save wrote: it is "
                                       f"an empty file (0 bytes); give the file the original code saved with "
                                       f"torch.save(model.state_dict(), path)\n")
    assert not out.exists()


@pytest.mark.slow
def test_cli_refuses_a_pickle_that_is_not_weights_only(tmp_path):
    marker = tmp_path / "unpickled"
    state = write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10]).state_dict()
    torch.save({**state, "trap": OpensAFile(marker)}, tmp_path / "model.pt")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "vaezoo", "convert", "jointvae-original", str(tmp_path / "model.pt"),
                           "--dataset", "mnist", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "weights_only" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()
    assert not out.exists()


def test_a_vaezoo_training_checkpoint_is_named_as_one_with_the_commands_that_take_it(data_plugin, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", str(write_toml(tmp_path / "toy.toml", make_card("toy"))), "--out", str(run)]) == 0
    capsys.readouterr()
    checkpoint, out = run / "checkpoint.pt", tmp_path / "out"
    assert main(["convert", "jointvae-original", str(checkpoint), "--dataset", "mnist", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {checkpoint} is already a vaezoo training checkpoint (card 'toyvae-bars', step ")
    assert err.count("\n") == 1 and f"'vaezoo eval CARD --checkpoint {checkpoint}'" in err
    assert "'vaezoo train CARD -o OUT --resume'" in err and not out.exists()


@pytest.mark.parametrize("contents", ["pickle-protocol-4-that-runs-code", "random-bytes"])
def test_cli_refuses_a_foreign_pickle_in_one_line_with_its_reason_and_no_torch_warning(tmp_path, contents):
    marker, path = tmp_path / "unpickled", tmp_path / "evil.pkl"
    if contents == "random-bytes":
        path.write_bytes(random.Random(0).randbytes(5000))
    else:
        path.write_bytes(pickle.dumps(OpensAFile(marker), protocol=4))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "vaezoo", "convert", "jointvae-original", str(path),
                           "--dataset", "mnist", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr  # no warning lines
    assert re.search(r"reads \([^)\s][^)]*\); vaezoo never unpickles", done.stderr), done.stderr  # a reason is given
    assert not marker.exists()
    assert not out.exists()


def _extra_key(state):
    return {**state, "fc_extra.weight": torch.zeros(3)}


def _without_hidden_bias(state):
    return {k: v for k, v in state.items() if k != "features_to_hidden.0.bias"}


def _without_heads(state):
    return {k: v for k, v in state.items() if not k.startswith(("fc_mean", "fc_log_var", "fc_alphas"))}


def _scalar_mean(state):
    return {**state, "fc_mean.weight": torch.tensor(1.0)}


def _nested(state):
    return {"model": state, "step": torch.tensor(3)}


def _without(key):
    return lambda state: {k: v for k, v in state.items() if k != key}


def _rows(count, *heads):
    return lambda state: {**state, **{f"{h}.{p}": state[f"{h}.{p}"][:count] for h in heads for p in ("weight", "bias")}}


def _nan(state):
    return {**state, "features_to_hidden.0.bias": torch.full_like(state["features_to_hidden.0.bias"], float("nan"))}


@pytest.mark.parametrize("corrupt, message", [
    (_extra_key, "unexpected keys ['fc_extra.weight']"),
    (_without_hidden_bias, "missing keys ['encoder.hidden.0.bias']"),
    (_without_heads, "neither fc_mean nor fc_alphas.0"),
    (_scalar_mean, "fc_mean.weight has shape (); a linear layer's weight is 2-D"),
    (_nested, "not a state dict of tensors"),
    # these were read as another latent layout, and refused with unrelated keys and "check --dataset"
    (_without("fc_mean.weight"), "lacks the latent heads ['fc_mean.weight']"),
    (_without("fc_alphas.0.weight"), "lacks the latent heads ['fc_alphas.0.weight']"),
    # these were blamed on the card ("section 'model' does not fit") or on --dataset, not on the checkpoint's heads
    (_rows(1, "fc_alphas.0"), "model.pt: categorical heads of fewer than 2 rows (fc_alphas.0: 1); a categorical head"),
    (_rows(0, "fc_alphas.0"), "(fc_alphas.0: 0)"),
    (_rows(0, "fc_mean", "fc_log_var"), "model.pt: fc_mean has 0 rows; a continuous head has one row per dimension"),
])
def test_state_dicts_that_do_not_fit_are_refused(tmp_path, corrupt, message):
    state = write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10]).state_dict()
    torch.save(corrupt(state), tmp_path / "model.pt")
    with pytest.raises(VaezooError, match=re.escape(message)):
        convert(tmp_path / "model.pt", tmp_path / "out", "mnist")
    assert not (tmp_path / "out").exists()


def test_values_no_dataset_would_mend_are_refused_without_the_hint_to_check_it(tmp_path):
    state = write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10]).state_dict()
    torch.save(_nan(state), tmp_path / "model.pt")
    with pytest.raises(VaezooError) as caught:
        convert(tmp_path / "model.pt", tmp_path / "out", "mnist")
    assert "NaN" in str(caught.value) and "--dataset" not in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_wrong_dataset_geometry_names_the_missing_layers(tmp_path):
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    with pytest.raises(VaezooError, match=r"missing keys \['decoder.features.6.bias'.*check --dataset"):
        convert(tmp_path / "model.pt", tmp_path / "out", "dsprites")


def test_a_conversion_stopped_before_its_card_leaves_no_weights_and_runs_again(tmp_path, capsys, monkeypatch):
    """Ctrl-C between the weights and the card left the weights alone, and the rerun into that --out was
    refused as 'the files of another run'."""
    import vaezoo.entries.entry as entry

    write_checkpoint(tmp_path / "model.pt", "mnist", 4, [10])
    args = ["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist", "--out",
            str(tmp_path / "out")]

    def interrupted(*_):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(entry, "sha256_of", interrupted)  # the weights are written, the card not yet
        assert main(args) == 130
    assert not list((tmp_path / "out").glob("*.*"))  # neither weights nor card, nor their temporary files
    capsys.readouterr()
    assert main(args) == 0
    assert parse_card(Path(capsys.readouterr().out.strip())).name == "jointvae-original-mnist-converted"


def _convert_killed_at_rename(number: int, checkpoint: Path, out: Path) -> None:
    """Run ``vaezoo convert`` in a process killed (SIGKILL) at its ``number``-th rename: 1 puts the weights in place,
    2 the card."""
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal\n"
        "from vaezoo.cli import main\n"
        "real, renames = os.replace, []\n"
        "def replace(*args):\n"
        "    renames.append(args)\n"
        f"    if len(renames) == {number}:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(*args)\n"
        "os.replace = replace\n"
        f"main(['convert', 'jointvae-original', {str(checkpoint)!r}, '--dataset', 'mnist', '--out', {str(out)!r}])\n"
    )], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr


def test_a_convert_killed_before_its_renames_leaves_temporary_files_the_next_one_removes(tmp_path, capsys):
    """Each kill left the weights' temporary file (2.7 MB for MNIST) and the card's in --out, and the convert run
    again there kept them."""
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    out = tmp_path / "out"
    _convert_killed_at_rename(1, tmp_path / "model.pt", out)
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")]  # what the killed convert left
    assert main(["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist", "--out",
                 str(out)]) == 0
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []
    assert vaezoo.load(out) is not None


def test_a_convert_killed_between_its_weights_and_its_card_is_named_so_by_the_next(tmp_path, capsys):
    """The next convert said the folder held 'the files of another run'."""
    write_checkpoint(tmp_path / "model.pt", "mnist", 10, [10])
    out = tmp_path / "out"
    _convert_killed_at_rename(2, tmp_path / "model.pt", out)
    capsys.readouterr()
    assert main(["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist", "--out",
                 str(out)]) == 1
    weights = "jointvae-original-mnist-converted.safetensors"
    assert capsys.readouterr().err == (
        f"error: --out {out} holds {weights} without its card jointvae-original-mnist-converted.toml (a run stopped "
        f"between writing the two, or another file of that name); remove that file, or choose another --out\n")
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [weights]
    (out / weights).unlink()  # as the message says
    assert main(["convert", "jointvae-original", str(tmp_path / "model.pt"), "--dataset", "mnist", "--out",
                 str(out)]) == 0
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []
