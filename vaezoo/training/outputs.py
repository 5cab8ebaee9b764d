"""A run's output folder (``out``): checked before the first step, never overwriting another run's files,
and removed again, if the run made it, when the run ends before writing anything."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from vaezoo.entries.schema import Card
from vaezoo.errors import OutputError, Phrase
from vaezoo.store.files import folder_problem
from vaezoo.terminal import shell_quote
from vaezoo.entries.checkpoints import CHECKPOINT, check_recipe, read_checkpoint
from vaezoo.training.loop import checkpoint_exists_error

__all__ = ["check_layout", "prepare_out", "remove_empty"]


def prepare_out(out: Path, name: str, resume: bool, card: Card | None = None) -> list[Path]:
    """Check, before the run starts, that it can write its files in ``out`` and overwrites no other run's.

    ``out`` must be a folder (created if missing) vaezoo can create files in. Without ``resume`` it must
    hold no checkpoint and no finished run (a ``*.toml`` card, ``NAME.safetensors``); with ``resume``, no
    card other than ``NAME.toml`` (the folder must end holding one card); where another card is there (a run
    started under another ``--name``, or of another card), a checkpoint of another recipe than ``card``'s is
    named first, as the resume would name it; and the run's ``NAME.toml`` or ``NAME.safetensors`` only beside its
    checkpoint (without it the run would start afresh and replace them).

    Returns:
        The folders it created, outermost first (to remove should the run end before writing anything).

    Raises:
        OutputError, TrainingError: one line naming the path and what to do.
    """
    if out.exists() and not out.is_dir():
        raise OutputError.about("{out} {path} is a file, not a folder; choose another {out}", path=out)
    missing = [p for p in (out, *out.parents) if not p.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".vaezoo-probe.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError.about("cannot write in {out} {path}: {problem}; choose another {out}", path=out,
                                problem=folder_problem(out, exc)) from None
    cards = sorted(p.name for p in out.glob("*.toml"))
    if resume:
        others = [c for c in cards if c != f"{name}.toml"]
        if others:
            resumable = card is not None and (out / CHECKPOINT).is_file()
            if resumable:  # another card's run: say so as the resume would
                fix = Phrase("remove it to start over, or choose another {out}")
                check_recipe(read_checkpoint(out / CHECKPOINT, fix=fix), card)
            # the one card beside a checkpoint of this recipe names the run (an earlier vaezoo, which had no --name,
            # named it after its card): it is the name to resume with
            how = "{name} {run}, the run's name," if resumable and len(others) == 1 else \
                "the {name} the run was started with,"
            raise OutputError.about("{out} {path} holds the card {others}, not this run's {card}.toml; resume with "
                                    + how + " or choose another {out}", path=out, others=", ".join(others), card=name,
                                    run=shell_quote(Path(others[0]).stem))
        published = [f for f in (f"{name}.toml", f"{name}.safetensors") if (out / f).exists()]
        if published and not (out / CHECKPOINT).exists():  # starting afresh would replace them, metrics and all
            raise OutputError.about("{out} {path} holds the run's {published} but no {checkpoint} to resume from "
                                    "(removed?), and starting afresh would replace them; to train it again, choose "
                                    "another {out}", path=out, published=", ".join(published), checkpoint=CHECKPOINT)
        return missing
    if (out / CHECKPOINT).exists():
        raise checkpoint_exists_error(out / CHECKPOINT)
    finished = cards + [f"{name}.safetensors"] * (out / f"{name}.safetensors").exists()
    if finished:
        raise OutputError.about("{out} {path} already holds {finished}, the files of a finished run; choose "
                                "another {out}", path=out, finished=", ".join(finished))
    return missing


def check_layout(root: Path, alone: bool) -> None:
    """Refuse to mix a single run and an ensemble's members in one output folder ``root``.

    A single run (``alone``) writes its files in ``root``, so ``root`` must hold no member's folder with run
    files (``seed-N/``, or ``KEY=VALUE/seed-N/`` of a sweep); an ensemble writes its members' folders there,
    so ``root`` must hold no single run's card or checkpoint.

    Raises:
        OutputError: one line naming what ``root`` holds and what to do.
    """
    if alone:
        members = sorted({str(p.parent.relative_to(root)) for pattern in ("seed-*/*", "*=*/seed-*/*")
                          for p in root.glob(pattern) if p.name == CHECKPOINT or p.suffix == ".toml"})
        if members:
            # a sweep's members (KEY=VALUE/seed-N) are trained again only with the sweep: --seeds alone refuses them
            how = "the {sweep} (and {seeds}) it was started with" if any("=" in m for m in members) else "{seeds}"
            raise OutputError.about("{out} {path} holds the members of an ensemble ({members}); choose another "
                                    "{out}, or train the ensemble with " + how, path=root, members=", ".join(members))
    else:
        files = sorted(p.name for p in root.glob("*") if p.name == CHECKPOINT or p.suffix == ".toml")
        if files:
            raise OutputError.about("{out} {path} holds a single run ({files}), where an ensemble puts its members' "
                                    "folders; choose another {out}", path=root, files=", ".join(files))


def remove_empty(folders: list[Path]) -> None:
    """Remove the folders a run created, innermost first, as long as they are still empty."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:
            return
