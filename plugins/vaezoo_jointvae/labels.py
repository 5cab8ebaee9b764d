"""Measure which dataset label each category of a JointVAE stands for, and write it on the card.

    python -m vaezoo_jointvae.labels NAME_OR_CARD --data-root DIR [--split test] [--write]

The matching is the one ``cluster_accuracy`` scores (:func:`~vaezoo_jointvae.metrics.match_categories` on the
first categorical part's argmax), so ``model.predict_label`` on the same split is exactly as accurate as the
card's ``cluster_accuracy``. ``--write`` stores it as ``[labels.PART]`` with this command.
"""

from __future__ import annotations

import argparse
import signal
import sys

from vaezoo.errors import DataError, VaezooError
from vaezoo.signals import StopSignals, exit_finished, stopped_words
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
    """The command line: print the matching and its accuracy; ``--write`` stores it on the card. Ctrl-C, SIGTERM and
    SIGHUP end it as they end a ``vaezoo`` command: one line, exit code 128 + the signal's number (130 for Ctrl-C),
    the card written whole or not at all."""
    parser = argparse.ArgumentParser(prog="python -m vaezoo_jointvae.labels", description=SUMMARY)
    parser.add_argument("card", help="a zoo name, a card file or a folder holding one card")
    parser.add_argument("--data-root", help="the folder holding the dataset (default: VAEZOO_DATA or vaezoo's)")
    parser.add_argument("--split", default="test", help="the split to match on (default: test)")
    parser.add_argument("--device", help="torch device (default: cpu)")
    parser.add_argument("--write", action="store_true", help="store the matching on the card as [labels.PART]")
    args = parser.parse_args(argv)
    stops = StopSignals(defer=False)  # SIGTERM and SIGHUP clean up as Ctrl-C does
    try:
        with stops:
            _run(args)
    except VaezooError as exc:
        if stops.received is None:
            print(f"error: {printable(str(exc))}", file=sys.stderr)
            return 1
    except KeyboardInterrupt as exc:  # the card is written whole or not at all (update_card)
        stops.received = stops.received or getattr(exc, "signal", signal.SIGINT)
    if stops.received is not None:  # raised, or swallowed by code that caught it
        print(f"error: {stopped_words(stops.received)}", file=sys.stderr)
        return 128 + stops.received
    return 0


def _run(args: argparse.Namespace) -> None:
    """Measure the matching of the card ``args`` name, print it, and with ``--write`` store it on the card."""
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


if __name__ == "__main__":
    exit_finished(main())
