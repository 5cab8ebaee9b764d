"""The kernels of the ensemble training step, measured layer by layer: what a lent GPU runs first, before anyone
chooses how to make the step faster (issue 58, item 5).

For the network of a zoo card (default ``betatcvae-dsprites``: four 4x4 stride-2 convolutions 64x64 -> 4x4, the
linear layers, four transposed convolutions back to 64x64), each convolution and linear layer, with the shapes
read from the built model, is timed for an ensemble of M members of batch B each, in three passes (the forward
pass, the gradient of the input, the gradient of the weight and bias) and four formulations:

- ``grouped``: the members stacked in the channel dimension, one convolution with ``groups=M`` (what
  ``torch.func.vmap`` makes of a per-member convolution; a linear layer is a grouped 1-wide ``conv1d``);
- ``vmap``: ``torch.func.vmap`` of ``torch.func.functional_call`` of the layer over the stacked weights (the
  engine's ``vmap`` formulation);
- ``bmm``: a convolution as a batched matrix product, members as the batch dimension: ``unfold`` + ``einsum``
  (transposed: ``einsum`` + ``fold``; linear: ``baddbmm``);
- ``loop``: one call a member on its slice of the stacked weights (the engine's ``loop`` formulation);

in ``fp32`` (TF32 off), ``tf32`` (``torch.backends.cuda.matmul.allow_tf32`` and ``cudnn.allow_tf32`` on) and
``bf16`` (autocast, float32 weights), with the activations and weights in NCHW or ``channels_last`` (linear layers
have no layout: they run once, as ``nchw``). Every formulation is checked against the loop in float32 with TF32
off: its output and gradients' largest difference relative to the reference's largest value, against a tolerance
per precision (:data:`TOLERANCE`); a formulation outside it is flagged in the JSON, the table and on stderr.

Then one whole ensemble training step of the card's model (``vmap`` and ``loop``, the engine's formulations:
``grouped`` is what ``vmap`` runs, ``bmm`` is not a formulation of a whole model) is timed and profiled with
``torch.profiler`` (its top kernels go to ``profile-*.txt`` and the JSON). The step runs eagerly, where the engine
captures it in a CUDA graph, so its kernels are the engine's but not the gaps between them: the engine's own
step time is ``bench_train.py --ensemble M``'s. FLOPs are counted with
``torch.utils.flop_counter.FlopCounterMode``; the achieved TFLOP/s are given as a share of ``--peak-tflops``.

Timings are medians of ``--repeats`` calls after ``--warmup`` calls, measured with CUDA events on a GPU and
``time.perf_counter`` on the CPU. Progress goes to stderr, and ``kernels.json`` and ``kernels.md`` are rewritten
after every layer and step, so a run cut short leaves what it measured.

    python3 benchmarks/device_kernels.py --device cuda                # M = 12 and 60, batch 64, into $OUT
    OMP_NUM_THREADS=1 python benchmarks/device_kernels.py --toy --out /tmp/kernels   # a CPU check, seconds
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap
from torch.utils.flop_counter import FlopCounterMode

import vaezoo
from vaezoo.entries.catalog import get_card

PASSES = ("forward", "input_grad", "weight_grad")
DTYPES = ("fp32", "tf32", "bf16")
LAYOUTS = ("nchw", "channels_last")
STEP_FORMULATIONS = ("vmap", "loop")  # the formulations a whole model has

# NVIDIA H200 (SXM) datasheet, https://www.nvidia.com/en-us/data-center/h200/: FP32 67 TFLOPS; TF32 989 and
# BF16 1,979 TFLOPS "with sparsity", so half of those dense. The H100 SXM's figures are the same.
PEAK_TFLOPS = {"fp32": 67.0, "tf32": 494.0, "bf16": 989.0}
PEAK_SOURCE = ("NVIDIA H200 SXM datasheet (nvidia.com/en-us/data-center/h200): FP32 67, TF32 989 and BF16 1,979 "
               "TFLOPS with sparsity, halved for dense")

# Largest |difference| / largest |reference| allowed against the float32 loop. Different summation orders in
# float32 differ by ~1e-6 of the largest value; TF32 rounds the inputs to 10 mantissa bits (2^-11 ~ 5e-4) and
# bfloat16 to 7 (2^-8 ~ 4e-3), products accumulated in float32. A wrong kernel misses by O(1).
TOLERANCE = {"fp32": 1e-4, "tf32": 1e-2, "bf16": 5e-2}


@dataclass
class Layer:
    """One convolution or linear layer of the net, as the built model runs it (shapes without the batch)."""

    name: str
    module: nn.Module
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]

    @property
    def kind(self) -> str:
        """``conv``, ``conv_transpose`` or ``linear``."""
        return {nn.Conv2d: "conv", nn.ConvTranspose2d: "conv_transpose", nn.Linear: "linear"}[type(self.module)]

    @property
    def layouts(self) -> tuple[str, ...]:
        """The layouts the layer has: a linear layer's activations are matrices."""
        return ("nchw",) if self.kind == "linear" else LAYOUTS

    def describe(self) -> str:
        """A short line: kind, channels and sizes."""
        return f"{self.kind} {self.in_shape} -> {self.out_shape}"


def net_layers(model: nn.Module) -> list[Layer]:
    """The convolution and linear layers of ``model`` in the order its forward pass runs them, with their shapes."""
    seen: list[Layer] = []
    names = {module: name for name, module in model.named_modules()}

    def note(module: nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
        seen.append(Layer(names[module], module, tuple(inputs[0].shape[1:]), tuple(output.shape[1:])))

    hooks = [m.register_forward_hook(note) for m in model.modules()
             if type(m) in (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)]
    try:
        with torch.no_grad():
            model(torch.rand(2, model.channels, model.image_size, model.image_size))
    finally:
        for hook in hooks:
            hook.remove()
    return seen


# ---- formulations: each takes the stacked tensors x (M, B, *in_shape), w (M, *weight), b (M, out) -------------

def per_member(layer: Layer, w: Tensor, b: Tensor, x: Tensor) -> Tensor:
    """One member's layer: ``functional_call`` of the model's module with that member's weights."""
    return functional_call(layer.module, {"weight": w, "bias": b}, (x,))


def loop_formulation(layer: Layer, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """The members in turn, each on its slice of the stacked weights."""
    return torch.stack([per_member(layer, *args) for args in zip(w.unbind(), b.unbind(), x.unbind())])


def vmap_formulation(layer: Layer, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """``torch.func.vmap`` over the members' stacked weights and inputs."""
    return vmap(lambda w, b, x: per_member(layer, w, b, x))(w, b, x)


def grouped_formulation(layer: Layer, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """The members stacked in the channel dimension, one call with ``groups=M`` (a linear layer as ``conv1d``)."""
    m, batch = x.shape[:2]
    xg = x.movedim(0, 1).reshape(batch, -1, *x.shape[3:])
    bias = b.reshape(-1)
    mod = layer.module
    if layer.kind == "linear":
        y = F.conv1d(xg.unsqueeze(-1), w.reshape(-1, w.shape[-1], 1), bias, groups=m)
    elif layer.kind == "conv":
        y = F.conv2d(xg, w.reshape(-1, *w.shape[2:]), bias, mod.stride, mod.padding, mod.dilation, groups=m)
    else:
        y = F.conv_transpose2d(xg, w.reshape(-1, *w.shape[2:]), bias, mod.stride, mod.padding, mod.output_padding,
                               groups=m, dilation=mod.dilation)
    return y.reshape(batch, m, *layer.out_shape).movedim(1, 0)


def bmm_formulation(layer: Layer, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """A batched matrix product with the members as its batch: ``unfold`` + ``einsum`` (transposed: ``einsum`` +
    ``fold``; linear: ``baddbmm``)."""
    m, batch = x.shape[:2]
    mod = layer.module
    if layer.kind == "linear":
        return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
    out_hw = layer.out_shape[1:]
    if layer.kind == "conv":
        cols = F.unfold(x.flatten(0, 1), mod.kernel_size, mod.dilation, mod.padding, mod.stride)
        y = torch.einsum("mok,mbkl->mbol", w.flatten(2), cols.view(m, batch, *cols.shape[1:]))
    else:
        cols = torch.einsum("mck,mbcl->mbkl", w.flatten(2), x.flatten(3))
        y = F.fold(cols.flatten(0, 1), out_hw, mod.kernel_size, mod.dilation, mod.padding, mod.stride)
    return y.reshape(m, batch, -1, *out_hw) + b[:, None, :, None, None]


Formulation = Callable[[Layer, Tensor, Tensor, Tensor], Tensor]
FORMULATIONS: dict[str, Formulation] = {"grouped": grouped_formulation, "vmap": vmap_formulation,
                                        "bmm": bmm_formulation, "loop": loop_formulation}


# ---- precision, layout, timing ---------------------------------------------------------------------------------

@contextlib.contextmanager
def precision(dtype: str, device: torch.device) -> Iterator[None]:
    """Run the block in ``dtype`` (fp32, tf32 or bf16 autocast), restoring torch's TF32 flags after."""
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    try:
        with torch.autocast(device.type, torch.bfloat16, enabled=dtype == "bf16"):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def in_layout(t: Tensor, layout: str) -> Tensor:
    """``t`` stacked along dim 0, each member's 4-d slice (an image batch, a conv weight) in ``layout``."""
    if layout == "nchw" or t.dim() != 5:
        return t.contiguous()
    return t.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


def timed(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> list[float]:
    """Milliseconds of each of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    times = []
    if device.type == "cuda":
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    return times


def agreement(got: list[Tensor], reference: list[Tensor]) -> float:
    """The largest |difference| between ``got`` and ``reference`` (pairs of tensors), relative to the largest
    |value| of each reference tensor: 0 for the same numbers, inf if a shape differs or a value is not finite."""
    error = 0.0
    for a, r in zip(got, reference, strict=True):
        if a.shape != r.shape:
            return math.inf
        scale = r.abs().max().item() or 1.0
        diff = (a.float() - r.float()).abs().max().item()
        error = max(error, diff / scale if math.isfinite(diff) else math.inf)
    return error


# ---- one layer -------------------------------------------------------------------------------------------------

@dataclass
class Inputs:
    """A layer's stacked inputs for M members, and the upstream gradient of its output."""

    x: Tensor
    w: Tensor
    b: Tensor
    grad: Tensor

    @classmethod
    def random(cls, layer: Layer, members: int, batch: int, device: torch.device) -> Inputs:
        """Members with the layer's initialisation scale (each a fresh draw) and standard-normal data."""
        fresh = copy.deepcopy(layer.module)
        weights, biases = [], []
        for _ in range(members):
            fresh.reset_parameters()
            weights.append(fresh.weight.detach().clone())
            biases.append(fresh.bias.detach().clone())
        w, b = torch.stack(weights).to(device), torch.stack(biases).to(device)
        x = torch.randn(members, batch, *layer.in_shape, device=device)
        return cls(x, w, b, torch.randn(members, batch, *layer.out_shape, device=device))

    def leaves(self, layout: str) -> tuple[Tensor, Tensor, Tensor]:
        """Fresh leaves ``x, w, b`` that need their gradients, the 4-d slices in ``layout``."""
        return tuple(in_layout(t, layout).requires_grad_() for t in (self.x, self.w, self.b))


def passes(fn: Formulation, layer: Layer, x: Tensor, w: Tensor, b: Tensor, grad: Tensor
           ) -> dict[str, Callable[[], object]]:
    """The three passes of ``fn`` on these leaves as calls to time: the forward pass, and the gradients of the
    input and of the weight and bias through one recorded forward pass (its graph kept)."""
    y = fn(layer, x, w, b)
    g = grad.to(y.dtype)
    return {"forward": lambda: fn(layer, x, w, b),
            "input_grad": lambda: torch.autograd.grad(y, x, g, retain_graph=True),
            "weight_grad": lambda: torch.autograd.grad(y, (w, b), g, retain_graph=True)}


def outputs(fn: Formulation, layer: Layer, inputs: Inputs, layout: str) -> list[Tensor]:
    """The output and the three gradients ``fn`` gives, to compare with the reference's."""
    x, w, b = inputs.leaves(layout)
    y = fn(layer, x, w, b)
    return [y.detach(), *torch.autograd.grad(y, (x, w, b), inputs.grad.to(y.dtype))]


def count_flops(layer: Layer, inputs: Inputs) -> dict[str, int]:
    """FLOPs of each pass, counted by ``FlopCounterMode`` on the loop formulation in float32."""
    counts = {}
    calls = passes(loop_formulation, layer, *inputs.leaves("nchw"), inputs.grad)
    for name, call in calls.items():
        with FlopCounterMode(display=False) as counter:
            call()
        counts[name] = counter.get_total_flops()
    return counts


def measure_layer(layer: Layer, inputs: Inputs, formulations: list[str], dtypes: list[str], layouts: list[str],
                  device: torch.device, repeats: int, warmup: int, peak: dict[str, float]) -> Iterator[dict]:
    """Time and check ``layer`` in every formulation, precision and layout asked for: one record each."""
    with precision("fp32", device):
        reference = outputs(loop_formulation, layer, inputs, "nchw")
    flops = count_flops(layer, inputs)
    for dtype in dtypes:
        for layout in [name for name in layouts if name in layer.layouts]:
            for formulation in formulations:
                fn = FORMULATIONS[formulation]
                with precision(dtype, device):
                    error = agreement(outputs(fn, layer, inputs, layout), reference)
                    ms = {name: timed(call, device, repeats, warmup)
                          for name, call in passes(fn, layer, *inputs.leaves(layout), inputs.grad).items()}
                yield rates({"formulation": formulation, "dtype": dtype, "layout": layout, "error": error,
                             "agrees": error <= TOLERANCE[dtype]}, ms, flops, peak[dtype])


def rates(record: dict, ms: dict[str, list[float]], flops: dict[str, int], peak_tflops: float) -> dict:
    """``record`` with each pass's median and fastest milliseconds, achieved TFLOP/s and share of the peak."""
    record["ms"] = {name: statistics.median(t) for name, t in ms.items()}
    record["min_ms"] = {name: min(t) for name, t in ms.items()}
    record["tflops"] = {name: flops[name] / record["ms"][name] / 1e9 for name in ms}
    record["peak_share"] = {name: record["tflops"][name] / peak_tflops for name in ms}
    return record


# ---- the whole step --------------------------------------------------------------------------------------------

class EnsembleStep:
    """One training step of M members of a card's model stacked as the engine stacks them: the loss of each
    member (``vmap`` of ``functional_call``, or a loop over the members' slices), one backward pass, one Adam
    step of the stacked weights (the card's optimiser settings)."""

    def __init__(self, card, models: list[nn.Module], batch: int, formulation: str, layout: str):
        self.base, self.formulation = models[0], formulation
        members, device = len(models), next(models[0].parameters()).device
        params, self.buffers = stack_module_state(models)
        self.params = {k: in_layout(v.detach(), layout).requires_grad_() for k, v in params.items()}
        opt = card.train.optimizer
        self.optimizer = getattr(torch.optim, opt.name)(self.params.values(), lr=opt.lr, **opt.options)
        shape = (members, batch, self.base.channels, self.base.image_size, self.base.image_size)
        self.x = in_layout(torch.rand(shape, device=device).round(), layout)  # binary, as dSprites

    def losses(self, formulation: str | None = None) -> Tensor:
        """Every member's loss on its batch, shape ``(members,)``, in ``formulation`` (default the step's)."""
        def one(params, buffers, x):
            return functional_call(self.base, (params, buffers), (x,), {"step": 0, "checked": True}).loss

        # under vmap the members share the noise here; the engine feeds each its own, drawn before: the same kernels
        if (formulation or self.formulation) == "vmap":
            return vmap(one, randomness="same")(self.params, self.buffers, self.x)
        params = {k: v.unbind() for k, v in self.params.items()}
        buffers = {k: v.unbind() for k, v in self.buffers.items()}
        return torch.stack([one({k: v[i] for k, v in params.items()}, {k: v[i] for k, v in buffers.items()},
                                self.x[i]) for i in range(len(self.x))])

    def __call__(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.losses().sum().backward()
        self.optimizer.step()

    def flops(self) -> int:
        """FLOPs of the forward and backward pass, counted by ``FlopCounterMode`` on the loop formulation, as a
        layer's are: under ``vmap`` it counts the weight gradient of the grouped convolution as M members' times."""
        with FlopCounterMode(display=False) as counter:
            self.losses("loop").sum().backward()
        self.optimizer.zero_grad(set_to_none=True)
        return counter.get_total_flops()


def profile(step: Callable[[], None], device: torch.device, steps: int, top: int) -> tuple[str, list[dict]]:
    """``torch.profiler``'s table of ``steps`` steps, sorted by self time on the device (the CPU without a GPU),
    and its ``top`` rows as records."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)[:top]
    rows = [{"name": e.key, "calls": e.count // steps, "self_us_per_step": getattr(e, key) / steps} for e in events]
    return prof.key_averages().table(sort_by=key, row_limit=top), rows


def measure_step(card, models: list[nn.Module], batch: int, formulation: str, dtype: str, layout: str,
                 device: torch.device, repeats: int, warmup: int, peak_tflops: float, out: Path) -> dict:
    """Time and profile one whole step of the stacked ``models`` (``min(3, repeats)`` steps profiled); its
    profiler table goes to ``out``."""
    members = len(models)
    step = EnsembleStep(card, models, batch, formulation, layout)
    with precision(dtype, device):
        flops = step.flops()
        ms = timed(step, device, repeats, warmup)
        table, top = profile(step, device, steps=min(3, repeats), top=15)
    name = f"profile-m{members}-{formulation}-{dtype}-{layout}.txt"
    (out / name).write_text(table)
    record = {"members": members, "formulation": formulation, "dtype": dtype, "layout": layout,
              "images_per_s": members * batch / statistics.median(ms) * 1e3, "profile": name, "top_kernels": top}
    return rates(record, {"step": ms}, {"step": flops}, peak_tflops)


# ---- results ---------------------------------------------------------------------------------------------------

@dataclass
class Results:
    """What the run measured so far, rewritten to ``kernels.json`` and ``kernels.md`` after each addition."""

    out: Path
    meta: dict
    layers: list[dict] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)

    def save(self) -> None:
        """Write the JSON and the markdown table (each replaced whole, so a reader never sees half a file)."""
        data = {"meta": self.meta, "layers": self.layers, "steps": self.steps}
        for name, text in (("kernels.json", json.dumps(data, indent=1)), ("kernels.md", self.markdown())):
            tmp = self.out / f".{name}.tmp"
            tmp.write_text(text)
            tmp.replace(self.out / name)

    def markdown(self) -> str:
        """The tables: each layer's passes in each formulation, then the whole steps."""
        m = self.meta
        peak = ", ".join(f"{k} {v:g}" for k, v in m["peak_tflops"].items())
        tolerance = ", ".join(f"{k} {v:g}" for k, v in m["tolerance"].items())
        lines = [f"# Ensemble kernels: {m['card']} on {m['device_name']}", "",
                 (f"torch {m['torch']}, batch {m['batch']} a member, median ms of {m['repeats']} calls after "
                  f"{m['warmup']} ({m['timer']}); peak TFLOP/s {peak} ({m['peak_source']}). `!` marks a "
                  f"formulation that does not agree with the float32 loop (relative error over {tolerance})."), ""]
        for members in m["members"]:
            lines += [f"## {members} members", "",
                      "| layer | pass | precision | layout | " + " | ".join(m["formulations"]) + " | fastest |",
                      "|" + " --- |" * (5 + len(m["formulations"]))]
            for layer in (entry for entry in self.layers if entry["members"] == members):
                groups: dict[tuple, dict] = {}
                for r in layer["results"]:
                    groups.setdefault((r["dtype"], r["layout"]), {})[r["formulation"]] = r
                for (dtype, layout), by_form in groups.items():
                    for name in PASSES:
                        cells = [f"{r['ms'][name]:.3f}{'' if r['agrees'] else ' !'}" if r else "" for r in
                                 (by_form.get(f) for f in m["formulations"])]
                        best = min(by_form.values(), key=lambda r: r["ms"][name])
                        lines.append(f"| {layer['name']} | {name} | {dtype} | {layout} | " + " | ".join(cells)
                                     + f" | {best['formulation']} ({best['tflops'][name]:.2f} TFLOP/s, "
                                       f"{best['peak_share'][name]:.1%}) |")
            lines.append("")
            steps = [s for s in self.steps if s["members"] == members]
            if steps:
                lines += ["| whole step | precision | layout | ms | images/s | TFLOP/s | of peak | profile |",
                          "|" + " --- |" * 8]
                lines += [f"| {s['formulation']} | {s['dtype']} | {s['layout']} | {s['ms']['step']:.3f} | "
                          f"{s['images_per_s']:,.0f} | {s['tflops']['step']:.2f} | {s['peak_share']['step']:.1%} | "
                          f"{s['profile']} |" for s in steps]
                lines.append("")
        return "\n".join(lines)


def default_out() -> Path:
    """``$OUT`` if set, else ``benchmarks/results/kernels-<date>``."""
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"])
    return Path(__file__).parent / "results" / f"kernels-{datetime.date.today().isoformat()}"


def peaks(pairs: list[str]) -> dict[str, float]:
    """``["bf16=989", ...]`` over :data:`PEAK_TFLOPS`."""
    peak = dict(PEAK_TFLOPS)
    for pair in pairs:
        dtype, _, value = pair.partition("=")
        if dtype not in DTYPES:
            raise SystemExit(f"--peak-tflops takes DTYPE=TFLOPS with DTYPE one of {', '.join(DTYPES)}, got '{pair}'")
        peak[dtype] = float(value)
    return peak


def progress(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line; ``--toy`` replaces the sizes by tiny ones for a CPU check."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--card", default="betatcvae-dsprites", help="the zoo card whose net is measured")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--members", type=int, nargs="+", default=[12, 60], help="ensemble sizes (default 12 60)")
    parser.add_argument("--batch", type=int, default=64, help="images a member (default 64)")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls of each pass (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls before them (default 3)")
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    parser.add_argument("--formulations", nargs="+", choices=list(FORMULATIONS), default=list(FORMULATIONS))
    parser.add_argument("--peak-tflops", nargs="+", default=[], metavar="DTYPE=TFLOPS",
                        help=f"peak per precision (default {PEAK_TFLOPS}: {PEAK_SOURCE})")
    parser.add_argument("--cudnn-benchmark", action="store_true", help="let cuDNN pick its algorithms by timing")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default $OUT, else "
                                                                   "benchmarks/results/kernels-DATE)")
    parser.add_argument("--toy", action="store_true", help="2 members of batch 2, 1 repeat, 1 warm-up: seconds "
                                                           "on a CPU")
    args = parser.parse_args(argv)
    if args.toy:
        args.members, args.batch, args.repeats, args.warmup = [2], 2, 1, 1
    args.out = args.out or default_out()
    return args


def main(argv: list[str] | None = None) -> Results:
    """Measure what the command line asks for; returns the results it wrote."""
    args = parse(argv)
    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    torch.distributions.Distribution.set_default_validate_args(False)  # as the engine trains
    card = get_card(args.card)
    layers = net_layers(vaezoo.build_model(card))
    args.out.mkdir(parents=True, exist_ok=True)
    peak = peaks(args.peak_tflops)
    results = Results(args.out, {
        "card": card.name, "torch": torch.__version__, "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "threads": torch.get_num_threads(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv), "members": args.members, "batch": args.batch, "repeats": args.repeats,
        "warmup": args.warmup, "dtypes": args.dtypes, "layouts": args.layouts, "formulations": args.formulations,
        "passes": list(PASSES), "peak_tflops": peak, "peak_source": PEAK_SOURCE, "tolerance": TOLERANCE,
        "cudnn_benchmark": args.cudnn_benchmark, "timer": "CUDA events" if device.type == "cuda" else "perf_counter"})
    progress(f"{len(layers)} layers of {card.name} on {results.meta['device_name']}, into {args.out}")
    for members in args.members:
        for layer in layers:
            torch.manual_seed(0)
            inputs = Inputs.random(layer, members, args.batch, device)
            entry = {"members": members, "name": layer.name, "kind": layer.kind, "in_shape": layer.in_shape,
                     "out_shape": layer.out_shape, "weight_shape": tuple(layer.module.weight.shape), "results": []}
            results.layers.append(entry)
            for record in measure_layer(layer, inputs, args.formulations, args.dtypes, args.layouts, device,
                                        args.repeats, args.warmup, peak):
                entry["results"].append(record)
                flag = "" if record["agrees"] else f"  DISAGREES (error {record['error']:.2e})"
                progress(f"M={members} {layer.name} [{layer.describe()}] {record['formulation']} {record['dtype']} "
                         f"{record['layout']}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in record["ms"].items())
                         + flag)
            results.save()
        models = []
        for seed in range(members):
            torch.manual_seed(seed)
            models.append(vaezoo.build_model(card, device=device))
        for formulation in [f for f in STEP_FORMULATIONS if f in args.formulations]:
            for dtype in args.dtypes:
                for layout in args.layouts:
                    record = measure_step(card, models, args.batch, formulation, dtype, layout, device,
                                          args.repeats, args.warmup, peak[dtype], args.out)
                    results.steps.append(record)
                    results.save()
                    progress(f"M={members} whole step {formulation} {dtype} {layout}: {record['ms']['step']:.3f} ms, "
                             f"{record['images_per_s']:,.0f} images/s, {record['tflops']['step']:.2f} TFLOP/s "
                             f"({record['peak_share']['step']:.1%} of peak)")
    bad = [f"M={e['members']} {e['name']} {r['formulation']} {r['dtype']} {r['layout']}"
           for e in results.layers for r in e["results"] if not r["agrees"]]
    progress(f"disagreeing: {', '.join(bad)}" if bad else "every formulation agrees with the float32 loop")
    return results


if __name__ == "__main__":
    main()
