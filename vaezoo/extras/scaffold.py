"""The plugin scaffold: a new plugin package (pyproject, hooks, a card and tests) for one kind of part, named
after the plugin, written whole or not at all (``vaezoo new-plugin NAME --kind KIND``)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from string import Template

from vaezoo.entries.schema import MAX_NAME
from vaezoo.errors import VaezooError
from vaezoo.store.files import RANDOM, folder_problem, new_folder_mode, temporaries
from vaezoo.store.locks import folder_lock, folder_lock_file

NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
CARD_SUFFIX = "-mnist"  # the longer of the cards' suffixes (a dataset's card is NAME-data)

# template file -> where it goes in the new package (formatted with the names of render()); KIND/ is the
# folder of the kind's own templates
FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "KIND/__init__.py.tmpl": "{package}/__init__.py",
    "KIND/card.toml.tmpl": "{package}/cards/{card}.toml",
    "KIND/test_plugin.py.tmpl": "tests/test_{package}.py",
    "py.typed.tmpl": "{package}/py.typed",  # PEP 561: the package's hints are for its users' type checkers
}

# kind -> (what it is in words, the module of its part)
KINDS = {
    "architecture": ("architecture", "model"),
    "latent": ("latent family", "latent"),
    "regularizer": ("regularizer", "regularizer"),
    "metric": ("metric", "metric"),
    "dataset": ("dataset", "data"),
    "net": ("net", "nets"),
    "likelihood": ("likelihood", "likelihood"),
}


def check_name(name: str) -> None:
    """Refuse a plugin name that is not a lowercase, hyphenated word, that an installed plugin already uses,
    or that names a part some plugin (the core included) registers: the new part would clash with it."""
    if not NAME.fullmatch(name):
        raise VaezooError.of_value("invalid plugin name {name!r}: use lowercase letters, digits and single hyphens, "
                                   "starting with a letter (e.g. 'sparse-vae')", name=name)
    if len(name) > MAX_NAME - len(CARD_SUFFIX):
        raise VaezooError.of_value("invalid plugin name of {length} characters: its card NAME{suffix} would be longer "
                                   "than a card's name may be ({most}); give at most {fits}", length=len(name),
                                   suffix=CARD_SUFFIX, most=MAX_NAME, fits=MAX_NAME - len(CARD_SUFFIX))
    if name == "vaezoo" or name.startswith("vaezoo-"):
        raise VaezooError.of_value("invalid plugin name '{name}': give it without the 'vaezoo-' prefix, which is "
                                   "added to the package's name", name=name)
    installed = {ep.name for ep in entry_points(group="vaezoo")}
    if name in installed:
        raise VaezooError(f"a plugin named '{name}' is already installed; choose another name")
    from vaezoo.plugins import KINDS as REGISTRIES
    from vaezoo.plugins import registry

    for kind in REGISTRIES:
        taken = sorted({name, name.replace("-", "_")} & set(registry(kind)))
        if taken:
            raise VaezooError(f"the name '{name}' is taken: {kind} '{taken[0]}' is registered by plugin "
                              f"'{registry(kind).plugin_of(taken[0])}'; choose another name")


def _ident(name: str, kind: str) -> str:
    """The name the part of plugin ``name`` registers: hyphens as underscores but for an architecture."""
    return name if kind == "architecture" else name.replace("-", "_")


def _refuse_taken_nets(name: str, kind: str) -> None:
    """Refuse a net plugin whose encoder or decoder name (``NAME_encoder``, ``NAME_decoder``) a plugin registers,
    which :func:`check_name` (the plugin's own name) does not see: the package would be discovered and then failed,
    its nets registered by two plugins."""
    if kind != "net":
        return
    from vaezoo.plugins import registry

    ident = _ident(name, kind)
    for registered in (f"{ident}_encoder", f"{ident}_decoder"):
        if registered in registry("net"):
            raise VaezooError(f"the name '{name}' is taken: the package would register the net '{registered}', "
                              f"which plugin '{registry('net').plugin_of(registered)}' registers; choose another name")


def render(name: str, kind: str = "architecture") -> dict[str, str]:
    """The new package's files, ``{relative path: text}``, for plugin ``name`` registering a part of ``kind``."""
    from vaezoo.version import __version__

    words, module = KINDS[kind]
    names = {
        "name": name,
        "ident": _ident(name, kind),
        "cls": "".join(word.capitalize() for word in name.split("-")),  # the part's class, e.g. SparseKl
        "kind": words,
        "distribution": f"vaezoo-{name}",
        "package": f"vaezoo_{name.replace('-', '_')}",
        "card": f"{name}-data" if kind == "dataset" else f"{name}{CARD_SUFFIX}",
        "vaezoo_version": __version__,
    }
    templates = resources.files("vaezoo.extras") / "templates" / "plugin"
    # the part's module first: a name its class cannot take is reported there
    files = {f"KIND/{module}.py.tmpl": f"{{package}}/{module}.py", **FILES}
    return {destination.format(**names): Template((templates / source.replace("KIND", kind)).read_text(
        encoding="utf-8")).substitute(names) for source, destination in files.items()}


def create_plugin(name: str, parent: Path, kind: str = "architecture") -> Path:
    """Write the package ``vaezoo-NAME`` into ``parent`` and return its directory.

    Args:
        name: the plugin's name (its entry-point name, and the name its part registers, with hyphens
            as underscores for a latent family, regularizer, metric or dataset).
        parent: the directory to create the package in; created if missing.
        kind: the part the package registers, a key of :data:`KINDS`.

    Returns:
        The new package's directory.
    """
    check_name(name)
    _refuse_taken_nets(name, kind)
    from vaezoo.plugins import NAME_CHECKS

    reserved = NAME_CHECKS.get(KINDS[kind][0])
    if reserved is not None and (problem := reserved(name.replace("-", "_"))):
        raise VaezooError(f"invalid name '{name}' for a {KINDS[kind][0]}: {problem}")
    if kind == "regularizer" and _ident(name, kind) == "reconstruction":  # the template names its term after it
        raise VaezooError(f"invalid name '{name}' for a regularizer: its loss term would be named 'reconstruction', "
                          f"the likelihood's term, which a model refuses to replace; choose another name")
    files = render(name, kind)
    sources = {relative: text for relative, text in files.items() if relative.endswith(".py")}
    for relative, text in sources.items():  # a regularizer's class is the name capitalised: 'true' made True
        try:
            compile(text, relative, "exec")
        except SyntaxError as exc:
            raise VaezooError(f"invalid name '{name}' for a {KINDS[kind][0]}: the package's {relative} would not be "
                              f"Python ({exc.msg} at line {exc.lineno}: {(exc.text or '').strip()}); choose another "
                              f"name") from None
    target = parent / f"vaezoo-{name}"
    _refuse_taken(target)
    if parent.exists() and not parent.is_dir():
        raise VaezooError(f"--dir {parent} is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise VaezooError(f"cannot create {target}: {folder_problem(parent, exc)}; choose another --dir") from None
    _remove_dead_stagings(parent)
    with folder_lock(target):  # held while staging, so that a staging folder whose package's lock is free is dead
        try:
            _refuse_taken(target)  # made by a run this one waited for
            _stage(files, parent, target)
        finally:
            _remove_lock_of_made(target)
    return target


def _remove_lock_of_made(target: Path) -> None:
    """Remove the lock file of the package ``target`` (held by this process) once the package stands: every run is
    refused then, before it stages (a run that waited on the lock, and takes it, or a new one, once it is gone), so
    the file guards nothing more, and a user would see it beside the package, and commit it."""
    if os.path.lexists(target):
        folder_lock_file(target).unlink(missing_ok=True)


def _refuse_taken(target: Path) -> None:
    """Refuse to write the package ``target`` where something stands already (a dangling link too)."""
    if os.path.lexists(target):
        raise VaezooError(f"{target} already exists; remove it or choose another --dir")


STAGING = re.compile(r"\.vaezoo-([a-z0-9-]+)\." + RANDOM)
"""The staging folder of a package ``vaezoo-NAME`` (``tempfile.mkdtemp``'s name), its group the NAME."""


def _remove_dead_stagings(parent: Path) -> None:
    """Remove the staging folders that ``new-plugin`` runs killed while staging (SIGKILL, a power cut) left in
    ``parent``, of any package: each under its package's lock, which a live run holds while it stages, so that a
    live run's folder, whose lock is held, is left to it."""
    try:
        names = sorted({found[1] for entry in os.listdir(parent) if (found := STAGING.fullmatch(entry))})
    except OSError:
        return
    for name in names:
        try:
            with folder_lock(parent / f"vaezoo-{name}", wait=0):
                for stale in temporaries(parent, f".vaezoo-{name}.", ""):
                    if stale.is_dir() and not stale.is_symlink():
                        shutil.rmtree(stale, ignore_errors=True)
        except VaezooError:  # held by a live run (or its lock may not be taken): its folder is left to it
            continue


def _stage(files: dict[str, str], parent: Path, target: Path) -> None:
    """Write ``files`` into a staging folder in ``parent``, then rename it ``target``: nothing is left behind when
    it fails."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
    except OSError as exc:  # a folder that may not be written: named, not the staging folder's random name
        raise VaezooError(f"cannot create {target}: {folder_problem(parent, exc)}; choose another --dir") from None
    try:
        try:
            for relative, text in files.items():
                path = staging / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            staging.chmod(new_folder_mode())
        except OSError as exc:  # a full disk or quota; nothing is left behind
            raise VaezooError(f"cannot create {target}: {exc.strerror or exc}; make room on its disk or choose "
                              f"another --dir") from None
        _refuse_taken(target)  # created while we were writing
        try:
            os.rename(staging, target)
        except OSError as exc:
            raise VaezooError(f"cannot create {target}: {exc.strerror or exc}; choose another --dir") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise

