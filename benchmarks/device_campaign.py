"""The GPU campaign: train a plan of recipes, each recipe's seeds as one ensemble, within a deadline, and bring
back everything that finished as a few files (the device tool returns at most 8 files of at most 16 MiB).

    python benchmarks/device_campaign.py --device cuda --deadline 480      # the default plan, into $OUT
    python benchmarks/device_campaign.py --device cpu --steps 50 --plan PLAN --out DIR      # a dry run
    python benchmarks/device_campaign.py unpack DIR --out runs/     # back on this machine: run folders

What it does, in order:

1. Checks the environment: torch, the device, and every package vaezoo needs; those missing are listed
   before anything trains (exit status 2).
2. Renders the plan's dataset once, where it runs (dSprites is never copied to the device machine).
3. Measures each recipe's fused step (every seed in one step), in both formulations of the stacked step
   (``vmap`` and ``loop``), over a few hundred steps of a throwaway ensemble; the faster trains.
4. Trains the plan in its order. A recipe starts only if its measured time fits before the deadline, less
   room to pack it; one that runs over is stopped at the deadline and brought back as partial. As soon as
   a recipe finishes, its members' weights and cards go into ``OUT/NAME.campaign.safetensors`` (one file a
   recipe), and its members are evaluated in the background, on the device, in one process a recipe
   (``vaezoo eval RUN [RUN ...] --write --device DEVICE --jobs N``, in full float32: the dataset read once, each
   card written as soon as its member is measured, the scikit-learn fits on N of the machine's cores); each
   member's card, metrics included, is packed in as it is written. Members not measured by the deadline are
   left to the CPU (``vaezoo eval RUN [RUN ...] --write`` on the unpacked runs skips those that hold their
   metrics).
5. Writes ``OUT/campaign.json``: the environment, the step times, what trained, what did not and why.

``unpack`` turns a packed file back into run folders (``DIR/NAME/seed-N``: weights and card), each of which
loads like a zoo entry and which ``vaezoo seeds`` reads.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLAN = Path(__file__).with_name("campaign.toml")
STATE = Path(__file__).with_name("campaign-state")  # checkpoints of recipes trained in part, for the next span
MAX_FILE = 16 * 2**20  # what the device tool brings back, per file
FINISHED = "finished.json"  # in a recipe's --state folder, written by `keep`: later spans skip the recipe
# `vaezoo eval RUN [RUN ...] --write --device DEVICE --jobs N` in full float32 (no TF32 on CUDA), so that the CPU can
# check the cards it writes
EVAL = ("import sys, torch; torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False; "
        "from vaezoo.cli import main; "
        "sys.exit(main(['eval', *sys.argv[3:], '--write', '--device', sys.argv[1], '--jobs', sys.argv[2]]))")


def missing_packages() -> list[str]:
    """vaezoo's requirements (from its metadata, else the checkout's pyproject.toml) that are not installed."""
    try:
        wanted = importlib.metadata.requires("vaezoo") or []
    except importlib.metadata.PackageNotFoundError:
        wanted = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    missing = []
    for requirement in wanted:
        if "extra ==" in requirement:
            continue
        name = re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def environment(device: str) -> dict:
    """What the campaign runs on; exits with status 2, listing what is missing, before anything trains."""
    missing = missing_packages()
    if missing:
        print(f"missing packages: {', '.join(missing)}; carry their wheels (benchmarks/README.md)", file=sys.stderr)
        sys.exit(2)
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "device": device,
            "cpus": os.cpu_count(), "vaezoo": importlib.metadata.version("vaezoo")}
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            print("--device cuda, but torch sees no CUDA device here", file=sys.stderr)
            sys.exit(2)
        info.update(gpu=torch.cuda.get_device_name(device), cuda=torch.version.cuda)
    return info


class Clock:
    """Notes when each step of :func:`vaezoo.training.ensemble.fit_ensemble` ended (it reports every step)."""

    ends: dict[int, float] = {}

    @classmethod
    def reporter(cls, base):
        class Timed(base):
            def update(self, step, images, values):
                cls.ends[step] = time.perf_counter()
                super().update(step, images, values)

        return Timed


def member_cards(card, seeds):
    from vaezoo.training.sweeps import members

    return members(card, seeds, [])


def ensemble(card, seeds, dataset, out: Path, steps: int, device, formulation=None, resume: bool = False):
    """Train ``card``'s ``seeds`` as one ensemble to step ``steps`` in ``out`` (from the checkpoints there when
    ``resume``); their models, trained."""
    import torch

    from vaezoo.assemble import build_model
    from vaezoo.training.ensemble import fit_ensemble
    from vaezoo.training.loop import Plan, Run

    per_epoch = Plan.of(card.train, len(dataset), 1).per_epoch
    if steps > card.train.epochs * per_epoch:  # a dry run or a timing longer than the recipe: more epochs
        card = card.model_copy(update={"train": card.train.model_copy(update={"epochs": -(-steps // per_epoch)})})
    specs = member_cards(card, seeds)
    models = []
    for spec in specs:
        torch.manual_seed(spec.card.train.seed)  # as vaezoo train seeds a run's initial weights
        models.append(build_model(spec.card, device=device))
    runs = [(m, spec.card, out / spec.folder, spec.label) for m, spec in zip(models, specs)]
    try:
        members = fit_ensemble(runs, dataset, resume=resume, max_steps=steps, run=Run(device=torch.device(device)),
                               formulation=formulation)
    except KeyboardInterrupt as stop:  # the deadline: every member's checkpoint and model hold the step reached
        return specs, models, [getattr(stop, "step", None)] * len(specs), [None] * len(specs)
    return specs, models, [m.step for m in members], [m.error for m in members]


def step_time(card, seeds, dataset, scratch: Path, device, warm: int, measure: int, formulation=None) -> float:
    """Seconds per fused step of ``card``'s ensemble, timed over ``measure`` steps after ``warm``."""
    import vaezoo.training.ensemble

    Clock.ends = {}
    shutil.rmtree(scratch, ignore_errors=True)  # a throwaway ensemble: never one an earlier timing left
    original = vaezoo.training.ensemble.Reporter
    vaezoo.training.ensemble.Reporter = Clock.reporter(original)
    try:
        ensemble(card, seeds, dataset, scratch, warm + measure, device, formulation)
    finally:
        vaezoo.training.ensemble.Reporter = original
    return (Clock.ends[warm + measure] - Clock.ends[warm]) / measure


def pack(path: Path, specs, models, steps, errors, record: dict, cards: dict[str, str]) -> None:
    """Write a recipe's members into one safetensors file (atomically): weights ``seed-N/...``, and in its
    metadata the campaign record and each member's card (JSON)."""
    from safetensors.torch import save_file

    tensors, metadata = {}, {"campaign": json.dumps(record)}
    for spec, model in zip(specs, models):
        key = spec.folder.as_posix()
        tensors.update({f"{key}/{k}": v.detach().cpu().contiguous() for k, v in model.state_dict().items()})
        metadata[f"card/{key}"] = cards.get(key, "")
    tmp = path.with_name(f".{path.name}.tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    if tmp.stat().st_size > MAX_FILE:
        print(f"warning: {path.name} is {tmp.stat().st_size / 2**20:.1f} MiB, over what the device tool brings "
              f"back; train fewer seeds", file=sys.stderr)
    os.replace(tmp, path)


class Evaluations:
    """Background evaluations, one process a recipe (``vaezoo eval RUN [RUN ...] --write``) and ``at_once`` at a
    time, each on ``jobs`` cores for its scikit-learn fits; a member's card is read once its process has written
    it, so that a process stopped at the deadline still gives the members it finished."""

    def __init__(self, device: str, at_once: int, jobs: int):
        self.device, self.at_once, self.jobs = device, at_once, jobs
        self.waiting: list[list[tuple[str, Path]]] = []
        self.running: list[tuple[subprocess.Popen, list[tuple[str, Path]], float]] = []
        self.done: dict[str, dict] = {}
        self.lock = threading.Lock()

    def add(self, members: list[tuple[str, Path]]) -> None:
        """Evaluate one recipe's members, each ``(key, run folder)``, in one process."""
        with self.lock:
            self.waiting.append(members)
        self.poll()

    def poll(self) -> None:
        with self.lock:
            for entry in list(self.running):
                process, members, started = entry
                for key, run in members:  # a member's card is written as soon as it is measured
                    if key not in self.done and _measured(run):
                        self.done[key] = {"status": 0, "seconds": round(time.time() - started, 1),
                                          "card": _card_json(run)}
                if process.poll() is not None:
                    self.running.remove(entry)
                    for key, _ in members:
                        self.done.setdefault(key, {"status": process.returncode or 1,
                                                   "seconds": round(time.time() - started, 1), "card": None})
            while self.waiting and len(self.running) < self.at_once:
                members = self.waiting.pop(0)
                env = {**os.environ, "OMP_NUM_THREADS": "2", "VAEZOO_PROGRESS": "0"}
                log = open(members[0][1].parent / "eval.log", "w")  # noqa: SIM115 - the process owns it until it ends
                process = subprocess.Popen(
                    [sys.executable, "-c", EVAL, self.device, str(self.jobs), *(str(run) for _, run in members)],
                    stdout=log, stderr=subprocess.STDOUT, env=env)
                self.running.append((process, members, time.time()))

    def pending(self) -> int:
        with self.lock:
            return len(self.waiting) + len(self.running)

    def stop(self) -> None:
        with self.lock:
            for process, _, _ in self.running:
                process.kill()
                process.wait()


def _measured(run: Path) -> bool:
    """Whether the card in ``run`` holds what evaluating it measures."""
    from vaezoo.entries.catalog import parse_card
    from vaezoo.evaluation.report import holds_metrics

    [card] = run.glob("*.toml")
    try:
        return holds_metrics(parse_card(card))
    except Exception:  # noqa: BLE001 - a card being rewritten: read it at the next poll
        return False


def _card_json(run: Path) -> str:
    from vaezoo.entries.catalog import parse_card

    [card] = run.glob("*.toml")
    return parse_card(card).model_dump_json()


def run_campaign(args) -> int:
    start = time.perf_counter()
    out = Path(args.out or os.environ.get("OUT") or "campaign-out")
    out.mkdir(parents=True, exist_ok=True)
    report = {"environment": environment(args.device), "deadline_s": args.deadline, "recipes": []}
    print(json.dumps(report["environment"]), flush=True)

    import torch

    from vaezoo.assemble import load_dataset
    from vaezoo.entries.catalog import parse_card
    from vaezoo.entries.entry import write_entry
    from vaezoo.training.publish import own_card

    if args.device.startswith("cuda"):
        torch.backends.cudnn.benchmark = True
    plan = tomllib.loads(Path(args.plan).read_text())["recipe"]
    cards = [parse_card(REPO / entry["card"] if not Path(entry["card"]).is_absolute() else Path(entry["card"]))
             for entry in plan]
    seeds = [args.seeds or entry["seeds"] for entry in plan]
    finished = {card.name for card in cards if (Path(args.state) / card.name / FINISHED).exists()}
    for name in sorted(finished):
        print(f"{name}: finished in an earlier span ({Path(args.state) / name / FINISHED})", flush=True)
    if finished == {card.name for card in cards}:
        print("campaign: every recipe of the plan has finished", flush=True)
        report["seconds"] = round(time.perf_counter() - start, 1)
        _write_report(out, report)  # the span's report, which `keep` reads, even when it trained nothing
        return 0
    cards, seeds = zip(*[(card, s) for card, s in zip(cards, seeds) if card.name not in finished])
    data = cards[0].train.data
    t = time.perf_counter()
    dataset = load_dataset(data.name, None, "train", **data.options)
    report["dataset"] = {"name": data.name, "images": len(dataset), "seconds": round(time.perf_counter() - t, 1)}
    work, state = Path(args.work), Path(args.state)
    timings, formulations, measured = {}, {}, {}
    for card, card_seeds in zip(cards, seeds):
        if card.train.data != data:
            raise SystemExit(f"{card.name} trains on other data than {cards[0].name}; give it its own plan")
        for formulation in [args.formulation] if args.formulation else ["vmap", "loop"]:
            seconds = step_time(card, card_seeds, dataset, work / "measure" / card.name / formulation, args.device,
                                args.warm, args.measure, formulation)
            measured[f"{card.name} {formulation}"] = round(seconds * 1e3, 3)
            print(f"{card.name}: {len(card_seeds)} seeds in one step ({formulation}): {seconds * 1e3:.2f} ms per "
                  f"step ({len(card_seeds) * card.train.batch_size / seconds:,.0f} images/s)", flush=True)
            if card.name not in timings or seconds < timings[card.name]:
                timings[card.name], formulations[card.name] = seconds, formulation
    report["step_ms"] = measured
    report["formulation"] = formulations
    jobs = max(1, ((os.cpu_count() or 2) - 2) // args.eval_at_once)  # the cores training leaves, shared out
    evaluations = Evaluations(args.device, args.eval_at_once, jobs) if args.eval else None
    packed: list[tuple] = []

    def left() -> float:
        return args.deadline - (time.perf_counter() - start)

    for card, card_seeds in zip(cards, seeds):
        from vaezoo.training.loop import Plan

        total = args.steps or Plan.of(card.train, len(dataset), 1).total
        from_step = reached(state / card.name, card_seeds)
        needs = (total - from_step) * timings[card.name]
        entry = {"name": card.name, "seeds": card_seeds, "steps": total, "from_step": from_step,
                 "estimated_s": round(needs, 1)}
        report["recipes"].append(entry)
        partial = needs > left() - 30  # room to pack; its evaluations finish here or on the CPU later
        if partial and not args.partial:
            entry["status"] = f"not trained: {needs:.0f} s needed, {left():.0f} s left"
            print(f"{card.name}: {entry['status']}", flush=True)
            continue
        args.partial = args.partial and not partial  # one recipe at most is trained in part
        timer = threading.Timer(max(left() - 40, 1), os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t = time.perf_counter()
        specs, models, steps, errors = ensemble(card, card_seeds, dataset, state / card.name, total, args.device,
                                                formulations[card.name], resume=True)
        timer.cancel()
        entry["seconds"] = round(time.perf_counter() - t, 1)
        finished = all(s == total for s in steps)
        entry["status"] = "finished" if finished else "stopped by the deadline"
        entry["members"] = [{"seed": spec.card.train.seed, "step": s, "error": e}
                            for spec, s, e in zip(specs, steps, errors)]
        member_cards_json, members = {}, []
        for spec, model, s in zip(specs, models, steps):
            own = own_card(spec.card, model, card.name, s or 0)  # the zoo entry's own name
            run = work / "runs" / card.name / spec.folder
            run.mkdir(parents=True, exist_ok=True)
            write_entry(own, model.state_dict(), run)
            member_cards_json[spec.folder.as_posix()] = own.model_dump_json()
            members.append((f"{card.name}/{spec.folder.as_posix()}", run))
        if evaluations and finished:
            evaluations.add(members)
        pack(out / f"{card.name}.campaign.safetensors", specs, models, steps, errors, entry, member_cards_json)
        if not finished:  # what a later span resumes from: `keep` puts them back into --state
            for spec in specs:
                checkpoint = state / card.name / spec.folder / "checkpoint.pt"
                if checkpoint.exists():
                    shutil.copyfile(checkpoint, out / f"{card.name}.{spec.folder.name}.checkpoint.pt")
        packed.append((card, specs, models, steps, errors, entry, member_cards_json))
        print(f"{card.name}: {entry['status']} in {entry['seconds']} s; packed", flush=True)
        _write_report(out, report)
    while evaluations and evaluations.pending() and left() > 10:
        time.sleep(2)
        evaluations.poll()
    if evaluations:
        evaluations.stop()
        evaluations.poll()
        for card, specs, models, steps, errors, entry, cards_json in packed:
            entry["evaluations"] = {}
            for spec in specs:
                done = evaluations.done.get(f"{card.name}/{spec.folder.as_posix()}")
                entry["evaluations"][spec.folder.as_posix()] = (
                    {k: v for k, v in done.items() if k != "card"} if done else "not finished")
                if done and done["card"]:
                    cards_json[spec.folder.as_posix()] = done["card"]
            pack(out / f"{card.name}.campaign.safetensors", specs, models, steps, errors, entry, cards_json)
    report["seconds"] = round(time.perf_counter() - start, 1)
    _write_report(out, report)
    print(f"campaign: {report['seconds']} s; {out}", flush=True)
    return 0


def reached(folder: Path, seeds) -> int:
    """The step the checkpoints of ``seeds`` in ``folder`` (``seed-N/checkpoint.pt``) reached; 0 if one lacks it."""
    from vaezoo.entries.checkpoints import read_checkpoint

    paths = [folder / f"seed-{seed}" / "checkpoint.pt" for seed in seeds]
    if not all(p.exists() for p in paths):
        return 0
    return min(read_checkpoint(p, fix="remove it to start the recipe over").step for p in paths)


def keep(args) -> int:
    """Put the checkpoints a span brought back (``OUT/NAME.seed-N.checkpoint.pt``) into ``--state``, and mark
    the recipes it finished (their checkpoints removed, ``NAME/finished.json`` written) so later spans skip them."""
    from vaezoo.entries.checkpoints import read_checkpoint

    if not (Path(args.returned) / "campaign.json").is_file():
        print(f"{Path(args.returned) / 'campaign.json'}: not found; keep takes the folder a span's files came back "
              f"in, its campaign.json among them", file=sys.stderr)
        return 2
    for path in sorted(Path(args.returned).glob("*.checkpoint.pt")):
        name, seed = path.name.removesuffix(".checkpoint.pt").rsplit(".", 1)
        target = Path(args.state) / name / seed / "checkpoint.pt"
        if (Path(args.state) / name / FINISHED).exists():
            print(f"{path}: {name} finished in a later span; not kept")
            continue
        if target.exists():  # an earlier span's files, kept after a later span's, must not set the recipe back
            have, brought = (read_checkpoint(p, fix="remove it").step for p in (target, path))
            if have > brought:
                print(f"{target}: kept at step {have}; {path} holds step {brought}, an earlier span's")
                continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        print(target)
    report = json.loads((Path(args.returned) / "campaign.json").read_text())
    for entry in (e for e in report["recipes"] if e.get("status") == "finished"):
        folder = Path(args.state) / entry["name"]
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / FINISHED).write_text(json.dumps(entry, indent=1) + "\n")
        print(f"{folder / FINISHED}: {entry['name']} finished; unpack its {entry['name']}.campaign.safetensors")
    return 0


def _write_report(out: Path, report: dict) -> None:
    tmp = out / ".campaign.json.tmp"
    tmp.write_text(json.dumps(report, indent=1))
    os.replace(tmp, out / "campaign.json")


def unpack(args) -> int:
    """Write each member of packed files as a run folder ``OUT/NAME/seed-N`` (weights and card)."""
    from safetensors import safe_open

    from vaezoo.assemble import build_model
    from vaezoo.entries.entry import write_entry
    from vaezoo.entries.schema import Card
    from vaezoo.store.weights import load_weights

    files = sorted(Path(args.packed).glob("*.campaign.safetensors")) if Path(args.packed).is_dir() \
        else [Path(args.packed)]
    for path in files:
        with safe_open(str(path), "pt") as f:
            metadata = f.metadata()
            for key, card_json in ((k.removeprefix("card/"), v) for k, v in metadata.items() if k.startswith("card/")):
                card = Card.model_validate_json(card_json)
                model = build_model(card)
                state = {name.removeprefix(key + "/"): f.get_tensor(name) for name in f.keys()
                         if name.startswith(key + "/")}
                load_weights(model, state, str(path))
                run = Path(args.out) / card.name / key
                run.mkdir(parents=True, exist_ok=True)
                print(write_entry(card, model.state_dict(), run))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--plan", default=str(PLAN), help="the plan, TOML (default: benchmarks/campaign.toml)")
    parser.add_argument("--deadline", type=float, default=480, help="seconds for the whole campaign")
    parser.add_argument("--steps", type=int, help="train each recipe this many steps (a dry run), not its own")
    parser.add_argument("--seeds", type=lambda v: [int(s) for s in v.split(",")], help="override the plan's seeds")
    parser.add_argument("--out", help="where the results go (default: $OUT)")
    parser.add_argument("--work", default="/tmp/vaezoo-campaign", help="scratch: timings and run folders")
    parser.add_argument("--state", default=str(STATE),
                        help="the recipes' checkpoints, resumed from and written to "
                             "(default: benchmarks/campaign-state)")
    parser.add_argument("--warm", type=int, default=50, help="steps before a step time is measured")
    parser.add_argument("--measure", type=int, default=200, help="steps a step time is measured over")
    parser.add_argument("--formulation", choices=["vmap", "loop"], help="the ensemble's (default: the device's)")
    parser.add_argument("--no-eval", dest="eval", action="store_false", help="do not evaluate the runs")
    parser.add_argument("--partial", action="store_true",
                        help="train the first recipe that does not fit until the deadline, and bring back its "
                             "members' checkpoints (OUT/NAME.seed-N.checkpoint.pt) for a later span to resume")
    parser.add_argument("--eval-at-once", type=int, default=max(1, (os.cpu_count() or 2) // 6),
                        help="recipes evaluated at once, each in one process on the device; the cores training "
                             "leaves are shared out among them for the scikit-learn fits (default: a process for "
                             "each 6 cores, e.g. 2 of 16 cores, 7 each)")
    keeping = sub.add_parser("keep", help="the checkpoints a span brought back, into --state for the next span")
    keeping.add_argument("returned", help="the folder the span's files came back in")
    keeping.add_argument("--state", default=str(STATE))
    unpacking = sub.add_parser("unpack", help="packed files back into run folders")
    unpacking.add_argument("packed", help="a .campaign.safetensors file, or a folder of them")
    unpacking.add_argument("--out", required=True)
    args = parser.parse_args()
    return {"unpack": unpack, "keep": keep}.get(args.command, run_campaign)(args)


if __name__ == "__main__":
    sys.exit(main())
