"""``vaezoo push``: upload a card, its weights, config.json and a Hub model card to a Hugging Face Hub repository;
``--all OWNER --dry-run`` stages the whole zoo as a Hub collection."""

import argparse
import sys

from vaezoo.cli.common import add_card, card_arg, data_alone_on_stdout, path_arg, print_data, printable

HELP = "upload a model to a Hugging Face Hub repository"
"""What ``vaezoo --help`` says of the command."""


def add_arguments(p) -> None:
    p.description = ("Upload a card, its verified weights, config.json and a Hub model card "
                     "(README.md with YAML metadata) to OWNER/REPO in one commit; load it back with "
                     "vaezoo.load('hf-hub:OWNER/REPO'). Needs pip install \"vaezoo[hub]\" and a "
                     "Hub token with write access ('hf auth login' or HF_TOKEN).")
    add_card(p, "name", nargs="?")
    p.add_argument("repo", nargs="?", type=repo_id, metavar="OWNER/REPO", help="the Hub repository (created if needed)")
    p.add_argument("--all", metavar="OWNER", type=owner, dest="owner",
                   help="with --dry-run: stage every zoo entry with weights as the repository OWNER/NAME, without "
                        "copying the weights (manifest.json gives every file with its size and sha256), and "
                        "collection.json, the Hub collection gathering them (give no CARD or OWNER/REPO)")
    p.add_argument("--dry-run", action="store_true",
                   help="write the folder that would be uploaded and list its files; upload nothing")
    p.add_argument("-o", "--out", type=path_arg, metavar="DIR",
                   help="a new or empty folder to write the upload into, kept (default: a temporary folder, "
                        "printed with --dry-run, removed after an upload)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("-m", "--commit-message", metavar="TEXT", help="the commit's message (default: vaezoo push NAME)")
    p.add_argument("--revision", metavar="BRANCH",
                   help="commit to this branch, created from main if needed (default: main)")


def repo_id(value: str) -> str:
    """argparse type of the repository: ``OWNER/REPO``."""
    from vaezoo.entries.huggingface import REPO_ID

    if REPO_ID.fullmatch(value) is None:
        raise argparse.ArgumentTypeError(f"'{printable(value)}' is not a Hub repository; write OWNER/REPO "
                                         f"(letters, digits, '-', '_' and '.')")
    return value


def owner(value: str) -> str:
    """argparse type of ``--all``: a Hub user or organisation."""
    from vaezoo.entries.huggingface import REPO_ID

    if REPO_ID.fullmatch(f"{value}/x") is None:
        raise argparse.ArgumentTypeError(f"'{printable(value)}' is not a Hub user or organisation (letters, digits, "
                                         f"'-', '_' and '.')")
    return value


def run(args) -> int:
    from vaezoo.extras.hub_push import MANIFEST_FILE, push_or_stage

    with data_alone_on_stdout():  # what a part prints while the model is built goes to stderr
        report = push_or_stage(card_arg(args.name) if args.name else None, args.repo, owner=args.owner,
                               dry_run=args.dry_run, out=args.out, private=args.private,
                               commit_message=args.commit_message, revision=args.revision)
    if report.commit is not None:
        print(printable(f"pushed '{args.name}' to {args.repo}: {report.commit.commit_url}"), file=sys.stderr)
        print_data(printable(f"hf-hub:{args.repo}@{report.commit.oid}"))
        return 0
    if report.owner is not None:
        print(printable(f"dry run: {report.folder} holds the zoo as the Hub collection of {report.owner}, one folder "
                        f"per repository {report.owner}/NAME, without the weights (verified, not copied); "
                        f"{report.folder / MANIFEST_FILE} gives every file each repository would receive, with its "
                        f"size and sha256, and the command that uploads it"), file=sys.stderr)
    else:
        print(printable(f"dry run: {report.folder} holds what 'vaezoo push' would upload to {report.repo}"),
              file=sys.stderr)
    for path in report.files:
        print_data(printable(path))
    return 0
