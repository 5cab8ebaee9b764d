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


def save_tiny_weights(path: Path, card: dict, rename: dict[str, str] | None = None) -> Path:
    """Save freshly initialised weights of ``card``'s model to ``path``, optionally renaming some keys."""
    from vaezoo.cards import Card
    from vaezoo.hub import build_model
    from vaezoo.weights import save_weights

    state = build_model(Card.model_validate(card)).state_dict()
    for old, new in (rename or {}).items():
        state[new] = state.pop(old)
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
    register({TINY_DATASET!r}, tiny_blobs)


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
    """

    files: dict[str, bytes]
    delay: float = 0.0
    cut_after: int | None = None
    cut_times: int = 10**9
    stall: float | None = None
    gets: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server.lock:
                    count = server.gets[self.path] = server.gets.get(self.path, 0) + 1
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                try:
                    time.sleep(server.delay)
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if server.cut_after is not None and count <= server.cut_times:
                        self.wfile.write(body[: server.cut_after])
                        self.wfile.flush()
                        if server.stall is None:
                            self.close_connection = True
                            return
                        time.sleep(server.stall)
                        body = body[server.cut_after:]
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up, as a timeout test wants
                    self.close_connection = True

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


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``vaezoo ARGV`` in this process: ``(exit code, stdout, stderr)``; argparse exits become codes."""
    from vaezoo.cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err
