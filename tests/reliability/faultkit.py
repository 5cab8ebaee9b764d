"""Helpers for the reliability suite: tiny cards, fake plugins, a local HTTP server, CLI runs.

Everything here is small on purpose: a card whose model has a few hundred
parameters, a synthetic 4x4 dataset, plugins installed as ``*.dist-info``
directories on a temporary path. Each fault test then runs in seconds.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import tomli_w

REPO = Path(__file__).resolve().parents[2]
TINY_DATASET = "tiny_blobs"


def tiny_card(**weights) -> dict:
    """A valid card ``tiny-blobs`` (as a dict): a 4x4 MLP VAE trained on :data:`TINY_DATASET`.

    Args:
        weights: the card's ``weights`` table (see :func:`weights_entry`); no table when empty.
    """
    card = {
        "name": "tiny-blobs",
        "architecture": "vae",
        "summary": "A tiny VAE for fault tests.",
        "dataset": TINY_DATASET,
        "paper": "Kingma & Welling (2014), Auto-Encoding Variational Bayes. https://arxiv.org/abs/1312.6114",
        "license": "MIT",
        "vaezoo_version": "0.1.0",
        "model": {
            "image_size": 4,
            "channels": 1,
            "latent": {"type": "gaussian", "dim": 2},
            "encoder": {"type": "mlp_encoder", "hidden": [8]},
            "decoder": {"type": "mlp_decoder", "hidden": [8]},
            "regularizers": [{"type": "beta", "beta": 1.0}],
        },
        "train": {
            "data": {"name": TINY_DATASET},
            "epochs": 2,
            "batch_size": 8,
            "seed": 0,
            "checkpoint_every": 4,
            "optimizer": {"name": "Adam", "lr": 0.01},
        },
    }
    if weights:
        card["weights"] = weights
    return card


def write_toml(path: Path, data: dict) -> Path:
    """Write ``data`` as TOML to ``path`` and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def weights_entry(path: Path, **source) -> dict:
    """The ``weights`` table describing the file at ``path``: its sha256 and size, plus ``file`` or ``url``."""
    data = path.read_bytes()
    return {**source, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def save_tiny_weights(path: Path, card: dict, rename: dict[str, str] | None = None,
                      edit: Callable[[dict], None] | None = None) -> Path:
    """Save freshly initialised weights of ``card``'s model to ``path``.

    Args:
        path: where to save them.
        card: the card (a dict) whose model is built.
        rename: old name -> new name of tensors to rename.
        edit: called on the state dict before it is saved, to change tensors in place.
    """
    from vaezoo.cards import Card
    from vaezoo.assemble import build_model
    from vaezoo.weights import save_weights

    state = build_model(Card.model_validate(card)).state_dict()
    for old, new in (rename or {}).items():
        state[new] = state.pop(old)
    if edit is not None:
        edit(state)
    save_weights(state, path)
    return path


def files_under(directory: Path) -> list[str]:
    """Every file below ``directory`` (relative paths, sorted); lock files of filelock excluded."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()
                  and not p.name.endswith(".lock"))


# --- fake plugins -----------------------------------------------------------------------------------------

TINY_DATASET_PLUGIN = f'''
"""A fake plugin: the {TINY_DATASET!r} dataset (64 random 4x4 binary images) and a 'nan_after' regularizer."""
import vaezoo


def tiny_blobs(root=None, split="train", nan=False):
    """64 random binary 4x4 images; NaN pixels everywhere when ``nan``."""
    import torch
    from vaezoo.data import ImageDataset

    if nan:
        return ImageDataset(torch.full((64, 1, 4, 4), float("nan")), scale=1.0)
    g = torch.Generator().manual_seed(0 if split == "train" else 1)
    return ImageDataset((torch.rand(64, 1, 4, 4, generator=g) > 0.5).to(torch.uint8), scale=1.0)


@vaezoo.hookimpl
def vaezoo_register_datasets(register):
    from vaezoo.data import DataInfo, Dataset

    class TinyBlobs(Dataset):
        def info(self, split="train", nan=False):
            return DataInfo(size=64, image_size=4, channels=1)

        def load(self, root=None, split="train", nan=False):
            return tiny_blobs(root, split, nan)

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

    register("nan_after", NanAfter)
'''


def install_plugin(site: Path, name: str, source: str) -> None:
    """Install ``source`` as a plugin whose entry point is ``name``, as a dist-info directory on ``site``."""
    # one module name per site: a later test's plugin never reuses a module cached in sys.modules
    module = f"fake_{name}_{abs(hash(str(site))) % 10**8}"
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[vaezoo]\n{name} = {module}\n", encoding="utf-8")


# --- subprocess runs --------------------------------------------------------------------------------------

def child_env(home: Path, cards: Path | None = None, site: Path | None = None) -> dict[str, str]:
    """The environment of a child process: its own VAEZOO_HOME, card path and plugin site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAEZOO_")}
    env.update(VAEZOO_HOME=str(home), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    if cards is not None:
        env["VAEZOO_CARDS_PATH"] = str(cards)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m vaezoo ARGS`` in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "vaezoo", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def assert_one_line_error(stderr: str, *fragments: str) -> str:
    """Check that ``stderr`` ends in one ``error: ...`` line containing ``fragments`` and holds no traceback.

    A message spanning several lines fails: its last line would not start with ``error: ``.
    """
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and stderr.strip().splitlines()[-1] == lines[0], stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# --- a local HTTP server ----------------------------------------------------------------------------------

@dataclass
class FileServer:
    """A threaded HTTP server on 127.0.0.1 serving ``files`` (path -> bytes), counting GETs per path.

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
    """

    files: dict[str, bytes]
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
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
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

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        """The URL of ``path`` on this server."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_tiny_card(cards_dir: Path, server: FileServer, path: str, scratch: Path) -> bytes:
    """Write the tiny card with its weights at ``server``'s ``path`` and serve them; returns the served bytes."""
    source = save_tiny_weights(scratch / "served.safetensors", tiny_card())
    server.files[path] = source.read_bytes()
    write_toml(cards_dir / "tiny.toml", tiny_card(**weights_entry(source, url=server.url(path))))
    return server.files[path]


# --- a filesystem that refuses writes ---------------------------------------------------------------------
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


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``vaezoo ARGV`` in this process: ``(exit code, stdout, stderr)``; argparse exits become codes."""
    from vaezoo.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err
