"""What a GPU changes for a user of the zoo, checked on a machine that has one (the test suite runs on CPUs).

For every zoo entry: ``vaezoo.load(name, device="cuda")`` and ``device="auto"`` give a model on the GPU whose
codes and reconstructions of the same images match the CPU model's (the largest absolute difference is
printed); then the time to load it. ``benchmarks/device_check.sh`` runs this and the CLI checks after it.

    python benchmarks/device_check.py [--device cuda]
"""

from __future__ import annotations

import argparse
import time

import torch

import vaezoo


def compare(name: str, device: str) -> dict[str, object]:
    """The CPU and ``device`` models of entry ``name`` on the same 16 images of their own: the largest
    absolute differences of the codes' modes and of the reconstructions, and the load time on ``device``."""
    cpu = vaezoo.load(name)
    start = time.perf_counter()
    there = vaezoo.load(name, device=device)
    loaded = time.perf_counter() - start
    x = cpu.sample(16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        code = (cpu.encode(x).mode - there.encode(x.to(device)).mode.cpu()).abs().max().item()
        recon = (cpu.reconstruct(x) - there.reconstruct(x.to(device)).cpu()).abs().max().item()
    return {"name": name, "device": str(next(there.parameters()).device), "load_s": round(loaded, 2),
            "code_diff": code, "reconstruction_diff": recon}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    auto = next(vaezoo.load("vae-mnist", device="auto").parameters()).device
    print({"torch": torch.__version__, "device": args.device, "device='auto' gives": str(auto)})
    for name in vaezoo.list_models():
        print(compare(name, args.device), flush=True)


if __name__ == "__main__":
    main()
