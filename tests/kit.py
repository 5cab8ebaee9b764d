"""The test kit: tiny cards, TOML files, fake plugins, a fault-injecting file server and the command line.

Everything is small on purpose: the card presets build models of a few thousand parameters, the test
plugin's datasets are synthetic and generated in milliseconds, and plugins are installed as
``*.dist-info`` folders on a temporary path, which vaezoo finds exactly as it finds a pip-installed
plugin, in the test process and in the processes a test starts. The fixtures built on this kit
(``site``, ``data_plugin``, ``cards_dir``, ``server``) are in tests/conftest.py.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tomli_w
from safetensors.torch import load_file

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared"
MNIST_ROOT = SHARED / "datasets"
ORIGINAL_JOINTVAE = SHARED / "reference" / "jointvae-original" / "mnist.pt"
REQUIRE_SHARED = "VAEZOO_REQUIRE_SHARED"
"""Set to 1 (as .ci/run does), a test that reads a ../shared path this checkout lacks fails instead of skipping."""


def require_shared(*paths: Path) -> None:
    """Skip the test when one of ``paths`` (in ../shared) is absent, or fail it when ``VAEZOO_REQUIRE_SHARED=1``."""
    import pytest

    missing = [str(path) for path in paths if not path.exists()]
    if not missing:
        return
    message = f"{', '.join(missing)} absent here (../shared beside the repository)"
    if os.environ.get(REQUIRE_SHARED) == "1":
        pytest.fail(f"{message}; {REQUIRE_SHARED}=1 requires it", pytrace=False)
    pytest.skip(message)

# --- cards ------------------------------------------------------------------------------------------------------

# The generic `vae` architecture composed from registered parts: a joint latent with total correlation on
# its continuous part and an annealed capacity on its categorical part. Small enough for a test batch.
JOINT_TC_CAPACITY: dict[str, Any] = {
    "image_size": 16,
    "channels": 1,
    "latent": {"type": "joint", "parts": [
        {"type": "gaussian", "name": "cont", "dim": 3},
        {"type": "gumbel_categorical", "name": "cat", "categories": 4, "temperature": 0.67},
    ]},
    "regularizers": [
        {"type": "total_correlation", "part": "cont", "dataset_size": 1000, "beta": 6.0, "sampling": "mws"},
        {"type": "capacity", "groups": [
            {"name": "discrete", "parts": ["cat"], "min": 0.0, "max": 5.0, "iterations": 100, "gamma": 30.0},
        ]},
    ],
    "encoder": {"type": "conv_encoder", "hidden": 32},
    "decoder": {"type": "conv_decoder", "hidden": 32},
}

# A Gaussian latent with beta-weighted KL and stratified TC, MLP nets and a Gaussian likelihood on RGB.
GAUSSIAN_MLP_RGB: dict[str, Any] = {
    "image_size": 16,
    "channels": 3,
    "latent": {"type": "gaussian", "dim": 4},
    "regularizers": [
        {"type": "beta", "beta": 4.0},
        {"type": "total_correlation", "dataset_size": 50, "sampling": "mss"},
    ],
    "encoder": {"type": "mlp_encoder", "hidden": [24, 16]},
    "decoder": {"type": "mlp_decoder", "hidden": [16, 24]},
    "likelihood": "gaussian",
}

# Example arguments of the `vae` architecture, by test id.
VAE_SPECS: dict[str, dict[str, Any]] = {"joint-tc-capacity": JOINT_TC_CAPACITY, "gaussian-mlp-rgb": GAUSSIAN_MLP_RGB}

TOY_DATASET = "toy_bars"  # 16x16 bars and squares with labels, from the test plugin
TINY_DATASET = "tiny_blobs"  # 64 random 4x4 binary images, from the test plugin
TINY_MODEL_TABLE = """\
[model]
image_size = 4
channels = 1
regularizers = [{ type = "beta", beta = 1.0 }]
latent = { type = "gaussian", dim = 2 }
encoder = { type = "mlp_encoder", hidden = [8] }
decoder = { type = "mlp_decoder", hidden = [8] }
"""
"""The ``[model]`` table of a card of :data:`TINY_DATASET`, as a hand-written card file holds it."""


def _mnist_card(name: str | None, model: Mapping[str, Any] | None) -> dict[str, Any]:
    # The spec's input geometry and training-set size are the dataset's: an MNIST resized to its image size.
    name = name or "toy-mnist"
    model = copy.deepcopy(dict(model if model is not None else JOINT_TC_CAPACITY))
    options = {"image_size": model.pop("image_size")} if "image_size" in model else {}
    model.pop("channels", None)
    for spec in model.get("regularizers", []):
        spec.pop("dataset_size", None)
    return {
        "name": name, "architecture": "vae", "summary": f"test card {name}", "dataset": "mnist",
        "paper": "none (a test fixture)", "model": model,
        "train": {"epochs": 1, "batch_size": 8, "data": {"name": "mnist", "options": options},
                  "optimizer": {"name": "Adam", "lr": 1e-3}},
    }


def _toy_card(name: str | None, model: Mapping[str, Any] | None) -> dict[str, Any]:
    # 96 images, 32 a batch: 3 steps an epoch, 12 steps, a checkpoint every 4.
    return {
        "name": name or "toyvae-bars", "architecture": "jointvae",
        "summary": "A tiny JointVAE for tests of the training engine.", "dataset": TOY_DATASET,
        "paper": "Dupont (2018), Learning Disentangled Joint Continuous and Discrete Representations. "
                 "https://arxiv.org/abs/1804.00104",
        "eval_metrics": ["cluster_accuracy"],
        "model": dict(model if model is not None else {
            "image_size": 16, "channels": 1, "continuous": 2, "discrete": [3], "hidden": 32,
            "capacity": {"continuous": [0.0, 5.0, 20, 30.0], "discrete": [0.0, 1.0, 20, 30.0]}}),
        "train": {"epochs": 4, "batch_size": 32, "seed": 0, "checkpoint_every": 4,
                  "data": {"name": TOY_DATASET, "options": {"size": 96}},
                  "optimizer": {"name": "Adam", "lr": 1e-3}},
    }


def _tiny_card(name: str | None, model: Mapping[str, Any] | None) -> dict[str, Any]:
    # 64 images, 8 a batch: 8 steps an epoch, 16 steps, a checkpoint every 4.
    return {
        "name": name or "tiny-blobs", "architecture": "vae", "summary": "A tiny VAE for fault tests.",
        "dataset": TINY_DATASET,
        "paper": "Kingma & Welling (2014), Auto-Encoding Variational Bayes. https://arxiv.org/abs/1312.6114",
        "model": dict(model if model is not None else {
            "image_size": 4, "channels": 1, "latent": {"type": "gaussian", "dim": 2},
            "encoder": {"type": "mlp_encoder", "hidden": [8]}, "decoder": {"type": "mlp_decoder", "hidden": [8]},
            "regularizers": [{"type": "beta", "beta": 1.0}]}),
        "train": {"data": {"name": TINY_DATASET}, "epochs": 2, "batch_size": 8, "seed": 0, "checkpoint_every": 4,
                  "optimizer": {"name": "Adam", "lr": 0.01}},
    }


PRESETS: dict[str, Callable[[str | None, Mapping[str, Any] | None], dict[str, Any]]] = {
    "mnist": _mnist_card,  # the `vae` architecture on MNIST at 16x16; needs MNIST only to train or evaluate
    "toy": _toy_card,  # a JointVAE on TOY_DATASET, for the training engine
    "tiny": _tiny_card,  # a 4x4 MLP VAE on TINY_DATASET, for fault tests
}


def make_card(preset: str = "mnist", name: str | None = None, *, model: Mapping[str, Any] | None = None,
              train: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A valid card, as a plain dict, from one of the :data:`PRESETS`.

    Args:
        preset: "mnist", "toy" or "tiny".
        name: the card's name; default the preset's.
        model: the model table instead of the preset's; for "mnist" a ``vae`` spec as in :data:`VAE_SPECS`,
            whose ``image_size`` becomes the dataset's option and whose ``channels`` and ``dataset_size`` go
            (the dataset has them).
        train: keys of the recipe to replace (e.g. ``{"epochs": 1}``).
        fields: top-level keys to replace or add (e.g. ``weights``, ``dataset``, ``metrics``).

    Returns:
        The card, which :func:`write_toml` writes and ``vaezoo.entries.schema.Card.model_validate`` accepts.
    """
    card = {"license": "MIT", "vaezoo_version": "0.1.0", **PRESETS[preset](name, model)}
    card["train"].update(train or {})
    card.update(fields)
    return card


def write_toml(path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as TOML to ``path`` (its folder made if need be) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def write_card(directory: Path, card: Mapping[str, Any]) -> Path:
    """Write ``card`` as ``directory/NAME.toml`` and return its path."""
    return write_toml(directory / f"{card['name']}.toml", card)


def weights_entry(path: Path, file: str | None = None, url: str | None = None) -> dict[str, Any]:
    """A card's ``weights`` table for the file at ``path``: served at ``url``, else at ``file`` beside the card
    (default its own name)."""
    data = path.read_bytes()
    source = {"url": url} if url else {"file": file or path.name}
    return {**source, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def save_model_weights(path: Path, card: Mapping[str, Any], seed: int = 0,
                       edit: Callable[[dict], None] | None = None) -> Path:
    """Save freshly initialised weights of ``card``'s model as safetensors at ``path``.

    Args:
        path: where to save them.
        card: the card (a dict) whose model is built.
        seed: seeds the initialisation.
        edit: called on the state dict before it is saved, to rename or change tensors in place.

    Returns:
        ``path``.
    """
    import torch

    from vaezoo.assemble import build_model
    from vaezoo.entries.schema import Card
    from vaezoo.store.weights import save_weights

    torch.manual_seed(seed)
    state = {k: v.detach().clone() for k, v in build_model(Card.model_validate(card)).state_dict().items()}
    if edit is not None:
        edit(state)
    save_weights(state, path, metadata={"name": card["name"]})
    return path


def write_entry(directory: Path, card: Mapping[str, Any], seed: int = 0, url: str | None = None,
                stem: str | None = None) -> tuple[Path, dict, Path]:
    """A zoo entry made inside the tests: ``card`` with random safetensors weights, side by side.

    Args:
        directory: where the card and its weights go.
        card: the card (a dict); its ``weights`` table is made here.
        seed: seeds the weights.
        url: point the card at this URL (to serve the weights file's bytes there) instead of the file beside it.
        stem: the two files' name without suffix; default the card's name.

    Returns:
        ``(card_path, state_dict, weights_path)``.
    """
    stem = stem or card["name"]
    weights = directory / f"{stem}.safetensors"
    directory.mkdir(parents=True, exist_ok=True)
    save_model_weights(weights, card, seed)
    state = load_file(weights)
    path = write_toml(directory / f"{stem}.toml", {**card, "weights": weights_entry(weights, url=url)})
    return path, state, weights


# --- plugins ----------------------------------------------------------------------------------------------------

DATA_PLUGIN = f'''
"""The test plugin: the {TOY_DATASET!r} and {TINY_DATASET!r} datasets, the 'nan_after' and 'inf_from' regularizers.

Like any plugin, it keeps its top level light: torch is imported inside the hooks.
"""
import vaezoo


def toy_bars(split="train", size=96, nan=False):
    """``size`` 16x16 images with labels 0 (horizontal bar), 1 (vertical bar), 2 (square); NaN when ``nan``."""
    import torch
    from vaezoo.data import ImageDataset

    g = torch.Generator().manual_seed({{"train": 0, "test": 1}}[split])
    labels = torch.arange(size) % 3
    images = torch.zeros(size, 1, 16, 16, dtype=torch.uint8)
    for i, (label, at) in enumerate(zip(labels.tolist(), torch.randint(2, 12, (size,), generator=g).tolist())):
        if label == 0:
            images[i, 0, at:at + 3, :] = 1
        elif label == 1:
            images[i, 0, :, at:at + 3] = 1
        else:
            images[i, 0, at - 2:at + 3, at - 2:at + 3] = 1
    images = images ^ (torch.rand(images.shape, generator=g) < 0.03).to(torch.uint8)
    if nan:
        return ImageDataset(torch.full(images.shape, float("nan")), scale=1.0, labels=labels)
    return ImageDataset(images, scale=1.0, labels=labels)


def tiny_blobs(split="train", nan=False, grey=False):
    """64 random binary 4x4 images (grey levels 0-255 when ``grey``); NaN pixels everywhere when ``nan``."""
    import torch
    from vaezoo.data import ImageDataset

    if nan:
        return ImageDataset(torch.full((64, 1, 4, 4), float("nan")), scale=1.0)
    g = torch.Generator().manual_seed(0 if split == "train" else 1)
    if grey:
        return ImageDataset(torch.randint(0, 256, (64, 1, 4, 4), generator=g, dtype=torch.uint8), scale=255.0)
    return ImageDataset((torch.rand(64, 1, 4, 4, generator=g) > 0.5).to(torch.uint8), scale=1.0)


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    from vaezoo.data import DataInfo, Dataset

    class ToyBars(Dataset):
        def info(self, split="train", size=96, nan=False):
            return DataInfo(size=size, image_size=16, channels=1)

        def load(self, root=None, split="train", size=96, nan=False):
            return toy_bars(split, size, nan)

    class TinyBlobs(Dataset):
        def info(self, split="train", nan=False, grey=False):
            return DataInfo(size=64, image_size=4, channels=1)

        def load(self, root=None, split="train", nan=False, grey=False):
            return tiny_blobs(split, nan, grey)

    register({TOY_DATASET!r}, ToyBars())
    register({TINY_DATASET!r}, TinyBlobs())


@vaezoo.hookimpl
def vaezoo_register_regularizers(register):
    import torch
    from vaezoo.regularizers import Regularizer

    class NanAfter(Regularizer):
        """A loss term that is NaN from step ``at`` on: a run that diverges on cue."""

        def __init__(self, at: int):
            super().__init__()
            self.at = at

        def forward(self, posterior, z, step):
            return {{"nan_after": torch.tensor(float("nan") if step >= self.at else 0.0)}}

    class InfFrom(Regularizer):
        """A loss term that is inf from the step its buffer ``start`` holds (none unless set): a model that
        diverges on cue, one member of an ensemble alone when only that member's buffer is set."""

        def __init__(self):
            super().__init__()
            self.register_buffer("start", torch.tensor(torch.iinfo(torch.long).max))

        def forward(self, posterior, z, step):
            return {{"inf_from": torch.where(self.start <= step, float("inf"), 0.0)}}

    register("nan_after", NanAfter)
    register("inf_from", InfFrom)
'''


def install_plugin(site: Path, entry_name: str, source: str, version: str = "1.0") -> str:
    """Install ``source`` as a plugin the way pip would: a module and a dist-info with its ``vaezoo`` entry point.

    vaezoo finds it where ``site`` is on ``sys.path`` (the ``site`` fixture puts it there and on
    ``PYTHONPATH``; :func:`child_env` puts another folder on a child's). Plugins are reloaded.

    Args:
        site: the folder to install into.
        entry_name: the plugin's entry-point name.
        source: the module's source (dedented).
        version: the distribution's version.

    Returns:
        The plugin's module (and distribution) name, ``fake_ENTRY_NAME_<random>``: unique, so that ``sys.modules``
        never serves a stale copy.
    """
    from vaezoo import plugins

    module = f"fake_{entry_name}_{uuid.uuid4().hex[:8]}"
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[vaezoo]\n{entry_name} = {module}\n", encoding="utf-8")
    plugins.reset()
    return module


def install_package(site: Path, package: Path, entry_name: str, version: str = "0.1.0") -> None:
    """Install the package folder ``package`` (its modules and data files) into ``site`` the way pip would, with
    a dist-info whose ``vaezoo`` entry point ``entry_name`` is the package and whose RECORD lists its files;
    plugins are reloaded."""
    from vaezoo import plugins

    shutil.copytree(package, site / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"{package.name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.name}\nVersion: {version}\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[vaezoo]\n{entry_name} = {package.name}\n", encoding="utf-8")
    files = [p.relative_to(site).as_posix() for p in sorted((site / package.name).rglob("*")) if p.is_file()]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in [*files, f"{info.name}/METADATA"]), encoding="utf-8")
    plugins.reset()


# --- a fault-injecting HTTP server ------------------------------------------------------------------------------

@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """Answer HTTP with ``handler`` on 127.0.0.1, in a thread, for the ``with`` block; yields the port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@dataclass
class FileServer:
    """What an HTTP file server serves (``files``: path -> bytes), the faults it injects and what it saw.

    Serve it with :func:`serve_files` (the ``server`` fixture does).

    Attributes:
        delay: seconds to wait before answering a GET.
        cut_after: close the connection after this many bytes of a body (the header promises all of them).
        cut_times: how many GETs are cut before the server starts sending whole files.
        stall: instead of closing at ``cut_after``, pause this many seconds there, then send the rest.
        framing: how the body's end is told: "length" (Content-Length), "close" (no length: the connection
            closes at the end) or "chunked" (Transfer-Encoding: chunked).
        endless: after the body, keep sending zero bytes until the client hangs up (a body with no end).
        trickle: send the body one byte at a time, this many seconds apart.
        headers: extra response headers (e.g. Content-Encoding); a Content-Length here replaces the true one.
        redirects: path -> Location answered with 302 instead of a body.
        gets: GETs per path.
        request_headers: the headers of the last GET of each path.
        sent: body bytes written per path (what the client could have read).
        port: the port it listens on, once served.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    delay: float = 0.0
    cut_after: int | None = None
    cut_times: int = 10**9
    stall: float | None = None
    framing: str = "length"
    endless: bool = False
    trickle: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    gets: dict[str, int] = field(default_factory=dict)
    request_headers: dict[str, dict[str, str]] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        """The URL of ``path`` on this server."""
        return f"http://127.0.0.1:{self.port}{path}"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler answering as this server."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server.lock:
                    count = server.gets[self.path] = server.gets.get(self.path, 0) + 1
                    server.request_headers[self.path] = dict(self.headers.items())
                if self.path in server.redirects:
                    self.send_response(302)
                    self.send_header("Location", server.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                try:
                    time.sleep(server.delay)
                    self.send_response(200)
                    if server.framing == "length" and "Content-Length" not in server.headers:
                        self.send_header("Content-Length", str(len(body)))
                    elif server.framing == "chunked":
                        self.send_header("Transfer-Encoding", "chunked")
                    for name, value in server.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if server.cut_after is not None and count <= server.cut_times:
                        self.send_body(body[: server.cut_after])
                        if server.stall is None:
                            self.close_connection = True
                            return
                        time.sleep(server.stall)
                        body = body[server.cut_after:]
                    self.send_body(body)
                    while server.endless:
                        self.send_body(bytes(1 << 16))
                    if server.framing == "chunked":
                        self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):  # the client gave up, as a timeout test wants
                    pass
                self.close_connection = True

            def send_body(self, data: bytes) -> None:
                """Write ``data`` in the response's framing, a byte at a time when trickling."""
                pieces = [data[i:i + 1] for i in range(len(data))] if server.trickle else [data]
                for piece in pieces:
                    if server.framing == "chunked":
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    else:
                        self.wfile.write(piece)
                    self.wfile.flush()
                    with server.lock:
                        server.sent[self.path] = server.sent.get(self.path, 0) + len(piece)
                    if server.trickle:
                        time.sleep(server.trickle)

            def log_message(self, *args) -> None:
                pass

        return Handler


@contextmanager
def serve_files(server: FileServer) -> Iterator[FileServer]:
    """Serve ``server`` on 127.0.0.1 for the ``with`` block."""
    with serving(server.handler()) as port:
        server.port = port
        yield server


def serve_entry(server: FileServer, path: str, directory: Path, card: Mapping[str, Any],
                stem: str | None = None) -> tuple[Path, dict]:
    """Write ``card`` with random weights into ``directory``, pointing at ``path`` on ``server``, which alone has them.

    Returns:
        ``(card_path, state_dict)``.
    """
    card_path, state, weights = write_entry(directory, card, url=server.url(path), stem=stem)
    server.files[path] = weights.read_bytes()
    weights.unlink()
    return card_path, state


# --- filesystem faults ------------------------------------------------------------------------------------------
# The tests run as root, whom permission bits do not stop, and no test may fill a real disk: these hooks make
# the system calls themselves fail, for paths under one folder only, as a read-only or full disk would.

def refuse_writes(monkeypatch, folder: Path, error: int) -> None:
    """Make creating, opening for writing, removing or making a folder under ``folder`` fail with errno ``error``."""
    real_open, real_mkdir, real_unlink = os.open, os.mkdir, os.unlink
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def refused(path) -> bool:
        return Path(os.path.abspath(path)).is_relative_to(folder)

    def fail(path):
        raise OSError(error, os.strerror(error), str(path))

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        if flags & writing and refused(path):
            fail(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    def mkdir(path, mode=0o777, *, dir_fd=None):
        if refused(path) and not os.path.isdir(path):  # an existing folder answers EEXIST first, as on Linux
            fail(path)
        return real_mkdir(path, mode, dir_fd=dir_fd)

    def unlink(path, *, dir_fd=None):
        if refused(path):
            fail(path)
        return real_unlink(path, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "unlink", unlink)


def fill_disk(monkeypatch, folder: Path, error: int, room: int) -> None:
    """Let files opened under ``folder`` take ``room`` bytes in all; a write past that fails with errno ``error``."""
    real_open, real_write = os.open, os.write
    ours: set[int] = set()
    used = 0

    def open_(path, flags, mode=0o777, *, dir_fd=None):
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if Path(os.path.abspath(path)).is_relative_to(folder):
            ours.add(fd)
        else:
            ours.discard(fd)  # a descriptor number reused for another file
        return fd

    def write(fd, data):
        nonlocal used
        if fd in ours:
            if used + len(data) > room:
                raise OSError(error, os.strerror(error))
            used += len(data)
        return real_write(fd, data)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "write", write)


def assert_member_checkpoint_is_the_solo_runs(member: Path, alone: Path, formulation: str, members: int) -> None:
    """Assert that the checkpoint ``member`` of an ensemble's member holds the bytes of ``alone``, its seed's run
    alone, but where each says it ran (``machine``): the member in a stack of ``members`` runs by ``formulation``."""
    import io

    import torch

    together, solo = (torch.load(path, weights_only=True) for path in (member, alone))
    expected = [{**m, "ensemble": formulation, "members": members} for m in solo.pop("machine")]
    recorded = together.pop("machine")
    assert expected == recorded, (expected, recorded)  # kit.py's asserts are not rewritten by pytest
    written = []
    for state in (together, solo):
        buffer = io.BytesIO()
        torch.save(state, buffer)
        written.append(buffer.getvalue())
    assert written[0] == written[1]


def files_under(directory: Path) -> list[str]:
    """Every file below ``directory`` (relative paths, sorted); lock files of filelock excluded."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()
                  and not p.name.endswith(".lock"))


# --- the command line -------------------------------------------------------------------------------------------

def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``vaezoo ARGV`` in this process: ``(exit code, stdout, stderr)``; main returns argparse's code too."""
    from vaezoo.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_ranks(command: list[str], env: dict[str, str], timeout: float,
              own: Callable[[int], dict[str, str]] = lambda rank: {}) -> list[tuple[int, str, str]]:
    """Run ``command`` as the two processes of one run started by hand (``RANK`` and ``LOCAL_RANK`` set as torchrun
    sets them; ``own(rank)`` adds to one's environment) and give each one's exit code, stdout and stderr; a process
    still running after ``timeout`` seconds is killed."""
    ranks = [subprocess.Popen(command, env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank), **own(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    try:
        said = [rank.communicate(timeout=timeout) for rank in ranks]
    finally:
        for rank in ranks:
            rank.kill()
    return [(rank.returncode, out, err) for rank, (out, err) in zip(ranks, said, strict=True)]


def child_env(home: Path, cards: Path | None = None, site: Path | None = None) -> dict[str, str]:
    """The environment of a child process: this one's without its VAEZOO_ variables, one thread, and its own
    VAEZOO_HOME, card path and plugin site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAEZOO_")}
    env.update(VAEZOO_HOME=str(home), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    if cards is not None:
        env["VAEZOO_CARDS_PATH"] = str(cards)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return env


class OpensAFile:
    """Pickles as a call to ``open(marker, "w")``: unpickling it would run code (a checkpoint no loader may trust)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def run_python(*args: str, env: Mapping[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python ARGS`` in a fresh interpreter, in ``env`` (default this process's environment).

    The child gets SIGINT's default action, as from a terminal: a test suite started in the background
    (``cmd &`` in a script) ignores SIGINT, its children would inherit that, and Ctrl-C could not be tested.
    """
    return subprocess.run([sys.executable, *args], env=dict(os.environ if env is None else env),
                          capture_output=True, text=True, timeout=timeout, check=False,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def run_vaezoo(*argv: str, env: Mapping[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m vaezoo ARGV`` in a fresh interpreter on a 200-column console, in ``env`` (default this
    process's environment)."""
    return run_python("-m", "vaezoo", *argv, env={**(os.environ if env is None else env), "COLUMNS": "200"},
                      timeout=timeout)


def assert_one_line_error(stderr: str, *fragments: str) -> str:
    """Check that ``stderr`` ends in one ``error: ...`` line containing ``fragments`` and holds no traceback.

    A message spanning several lines fails: its last line would not start with ``error: ``.

    Returns:
        The error line.
    """
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and stderr.strip().splitlines()[-1] == lines[0], stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def read_metadata(path: Path) -> dict[str, str]:
    """The metadata header of a safetensors file (what :func:`vaezoo.store.weights.save_weights` stored)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def entries(folder: Path) -> list[str]:
    """The names in ``folder``, sorted, but for its lock files (``vaezoo.store.locks``: the run's ``.vaezoo.lock``, a
    card's ``.NAME.toml.lock``, a saved or staged folder's ``.FOLDER.lock`` beside it): what a run left there."""
    return sorted(p.name for p in Path(folder).iterdir()
                  if not p.name.startswith(".vaezoo.lock") and not re.fullmatch(r"\..+\.lock(\.holder)?", p.name))


def count_fit_pools(monkeypatch) -> tuple[list[int], list[int]]:
    """``(started, fitted)``: each evaluation (``vaezoo.evaluation.report.evaluate``) first fits two metrics' worth of
    work on the fit workers (``process_map`` of ``abs`` over 1, 2 and 3, 4), whose results go to ``fitted``, and
    each pool of worker processes started appends its number of workers to ``started``."""
    from vaezoo.evaluation import report
    from vaezoo.metrics import parallel

    started: list[int] = []
    fitted: list[int] = []

    class Counted(parallel.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            started.append(args[0])
            super().__init__(*args, **kwargs)

    original = report.evaluate

    def evaluate(*args, **kwargs):
        fitted.extend(parallel.process_map(abs, [(-1,), (-2,)]) + parallel.process_map(abs, [(-3,), (-4,)]))
        return original(*args, **kwargs)

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", Counted)
    monkeypatch.setattr(report, "evaluate", evaluate)
    return started, fitted
