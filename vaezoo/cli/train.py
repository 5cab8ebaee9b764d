"""``vaezoo train``: train a card's model from its recipe (under ``torchrun`` for several processes)."""

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from vaezoo.cli.common import (add_card, add_data_root, add_device, card_arg, path_arg, print_data, printable,
                               seed_arg, whole_arg)
from vaezoo.terminal import shell_join


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train a card's model from its recipe",
                       description="Train a card's model from its recipe. OUT is checked before the first step; "
                                   "OUT/checkpoint.pt is written every --checkpoint-every steps and when Ctrl-C, "
                                   "SIGTERM or SIGHUP stops the run (the command that resumes it is printed) and, at "
                                   "the end, OUT/NAME.safetensors and the completed card OUT/NAME.toml (printed on "
                                   "stdout), so that OUT loads like a zoo entry. Run it under 'torchrun "
                                   "--nproc-per-node N -m vaezoo train ...' to train on N processes.")
    add_card(p)
    p.add_argument("-o", "--out", type=path_arg, required=True, metavar="DIR",
                   help="the run's folder (checkpoint, weights, completed card)")
    p.add_argument("--name", help="the completed card's name (default: CARD-run); a built-in zoo entry's is refused")
    add_data_root(p)
    p.add_argument("--epochs", type=whole_arg, metavar="N",
                   help="override the recipe's epochs (a resumed run may change them)")
    seed = p.add_mutually_exclusive_group()
    seed.add_argument("--seed", type=seed_arg, metavar="N", help="override the recipe's seed")
    seed.add_argument("--seeds", type=seeds_arg, metavar="N,N-M,...",
                      help="train one model per seed as an ensemble (one step for all), seed N in OUT/seed-N; "
                           "each ends as training that seed alone would, to float rounding (bit for bit for a "
                           "convolutional model on the CPU, whose members run in turn); N-M is every seed from N "
                           "to M; under "
                           "torchrun the seeds are shared out over the processes")
    p.add_argument("--sweep", action="append", metavar="KEY=V1,V2,...",
                   help="also train each value of the card field KEY (a dotted path such as "
                        "model.regularizers.0.beta, or its last part when that names one field), in "
                        "OUT/KEY=VALUE/seed-N; repeat for a grid")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--no-eval", action="store_true",
                   help="write the finished run's card without measuring its metrics (a long evaluation, such as "
                        "vae-mnist's 5,000-sample log-likelihood, is left to 'vaezoo eval OUT --write')")
    add_device(p)
    p.add_argument("--max-steps", type=whole_arg, metavar="N",
                   help="stop when the run reaches step N: a checkpoint to --resume from, and weights and a card "
                        "marked as stopped short, not evaluated")
    p.add_argument("--checkpoint-every", type=whole_arg, metavar="N",
                   help="steps between checkpoints (default: the recipe's)")
    p.add_argument("--precision", choices=["fp32", "tf32", "tf32-conv", "bf16-mixed", "float32", "bf16"],
                   help="override the recipe's precision: fp32; tf32 (matrix products and convolutions on a GPU in "
                        "TF32); tf32-conv (torch's default flags: convolutions in TF32; old name float32); "
                        "bf16-mixed (the forward pass under autocast in bfloat16; old name bf16)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="run the forward pass through torch.compile, or not (default: the recipe's)")
    p.set_defaults(func=run, imports=["torch"])  # imported before the command runs: see cli.main


MOST_SEEDS = 100_000
"""The most seeds ``--seeds`` takes: a range beyond it is a typo, not an ensemble."""


def seeds_arg(value: str) -> list[int]:
    """argparse type of ``--seeds``: whole numbers and inclusive ranges separated by commas, e.g. ``0,1,2``,
    ``0-4`` or ``0-3,8``; spaces around the numbers are ignored (``" 0, 1"``, ``"0 - 4"``), as ``--sweep``
    ignores them around its values."""
    import argparse

    seeds: list[int] = []
    try:
        for part in value.split(","):
            first, dash, last = part.partition("-")
            low = seed_arg(first.strip())
            high = seed_arg(last.strip()) if dash else low
            if high < low or len(seeds) + high - low >= MOST_SEEDS:
                raise argparse.ArgumentTypeError
            seeds += range(low, high + 1)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a list of seeds, each a whole number from 0 to 2^63 - 1 "
                                         f"or a range of them, at most {MOST_SEEDS:,} in all; write them like 0,1,2 "
                                         f"or 0-4") from None
    return seeds


def run(args) -> int:
    from vaezoo.training.train import Interrupted, run_recipe

    try:
        results = run_recipe(card_arg(args.card), Path(args.out), seeds=args.seeds, sweeps=args.sweep or [],
                             seed=args.seed, data_root=args.data_root, epochs=args.epochs, resume=args.resume,
                             device=args.device, max_steps=args.max_steps, checkpoint_every=args.checkpoint_every,
                             name=args.name, precision=args.precision, compile=args.compile,
                             evaluate=not args.no_eval)
    except Interrupted as stop:
        if stop.reports:
            _report_stop(stop, args)
        return 128 + stop.signal
    for result in results:
        if result.card_path is not None:
            _report_metrics(result)
            print_data(printable(result.card_path))
    if failed := [r.error for r in results if r.error]:
        short = sum(r.error is None and r.step < r.total for r in results)
        print(printable(_stopped_early(len(failed), short, len(results))), file=sys.stderr)
        return 1
    stopped = [r for r in results if r.step < r.total]
    if stopped and stopped[0].reports:
        print(printable(f"stopped at {_where_stopped(stopped, len(results))}; continue with: "
                        f"{resume_command(args, until=None)}"), file=sys.stderr)
    return 0


def _stopped_early(failed: int, short: int, runs: int) -> str:
    """The closing line of a command whose ``failed`` of ``runs`` runs stopped early (a loss that became NaN, a step
    that overflowed), each named on its own line above, and ``short`` others stopped at ``--max-steps``."""
    if failed == runs:
        return ("the run stopped early (its line above says why)" if runs == 1
                else f"all {runs:,} runs stopped early (their lines above say why); none finished")
    which = "its line above names it" if failed == 1 else "their lines above name them"
    rest = runs - failed
    others = "the other" if rest == 1 else f"the other {rest:,}"
    if short == 0:
        went = f"{others} finished"
    elif short == rest:
        went = f"{others} stopped at --max-steps"
    else:
        went = f"of the other {rest:,}, {rest - short:,} finished and {short:,} stopped at --max-steps"
    return f"{failed:,} of {runs:,} runs stopped early ({which}); {went}"


def _world() -> str:
    """The processes of this run, as torchrun sets them in ``WORLD_SIZE`` ("1" where unset): the run has checked
    it (:func:`vaezoo.training.launch.launch`) before anything is reported."""
    return os.environ.get("WORLD_SIZE", "").strip() or "1"


def _where_stopped(stopped, runs: int) -> str:
    """Where ``--max-steps`` left the ``stopped`` runs of the command's ``runs``: ``step N of M`` where all stopped
    at one step of one total, else each run's own step and total (a sweep of ``epochs`` gives each its own),
    with its folder."""
    if len({(r.step, r.total) for r in stopped}) == 1 and len(stopped) == runs:
        return f"step {stopped[0].step:,} of {stopped[0].total:,}"
    return ", ".join(f"step {r.step:,} of {r.total:,} in {r.folder}" for r in stopped)


def _report_metrics(result) -> None:
    """Say on stderr what the finished run measured, one line: its card's metrics, or the command that measures
    them (``--no-eval``, or a run stopped early)."""
    if result.measure_command is not None:
        print(printable(f"{result.folder}: not evaluated; measure it with: {result.measure_command}"), file=sys.stderr)
        return
    shown = ", ".join(f"{name} {metric.value:.4g}" for name, metric in result.card.metrics.items())
    print(printable(f"{result.folder}: measured {shown}"), file=sys.stderr)


def _report_stop(stop, args) -> None:
    """Say on stderr where the signal left the run and, when a checkpoint holds it, the command that resumes it."""
    name = signal.Signals(stop.signal).name
    checkpoints = stop.checkpoints
    names, several = ", ".join(map(str, checkpoints)), len(checkpoints) > 1
    if stop.step is not None:
        print(printable(f"stopped by {name} at step {stop.step}; the checkpoint{'s' * several} {names} "
                        f"hold{'' if several else 's'} it"), file=sys.stderr)
    elif any(c.exists() for c in checkpoints):
        print(printable(f"stopped by {name}; the last checkpoint{'s are' if several else ' is'} {names}"),
              file=sys.stderr)
    else:
        print(f"stopped by {name} before the first checkpoint; nothing to resume", file=sys.stderr)
        return
    print(printable(f"resume with: {resume_command(args)}"), file=sys.stderr)


def resume_command(args, until: str | None = "max_steps") -> str:
    """The command line that ran ``args`` (as parsed), with ``--resume``: it continues the run where it stopped.

    ``until=None`` leaves out ``--max-steps``: the run stopped there, and continues to its end.

    The program is ``vaezoo`` (the path it was run by, where ``vaezoo`` on the PATH is another program or
    none: a virtual environment not activated), ``PYTHON -m vaezoo`` as it was typed, under torchrun
    ``torchrun --nproc-per-node N -m vaezoo`` (the torchrun options of one machine), or ``PYTHON -m vaezoo``, this
    Python's full path, where :func:`vaezoo.cli.main` was called inside another program (a Jupyter kernel, whose
    ``sys.argv[0]`` is ``ipykernel_launcher.py``, or a script).
    """
    launcher = Path(next(iter(sys.argv), ""))
    if (world := _world()) != "1":
        program = ["torchrun", "--nproc-per-node", os.environ.get("LOCAL_WORLD_SIZE", world), "-m", "vaezoo"]
    elif launcher.name == "__main__.py":
        program = [sys.orig_argv[0], "-m", "vaezoo"]
    elif launcher.stem != "vaezoo":
        program = [sys.executable, "-m", "vaezoo"]
    else:
        on_path = shutil.which("vaezoo")
        ran = os.path.realpath(sys.argv[0])
        program = ["vaezoo" if on_path is not None and os.path.realpath(on_path) == ran else sys.argv[0]]
    words = [*program, "train", args.card, "--out", args.out]
    for key, value in vars(args).items():
        if key == "compile" and value is False:
            words.append("--no-compile")
            continue
        if key in ("command", "func", "imports", "card", "out", "resume") or value is None or value is False:
            continue
        if key == "max_steps" and until is None:
            continue
        option = "--" + key.replace("_", "-")
        if key == "sweep":
            words += [w for sweep in value for w in (option, sweep)]
            continue
        if key == "seeds":
            value = seeds_text(value)
        words += [option] if value is True else [option, str(value)]
    return shell_join([*words, "--resume"])


def seeds_text(seeds: list[int]) -> str:
    """``seeds`` as ``--seeds`` reads them back, in their order, each run of 3 or more consecutive seeds as a range:
    ``0-200``, not the 201 numbers."""
    parts, start = [], 0
    for end in range(1, len(seeds) + 1):
        if end == len(seeds) or seeds[end] != seeds[end - 1] + 1:
            run = seeds[start:end]
            parts.append(f"{run[0]}-{run[-1]}" if len(run) >= 3 else ",".join(map(str, run)))
            start = end
    return ",".join(parts)
