"""benchmarks/device_kernels.py on the CPU at toy sizes: its JSON holds every layer x formulation x pass it was
asked for, the formulations agree with the float32 loop, and a formulation that computes something else is
flagged."""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import pytest
import torch
from kit import REPO, child_env, run_python

import vaezoo

SCRIPT = REPO / "benchmarks" / "device_kernels.py"


@pytest.fixture(scope="module")
def kernels():
    """The script as a module."""
    spec = importlib.util.spec_from_file_location("device_kernels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def dsprites_layers() -> list[tuple[str, type]]:
    """The convolution and linear layers of betatcvae-dsprites's model, read here without the script."""
    model = vaezoo.build_model("betatcvae-dsprites")
    return [(name, type(m)) for name, m in model.named_modules()
            if type(m) in (torch.nn.Conv2d, torch.nn.ConvTranspose2d, torch.nn.Linear)]


@pytest.mark.slow
def test_the_toy_run_times_every_layer_formulation_and_pass_and_they_agree(tmp_path):
    out = tmp_path / "out"
    done = run_python(str(SCRIPT), "--toy", "--device", "cpu", "--dtypes", "fp32", "bf16", "--out", str(out),
                      env=child_env(tmp_path / "home"), timeout=600)
    assert done.returncode == 0, done.stderr
    assert "every formulation agrees with the float32 loop" in done.stderr
    report = json.loads((out / "kernels.json").read_text())
    formulations, dtypes, layouts = ["grouped", "vmap", "bmm", "loop"], ["fp32", "bf16"], ["nchw", "channels_last"]
    assert report["meta"]["members"] == [2] and report["meta"]["formulations"] == formulations

    layers = dsprites_layers()
    assert len(layers) == 12
    assert sorted(entry["name"] for entry in report["layers"]) == sorted(name for name, _ in layers)
    for entry, (name, kind) in zip(sorted(report["layers"], key=lambda e: e["name"]), sorted(layers)):
        asked = layouts if kind is not torch.nn.Linear else ["nchw"]
        got = {(r["formulation"], r["dtype"], r["layout"]): r for r in entry["results"]}
        assert set(got) == {(f, d, lay) for f in formulations for d in dtypes for lay in asked}, name
        for (_, dtype, _), record in got.items():
            assert set(record["ms"]) == {"forward", "input_grad", "weight_grad"}
            assert all(v > 0 for v in record["ms"].values()) and all(v > 0 for v in record["tflops"].values())
            assert math.isfinite(record["error"]) and record["error"] <= report["meta"]["tolerance"][dtype]
            assert record["agrees"] is True
        # bf16 rounds: its error is measured, not a zero typed in
        assert max(r["error"] for r in entry["results"] if r["dtype"] == "bf16") > 1e-6

    steps = {(s["formulation"], s["dtype"], s["layout"]): s for s in report["steps"]}
    assert set(steps) == {(f, d, lay) for f in ("vmap", "loop") for d in dtypes for lay in layouts}
    for step in steps.values():
        assert step["ms"]["step"] > 0 and step["tflops"]["step"] > 0 and step["top_kernels"]
        assert "aten::" in (out / step["profile"]).read_text()
    table = (out / "kernels.md").read_text()
    assert all(f"| {name} | weight_grad | bf16 | nchw |" in table for name, _ in layers)


def test_a_formulation_that_mixes_up_the_members_is_flagged(kernels, monkeypatch):
    model = vaezoo.build_model("betatcvae-dsprites")
    conv = next(layer for layer in kernels.net_layers(model) if layer.kind == "conv_transpose")
    torch.manual_seed(0)
    inputs = kernels.Inputs.random(conv, members=3, batch=2, device=torch.device("cpu"))

    def wrong(layer, x, w, b):  # each member gets the next one's weights
        return kernels.grouped_formulation(layer, x, w.roll(1, 0), b)

    monkeypatch.setitem(kernels.FORMULATIONS, "wrong", wrong)
    records = {r["formulation"]: r for r in kernels.measure_layer(
        conv, inputs, ["grouped", "bmm", "wrong"], ["fp32"], ["nchw"], torch.device("cpu"), repeats=1, warmup=0,
        peak=kernels.PEAK_TFLOPS)}
    assert records["grouped"]["agrees"] and records["bmm"]["agrees"]
    assert records["grouped"]["error"] < 1e-5
    assert not records["wrong"]["agrees"] and records["wrong"]["error"] > 0.1


def test_agreement_is_relative_to_the_reference_and_refuses_shapes_and_nans(kernels):
    reference = [torch.tensor([1.0, -4.0]), torch.tensor([10.0])]
    assert kernels.agreement([torch.tensor([1.0, -4.0]), torch.tensor([10.0])], reference) == 0
    assert kernels.agreement([torch.tensor([1.0, -3.0]), torch.tensor([10.0])], reference) == pytest.approx(0.25)
    assert kernels.agreement([torch.tensor([1.0, -4.0]), torch.tensor([10.0, 0.0])], reference) == math.inf
    assert kernels.agreement([torch.tensor([1.0, float("nan")]), torch.tensor([10.0])], reference) == math.inf


def test_a_whole_step_counts_the_same_flops_in_either_formulation(kernels):
    """torch's counter takes a grouped convolution's weight gradient (vmap's) for M members' times: an H200 run
    reported 250% of the fp32 peak for 60 members."""
    card = vaezoo.get_card("betatcvae-dsprites")
    models = [vaezoo.build_model(card) for _ in range(3)]
    counted = {f: kernels.EnsembleStep(card, models, 2, f, "nchw").flops() for f in ("vmap", "loop")}
    assert counted["vmap"] == counted["loop"]
    assert counted["loop"] / 6 == pytest.approx(96.5e6, rel=0.01)  # docs/benchmarks.md: forward and backward


def test_the_summary_adds_each_formulation_s_passes_and_the_fastest_of_each_cell():
    spec = importlib.util.spec_from_file_location("kernels_summary", REPO / "benchmarks" / "kernels_summary.py")
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)

    def record(formulation, forward, grads):
        return {"formulation": formulation, "dtype": "fp32", "layout": "nchw",
                "ms": {"forward": forward, "input_grad": grads, "weight_grad": grads}}

    layers = [{"members": 2, "kind": "conv", "results": [record("vmap", 1.0, 2.0), record("bmm", 5.0, 1.0)]},
              {"members": 2, "kind": "linear", "results": [record("vmap", 1.0, 1.0), record("bmm", 3.0, 3.0)]}]
    report = {"meta": {"members": [2], "dtypes": ["fp32"], "layouts": ["nchw"]}, "layers": layers}
    (row,) = summary.summary(report)
    assert row["ms"] == {"vmap": 8.0, "bmm": 16.0}
    assert row["wins"] == {"vmap": 4, "bmm": 2} and row["best"] == 3 * 1.0 + 3 * 1.0
