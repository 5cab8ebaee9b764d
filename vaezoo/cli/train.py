"""``vaezoo train``: train a card's model from its recipe (under ``torchrun`` for several processes)."""

import os
import shlex
import signal
import sys
from pathlib import Path

from vaezoo.cli.common import card_arg, device_arg, printable


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train a card's model from its recipe",
                       description="Train a card's model from its recipe. OUT is checked before the first step; "
                                   "OUT/checkpoint.pt is written every --checkpoint-every steps and when Ctrl-C or "
                                   "SIGTERM stops the run (the command that resumes it is printed) and, at the end, "
                                   "OUT/NAME.safetensors and the completed card OUT/NAME.toml (printed on stdout), "
                                   "so that OUT loads like a zoo entry. Run it under 'torchrun --nproc-per-node N "
                                   "-m vaezoo train ...' to train on N processes.")
    p.add_argument("card", help="a zoo name, a card's TOML file or a folder holding one card")
    p.add_argument("--out", required=True, help="the run's folder (checkpoint, weights, completed card)")
    p.add_argument("--name", help="the completed card's name (default: CARD-run); a built-in zoo entry's is refused")
    p.add_argument("--data-root", help="folder holding the dataset (default: $VAEZOO_DATA, else download)")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs (a resumed run may change them)")
    p.add_argument("--seed", type=int, help="override the recipe's seed")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:1, ... (default: cpu)")
    p.add_argument("--max-steps", type=int,
                   help="stop when the run reaches step N, with a checkpoint to --resume from (no weights written)")
    p.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default: the recipe's)")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.train import Interrupted, train

    main_rank = os.environ.get("RANK", "0") == "0"  # under torchrun, rank 0 speaks for the run
    try:
        result = train(card_arg(args.card), Path(args.out), data_root=args.data_root, epochs=args.epochs,
                       resume=args.resume, seed=args.seed, device=args.device, max_steps=args.max_steps,
                       checkpoint_every=args.checkpoint_every, name=args.name)
    except Interrupted as stop:
        if main_rank:
            _report_stop(stop, args)
        return 128 + stop.signal
    if result.card_path is not None:
        print(result.card_path)
    elif main_rank and result.step < result.total:
        print(printable(f"stopped at step {result.step} of {result.total}; continue with: {resume_command(args)}"),
              file=sys.stderr)
    return 0


def _report_stop(stop, args) -> None:
    """Say on stderr where the signal left the run and, when a checkpoint holds it, the command that resumes it."""
    from vaezoo.checkpoints import CHECKPOINT

    name = signal.Signals(stop.signal).name
    checkpoint = Path(args.out) / CHECKPOINT
    if stop.step is not None:
        print(printable(f"stopped by {name} at step {stop.step}; the checkpoint {checkpoint} holds it"),
              file=sys.stderr)
    elif checkpoint.exists():
        print(printable(f"stopped by {name}; the last checkpoint is {checkpoint}"), file=sys.stderr)
    else:
        print(f"stopped by {name} before the first checkpoint; nothing to resume", file=sys.stderr)
        return
    print(printable(f"resume with: {resume_command(args)}"), file=sys.stderr)


def resume_command(args) -> str:
    """The command line that ran ``args`` (as parsed), with ``--resume``: it continues the run where it stopped.

    The program is ``vaezoo``, ``PYTHON -m vaezoo`` as it was typed, or under torchrun
    ``torchrun --nproc-per-node N -m vaezoo`` (the torchrun options of one machine).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        program = ["torchrun", "--nproc-per-node", os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]),
                   "-m", "vaezoo"]
    elif Path(sys.argv[0]).name == "__main__.py":
        program = [sys.orig_argv[0], "-m", "vaezoo"]
    else:
        program = ["vaezoo"]
    words = [*program, "train", args.card, "--out", args.out]
    for key, value in vars(args).items():
        if key in ("command", "func", "card", "out", "resume") or value is None or value is False:
            continue
        option = "--" + key.replace("_", "-")
        words += [option] if value is True else [option, str(value)]
    return shlex.join([*words, "--resume"])
