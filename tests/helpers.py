"""Helpers shared by the tests: tiny cards and weights, fake plugins, a local HTTP server, the CLI."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MNIST_ROOT = SHARED / "datasets"
ORIGINAL_JOINTVAE = SHARED / "reference" / "jointvae-original" / "mnist.pt"

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


def card_dict(name: str, architecture: str = "vae", model: Mapping[str, Any] | None = None,
              **fields: Any) -> dict[str, Any]:
    """A valid card as a plain dict; ``fields`` override or add top-level keys (e.g. ``weights``)."""
    model = dict(model if model is not None else JOINT_TC_CAPACITY)
    # The input geometry is the dataset's: an MNIST resized to the spec's image size.
    options = {"image_size": model.pop("image_size")} if "image_size" in model else {}
    model.pop("channels", None)
    if "regularizers" in model:  # and the training set's size is the dataset's too
        model["regularizers"] = [{k: v for k, v in spec.items() if k != "dataset_size"} for spec in model["regularizers"]]
    card = {
        "name": name,
        "architecture": architecture,
        "summary": f"test card {name}",
        "dataset": "mnist",
        "paper": "none (a test fixture)",
        "license": "MIT",
        "vaezoo_version": "0.1.0",
        "model": model,
        "train": {"epochs": 1, "batch_size": 8, "data": {"name": "mnist", "options": options},
                  "optimizer": {"name": "Adam", "lr": 1e-3}},
    }
    card.update(fields)
    return card


def write_card(directory: Path, name: str, architecture: str = "vae", model: Mapping[str, Any] | None = None,
               **fields: Any) -> Path:
    """Write ``card_dict(...)`` as ``directory/NAME.toml`` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.toml"
    path.write_text(tomli_w.dumps(card_dict(name, architecture, model, **fields)), encoding="utf-8")
    return path


def weights_entry(path: Path, url: str | None = None) -> dict[str, Any]:
    """A card's ``weights`` table for the file at ``path``: beside the card, or served at ``url``."""
    data = path.read_bytes()
    source = {"url": url} if url else {"file": path.name}
    return {**source, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def write_tiny_entry(directory: Path, name: str, model: Mapping[str, Any] | None = None, seed: int = 0,
                     url: str | None = None):
    """A zoo entry made inside the tests: a tiny model's safetensors weights and its card, side by side.

    Args:
        directory: where the card and ``NAME.safetensors`` go.
        name: the card's name.
        model: the ``vae`` architecture's arguments (default :data:`JOINT_TC_CAPACITY`).
        seed: seeds the weights.
        url: point the card at this URL (serving the weights file's bytes) instead of the file beside it.

    Returns:
        ``(card_path, state_dict, weights_path)``.
    """
    import torch

    from vaezoo.cards import Card
    from vaezoo.assemble import build_model
    from vaezoo.weights import save_weights

    torch.manual_seed(seed)
    vae = build_model(Card.model_validate(card_dict(name, model=model)))
    state = {k: v.detach().clone() for k, v in vae.state_dict().items()}
    weights = directory / f"{name}.safetensors"
    save_weights(state, weights, metadata={"name": name})
    card = write_card(directory, name, model=model, weights=weights_entry(weights, url))
    return card, state, weights


def install_plugin(monkeypatch, directory: Path, entry_name: str, source: str, version: str = "1.0") -> str:
    """Install a fake plugin the way pip would: a module and a dist-info with its ``vaezoo`` entry point.

    ``directory`` goes on ``sys.path`` (and ``PYTHONPATH``, for subprocesses), where
    ``importlib.metadata`` finds the entry point. Call ``vaezoo.plugins.reset()`` afterwards.

    Returns:
        The plugin's module name (unique, so ``sys.modules`` never serves a stale copy).
    """
    module = f"vaezoo_test_{entry_name}_{uuid.uuid4().hex[:8]}"
    dist = module.replace("_", "-")
    (directory / f"{module}.py").write_text(source, encoding="utf-8")
    info = directory / f"{module}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[vaezoo]\n{entry_name} = {module}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH")) if p))
    return module


@dataclass
class LocalServer:
    """A file server on 127.0.0.1 for download tests.

    Attributes:
        files: URL path -> body.
        cut: paths whose connection is closed after half the body (``framing`` says how the body is sent).
        framing: "length" (Content-Length) or "chunked" (Transfer-Encoding: chunked).
        requests: every path requested, in order.
    """

    files: dict[str, bytes] = field(default_factory=dict)
    cut: set[str] = field(default_factory=set)
    framing: str = "length"
    requests: list[str] = field(default_factory=list)
    port: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@contextmanager
def serve(server: LocalServer) -> Iterator[LocalServer]:
    """Run ``server`` in a thread for the duration of the ``with`` block."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            server.requests.append(self.path)
            body = server.files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            if server.framing == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            sent = body[: len(body) // 2] if self.path in server.cut else body
            if server.framing == "chunked":  # one chunk announcing the whole body, then the terminator
                self.wfile.write(f"{len(body):x}\r\n".encode() + sent)
                if self.path not in server.cut:
                    self.wfile.write(b"\r\n0\r\n\r\n")
            else:
                self.wfile.write(sent)
            self.close_connection = True

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def run_python(code: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
               args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Run ``python [args] -c code`` in a fresh interpreter with this process's environment plus ``env``."""
    return subprocess.run([sys.executable, *args, "-c", code], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=300)


def run_vaezoo(*argv: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m vaezoo ARGV`` in a fresh interpreter, on a 200-column console."""
    return subprocess.run([sys.executable, "-m", "vaezoo", *argv], env={**os.environ, "COLUMNS": "200", **(env or {})},
                          capture_output=True, text=True, timeout=300)
