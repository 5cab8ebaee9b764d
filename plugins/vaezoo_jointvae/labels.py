"""Measure which dataset label each category of a JointVAE stands for, and write it on the card.

    python -m vaezoo_jointvae.labels NAME_OR_CARD --data-root DIR [--split test] [--write]

The matching is the one ``cluster_accuracy`` scores (:func:`~vaezoo_jointvae.metrics.match_categories` on the
first categorical part's argmax), so ``model.predict_label`` on the same split is exactly as accurate as the
card's ``cluster_accuracy``. ``--write`` stores it as ``[labels.PART]`` with this command.
"""

from __future__ import annotations

import argparse
import sys

from vaezoo.errors import DataError, VaezooError
from vaezoo.terminal import printable, shell_join

SUMMARY = "Measure which dataset label each category of a JointVAE stands for, and write it on the card."
"""The command's description in its --help (the module's docstring is gone under ``python -OO``)."""


def measure_matching(card, data_root=None, split: str = "test", device=None):
    """The category -> label matching of ``card``'s model on ``split`` of its dataset.

    Args:
        card: a JointVAE card with weights.
        data_root: the folder holding the dataset (``--data-root``), or None for the default.
        split: the dataset split to match on.
        device: where to run the model (``"auto"`` too: :func:`vaezoo.devices.usable_device`).

    Returns:
        ``(part, matching, accuracy)`` as :func:`vaezoo_jointvae.metrics.matching_of`.
    """
    from vaezoo.assemble import card_dataset, load_model
    from vaezoo_jointvae.metrics import matching_of

    model = load_model(card, device=device)
    dataset = card_dataset(card, data_root, split)
    if dataset.labels is None:
        raise DataError(f"the {split} split of '{card.train.data.name}' has no labels to match categories to")
    return matching_of(model, dataset, device)


def labels_command(ref: str, data_root=None, split: str = "test") -> str:
    """The shell-quoted command that measures the matching of the card ``ref`` names (as a card records it)."""
    return shell_join(["python", "-m", "vaezoo_jointvae.labels", ref]
                      + (["--data-root", str(data_root)] if data_root else [])
                      + (["--split", split] if split != "test" else []), for_terminal=False)


def main(argv: list[str] | None = None) -> int:
    """The command line: print the matching and its accuracy; ``--write`` stores it on the card. Ctrl-C ends it with
    one line and exit code 130, as a shell gives."""
    parser = argparse.ArgumentParser(prog="python -m vaezoo_jointvae.labels", description=SUMMARY)
    parser.add_argument("card", help="a zoo name, a card file or a folder holding one card")
    parser.add_argument("--data-root", help="the folder holding the dataset (default: VAEZOO_DATA or vaezoo's)")
    parser.add_argument("--split", default="test", help="the split to match on (default: test)")
    parser.add_argument("--device", help="torch device (default: cpu)")
    parser.add_argument("--write", action="store_true", help="store the matching on the card as [labels.PART]")
    args = parser.parse_args(argv)
    try:
        from vaezoo.entries.catalog import card_reference, get_card
        from vaezoo.entries.entry import check_writable, update_card
        from vaezoo.version import __version__
        from vaezoo_jointvae.sections import LabelMatching, Labels, card_labels

        card = get_card(args.card)
        path = check_writable(card) if args.write else None  # before the measuring, not after
        part, matching, accuracy = measure_matching(card, args.data_root, args.split, args.device)
        print(f"{card.name} {part}: category -> label {matching.tolist()}; accuracy on {args.split} {accuracy:.4f}")
        if args.write:
            command = labels_command(card_reference(card), args.data_root, args.split)
            entry = LabelMatching(category_to_label=matching.tolist(), split=args.split, command=command,
                                  vaezoo_version=__version__)
            update_card(path, lambda now: now.model_copy(update={"sections": {
                **now.sections, "labels": Labels({**card_labels(now), part: entry})}}))
            print(f"wrote [labels.{part}] to {printable(str(path))}", file=sys.stderr)
    except VaezooError as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the card is written whole or not at all (update_card)
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
