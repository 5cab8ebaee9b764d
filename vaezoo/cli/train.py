"""``vaezoo train``: train a card's model from its recipe (under ``torchrun`` for several processes)."""

from pathlib import Path

from vaezoo.cli.common import card_arg, device_arg


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train a card's model from its recipe",
                       description="Train a card's model from its recipe. Writes OUT/checkpoint.pt every "
                                   "--checkpoint-every steps and, at the end, OUT/NAME.safetensors and the "
                                   "completed card OUT/NAME.toml (printed on stdout). Run it under "
                                   "'torchrun --nproc-per-node N -m vaezoo train ...' to train on N processes.")
    p.add_argument("card", help="a zoo name or a card's TOML file")
    p.add_argument("--out", required=True, help="output directory (checkpoint, weights, completed card)")
    p.add_argument("--data-root", help="folder holding the dataset (default: $VAEZOO_DATA, else download)")
    p.add_argument("--epochs", type=int, help="override the recipe's epochs")
    p.add_argument("--seed", type=int, help="override the recipe's seed")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:1, ... (default: cpu)")
    p.add_argument("--max-steps", type=int,
                   help="stop when the run reaches step N, with a checkpoint to --resume from (no weights written)")
    p.add_argument("--checkpoint-every", type=int, help="steps between checkpoints (default: the recipe's)")
    p.set_defaults(func=run)


def run(args) -> int:
    from vaezoo.train import train

    result = train(card_arg(args.card), Path(args.out), data_root=args.data_root, epochs=args.epochs,
                   resume=args.resume, seed=args.seed, device=args.device, max_steps=args.max_steps,
                   checkpoint_every=args.checkpoint_every)
    if result.card_path is not None:
        print(result.card_path)
    return 0
