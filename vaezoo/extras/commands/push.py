"""``vaezoo push``: upload a card, its weights, config.json and a Hub model card to a Hugging Face Hub repository;
``--all OWNER --dry-run`` stages the whole zoo as a Hub collection."""

import argparse
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from vaezoo.cli.common import add_card, card_arg, path_arg, printable

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
                        "collection.json, the Hub collection gathering them (give no NAME or OWNER/REPO)")
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
    from vaezoo.errors import OutputError

    if args.owner is not None and (args.name or args.repo):
        raise OutputError("--all OWNER pushes the whole zoo; give no NAME or OWNER/REPO with it")
    if args.owner is None and not (args.name and args.repo):
        raise OutputError("give NAME and OWNER/REPO (vaezoo push NAME OWNER/REPO), or --all OWNER --dry-run")
    if args.dry_run and (args.commit_message is not None or args.revision is not None):
        raise OutputError("--commit-message and --revision go with an upload; --dry-run commits nothing")
    folder = Path(args.out) if args.out else None
    if folder is None:
        return _push(args, None)
    from vaezoo.store.files import new_folder_mode, temporaries
    from vaezoo.store.locks import folder_lock

    if folder.exists() and not folder.is_dir():
        raise OutputError(f"--out {folder} is not an empty folder; give a new or empty one")
    with folder_lock(folder):  # its file beside the folder, which is uploaded whole; another staging waits
        if folder.is_dir() and any(folder.iterdir()):
            raise OutputError(f"--out {folder} is not an empty folder; give a new or empty one")
        for stale in temporaries(folder.parent, f".{folder.name}.", ".tmp"):  # a staging killed before it moved in
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
        staging.chmod(stat.S_IMODE(folder.stat().st_mode) if folder.is_dir() else new_folder_mode())
        try:  # staged beside, then moved in whole: an error, Ctrl-C or kill leaves --out as it was
            code = _push(args, staging, shown=folder)
            if folder.is_dir():
                folder.rmdir()
            staging.rename(folder)
            return code
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _push(args, folder: Path | None, shown: Path | None = None) -> int:
    """``vaezoo push``, staging into ``folder`` (None: a new temporary folder) the files printed as in ``shown``
    (``--out``, where they are moved once staged)."""
    from vaezoo.extras.hub_push import push, stage

    if args.owner is not None:
        return _stage_zoo(args.owner, folder, args.dry_run, shown)
    card = card_arg(args.name)
    if args.dry_run:
        folder = folder or Path(tempfile.mkdtemp(prefix="vaezoo-push-"))
        shown = shown or folder
        files = stage(card, args.repo, folder)
        print(printable(f"dry run: {shown} holds what 'vaezoo push' would upload to {args.repo}"), file=sys.stderr)
        for path in files:
            print(printable(shown / path.relative_to(folder)))
        return 0
    commit = push(card, args.repo, folder, private=args.private, commit_message=args.commit_message,
                  revision=args.revision)
    print(printable(f"pushed '{card.name}' to {args.repo}: {commit.commit_url}"), file=sys.stderr)
    print(printable(f"hf-hub:{args.repo}@{commit.oid}"))
    return 0


def _stage_zoo(owner: str, folder: Path | None, dry_run: bool, shown: Path | None = None) -> int:
    from vaezoo.entries.catalog import list_cards
    from vaezoo.errors import OutputError
    from vaezoo.extras.hub_push import MANIFEST_FILE, stage_collection

    if not dry_run:
        raise OutputError("--all stages the zoo with --dry-run only; upload each entry with "
                          "'vaezoo push NAME OWNER/NAME'")
    folder = folder or Path(tempfile.mkdtemp(prefix="vaezoo-push-"))
    shown = shown or folder
    files = stage_collection(list_cards(), owner, folder)
    print(printable(f"dry run: {shown} holds the zoo as the Hub collection of {owner}, one folder per repository "
                    f"{owner}/NAME, without the weights (verified, not copied); {shown / MANIFEST_FILE} gives "
                    f"every file each repository would receive, with its size and sha256, and the command that "
                    f"uploads it"), file=sys.stderr)
    for path in files:
        print(printable(shown / path.relative_to(folder)))
    return 0
