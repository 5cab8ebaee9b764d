"""``vaezoo eval``: a card's metrics on the test split, optionally checked against the card."""

import argparse
import sys

from vaezoo.cli.common import (add_card, add_data_root, add_device, names_arg, nonnegative_arg, path_arg, print_json,
                               print_table, printable)
from vaezoo.terminal import counted, note


def add_parser(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a card's model on the test split (several cards: one table)")
    add_card(p, nargs="+")
    add_data_root(p)
    add_device(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    records = p.add_mutually_exclusive_group()
    records.add_argument("--check", action="store_true", help="exit 1 when a metric differs from the card")
    p.add_argument("--tolerance", type=nonnegative_arg, default=1e-4,  # vaezoo.evaluation.report.DEFAULT_TOLERANCE
                   help="relative tolerance of --check, of max(1, |card value|) (default 1e-4)")
    p.add_argument("--checkpoint", type=path_arg, metavar="PATH",
                   help="evaluate the model in a training checkpoint (OUT/checkpoint.pt of 'vaezoo train') "
                        "at its step, instead of the card's weights")
    p.add_argument("--metrics", type=names_arg, metavar="A,B",
                   help="compute only these registered metrics (e.g. mig_dlib,dci_disentanglement), not the losses; "
                        "--check compares them, --write adds them to the card")
    p.add_argument("--set", dest="settings", action="append", type=setting_arg, metavar="METRIC.SETTING=VALUE",
                   help="run METRIC with SETTING = VALUE (a TOML value) over the card's [eval_settings], e.g. "
                        "importance_log_likelihood.samples=200; repeatable; --write records it on the card")
    records.add_argument("--write", action="store_true",
                         help="record the measured metrics on the card's TOML file (e.g. a converted checkpoint's "
                              "card); with several cards, each as it is measured, skipping those that hold them")
    p.add_argument("--force", action="store_true",
                   help="with several cards and --write, measure a card that already holds the metrics too")
    p.add_argument("--jobs", type=jobs_arg, metavar="N",
                   help="worker processes of the scikit-learn fits (default: $VAEZOO_JOBS, else the cores this "
                        "process may use); the numbers do not depend on it")
    p.set_defaults(func=run, imports=["torch"])  # imported before the command runs: see cli.main


def setting_arg(text: str) -> tuple[str, str, object]:
    """``METRIC.SETTING=VALUE`` as ``(metric, setting, value)``, the value read as TOML."""
    from vaezoo.context import parse_value

    key, _, value = text.partition("=")
    metric, _, setting = key.strip().partition(".")
    if not (metric and setting and value.strip()):
        raise argparse.ArgumentTypeError(f"give METRIC.SETTING=VALUE, e.g. importance_log_likelihood.samples=200, "
                                         f"got '{text}'")
    try:
        return metric, setting.strip(), parse_value(value.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def jobs_arg(value: str) -> int:
    """argparse type of ``--jobs``: a whole number of processes, at least 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of processes >= 1, e.g. 2, got '{value}'")
    return number


def run(args) -> int:
    from vaezoo.evaluation.report import evaluate_cards

    settings: dict[str, dict] = {}
    for metric, setting, value in args.settings or ():
        settings.setdefault(metric, {})[setting] = value
    batch = evaluate_cards(args.card, checkpoint=args.checkpoint, data_root=args.data_root, device=args.device,
                           metrics=args.metrics, settings=settings, write=args.write, check=args.check,
                           force=args.force, jobs=args.jobs)
    try:
        return _print_batch(batch, args) if len(batch.runs) > 1 else _print_one(batch.runs[0].report, args)
    except KeyboardInterrupt:  # the cards were written whole (atomic_write) before this: say so, or they seem lost
        if written := [run.report.written for run in batch.runs if run.report and run.report.written]:
            note(f"{counted(len(written), 'card')} written before the interruption, each whole: "
                 f"{', '.join(str(card.path) for card in written)}")
        raise


def _print_one(report, args) -> int:
    """Print one card's report, then its notes and errors; 1 when a metric failed, or a check disagreed."""
    card = report.card
    comparisons = report.check(args.tolerance) if args.check else None
    failures = [str(c) for c in comparisons or () if not c.agrees]
    if args.json:
        print_json({"name": card.name, "checkpoint": args.checkpoint,
                    "step": card.train.steps if args.checkpoint else None, "metrics": report.results,
                    "not_finite": _spelled(report), "failed": report.failed,
                    "check_failures": failures if comparisons is not None else None})
    else:
        measured = f"checkpoint {args.checkpoint} at step {card.train.steps:,}" if args.checkpoint else "test split"
        print_table(("metric", "measured", "card"),
                    [(name, f"{value:.6g}", f"{card.metrics[name].value:.6g}" if name in card.metrics else "")
                     for name, value in report.results.items()], title=f"{card.name} ({measured})")
    _say_not_finite(report, args)
    for name, (recorded, measured) in report.unlike_card().items():
        print(printable(f"note: {name} ran with {_settings(measured)}; the card's value was measured with "
                        f"{_settings(recorded)}"), file=sys.stderr)
    if args.write:
        print(printable(f"wrote {counted(len(report.results), 'metric')} to {report.written.path}"), file=sys.stderr)
    if comparisons is not None:
        print(f"check: {len(comparisons) - len(failures)} of {len(comparisons)} metrics match the card within "
              f"relative tolerance {args.tolerance:g}{_rounding(comparisons)}", file=sys.stderr)
        _say_unchecked(report)
    for why in report.failed.values():
        print(printable(f"error: {why}"), file=sys.stderr)
    if failures:
        print(printable(f"error: {_differ(len(failures))} from the card beyond relative tolerance "
                        f"{args.tolerance:g}: " + "; ".join(failures)), file=sys.stderr)
        return 1
    return 1 if report.failed else 0


def _differ(count: int) -> str:
    """``1 metric differs``, ``3 metrics differ``."""
    return f"{counted(count, 'metric')} {'differs' if count == 1 else 'differ'}"


def _say_unchecked(report, run: str = "") -> None:
    """A note on stderr naming the metrics measured that the card does not hold, which a check cannot compare
    (``run``: the run it is of, in a batch)."""
    if unchecked := [name for name in report.results if name not in report.card.metrics]:
        print(printable(f"note: {run}not on the card, so not checked: {', '.join(unchecked)}"), file=sys.stderr)


def _spelled(report) -> dict[str, str]:
    """The results that are not finite numbers, as TOML writes them (``nan``, ``inf``, ``-inf``): JSON has no such
    numbers, and writes null for them."""
    return {name: str(report.results[name]) for name in report.not_finite}


def _say_not_finite(report, args, run: str = "") -> None:
    """A note on stderr for each result that is not a finite number, saying why and how it was written (``run``:
    the run it is of, in a batch)."""
    for name, why in report.not_finite.items():
        kept = [where for where, given in (("null in the JSON", args.json),
                                           (f"{report.results[name]} on the card", args.write)) if given]
        print(printable(f"note: {run}{why}" + (f" ({', '.join(kept)})" if kept else "")), file=sys.stderr)


def _rounding(comparisons) -> str:
    """What the check allowed the metrics that float rounding alone moves (their specs' ``rounding``), each named
    once however many runs it was checked on."""
    allowed: dict[float, list[str]] = {}
    for c in comparisons:
        if c.rounding and c.name not in allowed.setdefault(c.rounding, []):
            allowed[c.rounding].append(c.name)
    return "".join(f"; {', '.join(names)} within {value:g} (float rounding alone moves "
                   f"{'them' if len(names) > 1 else 'it'} that far)" for value, names in allowed.items())


def _settings(settings: dict) -> str:
    """``settings`` as a note says them, ``samples = 4, seed = 0``; none (a metric whose defaults are all None) as
    its defaults."""
    return ", ".join(f"{key} = {value!r}" for key, value in settings.items()) or "the metric's defaults"


def _print_batch(batch, args) -> int:
    """Print several runs as one table (a row per run, a column per metric), a summary, then each run's errors, last
    as a failing command's are; 1 when a run failed, or a check disagreed."""
    names = batch.metrics
    checks = batch.check(args.tolerance) if args.check else {}
    failures = {ref: [str(c) for c in compared if not c.agrees] for ref, compared in checks.items()}
    if args.json:
        print_json([{"run": run.ref, "name": run.name, "skipped": run.skipped, "error": run.error,
                     "metrics": run.report.results if run.report else None,
                     "not_finite": _spelled(run.report) if run.report else None,
                     "failed": run.report.failed if run.report else None,
                     "check_failures": failures.get(run.ref) if args.check else None} for run in batch.runs])
    else:
        def status(run) -> str:
            if run.skipped:
                return "skipped: holds the metrics (--force measures again)"
            if run.error or run.report.failed or failures.get(run.ref):
                return "failed"
            return "checked" if args.check else "written" if args.write else "measured"

        print_table(("run", "status", *names),
                    [(run.ref, status(run), *(f"{run.report.results[name]:.6g}"
                                              if run.report and name in run.report.results else "" for name in names))
                     for run in batch.runs], title=f"{len(batch.runs)} runs")
    measured = sum(run.report is not None for run in batch.runs)
    skipped = sum(run.skipped for run in batch.runs)
    checked = (f", checked against their cards within relative tolerance {args.tolerance:g}"
               f"{_rounding(c for compared in checks.values() for c in compared)}") if args.check else ""
    print(f"{measured} of {len(batch.runs)} runs measured" + (", written" if args.write else "")
          + (f", {skipped} skipped" if skipped else "") + checked, file=sys.stderr)
    for run in batch.runs:
        if run.report:
            _say_not_finite(run.report, args, f"{run.ref}: ")
            if args.check:
                _say_unchecked(run.report, f"{run.ref}: ")
    bad = False
    for run in batch.runs:
        whys = [run.error] if run.error else list(run.report.failed.values()) if run.report else []
        if failures.get(run.ref):
            whys.append(f"{_differ(len(failures[run.ref]))} from the card beyond relative tolerance "
                        f"{args.tolerance:g}: " + "; ".join(failures[run.ref]))
        for why in whys:  # a card that could not be read is named at the start of its error already
            named = why.startswith(f"{run.ref}: ")
            print(printable(f"error: {why}" if named else f"error: {run.ref}: {why}"), file=sys.stderr)
        bad = bad or bool(whys)
    return 1 if bad else 0
