"""benchmarks/bench_train.py prints, for each loop, images/s, ms a step, TFLOP/s and the shares of the peaks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kit import child_env

BENCH = Path(__file__).parents[1] / "benchmarks" / "bench_train.py"


@pytest.mark.slow
def test_bench_train_prints_the_rate_the_step_time_and_the_shares_of_the_peaks(tmp_path):
    run = subprocess.run([sys.executable, str(BENCH), "--card", "vae-mnist", "--batch-sizes", "8", "--steps", "2",
                          "--warmup", "1", "--rounds", "1", "--ensemble", "2", "--formulations", "vmap",
                          "--ensemble-steps", "graph", "eager",
                          "--matmul-size", "64", "--peak-tflops", "1", "--precision", "fp32"],
                         env=child_env(tmp_path / "home"), capture_output=True, text=True, check=False, timeout=600)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "precision fp32" in lines[0] and "1 TFLOP/s datasheet" in lines[1]
    assert lines[2].split() == ["batch", "loop", "img/s", "ms/step", "TFLOP/s", "of", "matmul", "of", "datasheet"]
    names = ("plain PyTorch", "vaezoo train", "ensemble 2 vmap", "ensemble 2 vmap eager")
    rows = {name: line for line in lines[3:] for name in names if re.match(rf"\s+8\s+{name}\s+\d", line)}
    number = r"[\d,.e+-]+"
    for name, row in rows.items():
        assert re.fullmatch(rf"\s+8\s+{name}\s+{number}\s+{number}\s+{number}\s+{number}%\s+{number}%", row), row
    assert len(rows) == 4
    assert any(line.strip().startswith("ensemble 2 vmap / vaezoo train: ") for line in lines)
