"""``vaezoo new-plugin``: write a working plugin package to start from.

The package holds a pyproject with the ``vaezoo`` entry point, a module whose
hooks register an architecture and a card directory, a card, and tests that
run :mod:`vaezoo.testing`. It is written into a temporary directory and renamed
into place, so a failure leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from string import Template

from vaezoo.cli.common import printable
from vaezoo.errors import VaezooError

NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")

# template file -> where it goes in the new package (formatted with the names of render())
FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "__init__.py.tmpl": "{package}/__init__.py",
    "model.py.tmpl": "{package}/model.py",
    "card.toml.tmpl": "{package}/cards/{card}.toml",
    "test_plugin.py.tmpl": "tests/test_{package}.py",
}


def add_parser(sub) -> None:
    p = sub.add_parser("new-plugin", help="write a new plugin package: pyproject, hooks, a card and tests")
    p.add_argument("name", help="the plugin's name: lowercase letters, digits and hyphens, e.g. 'sparse-vae'")
    p.add_argument("--dir", default=".", help="where to create the package directory vaezoo-NAME (default: .)")
    p.set_defaults(func=run)


def run(args) -> int:
    target = create_plugin(args.name, Path(args.dir))
    print(printable(target))
    print(printable(f"next: pip install -e {target} && vaezoo plugins && python -m pytest {target}"), file=sys.stderr)
    return 0


def check_name(name: str) -> None:
    """Refuse a plugin name that is not a lowercase, hyphenated word or that an installed plugin already uses."""
    if not NAME.fullmatch(name):  # match() would take a trailing newline ('$' matches before it)
        raise VaezooError(f"invalid plugin name '{name}': use lowercase letters, digits and single hyphens, "
                          f"starting with a letter (e.g. 'sparse-vae')")
    if name == "vaezoo" or name.startswith("vaezoo-"):
        raise VaezooError(f"invalid plugin name '{name}': give it without the 'vaezoo-' prefix, which is added "
                          f"to the package's name")
    installed = {ep.name for ep in entry_points(group="vaezoo")}
    if name in installed:
        raise VaezooError(f"a plugin named '{name}' is already installed; choose another name")
    check_name_unregistered(name)


def check_name_unregistered(name: str) -> None:
    """Refuse a plugin name that a loaded plugin already registers as a part of any kind (the core's
    architecture ``vae``): the new plugin registers its own part under its name, and the registry would
    refuse it as a duplicate."""
    from vaezoo.plugins import KINDS, registry

    for kind in KINDS:
        if name in registry(kind):
            raise VaezooError(f"'{name}' is already the name of the {kind} of plugin "
                              f"'{registry(kind).plugin_of(name)}'; choose another name")


def render(name: str) -> dict[str, str]:
    """The new package's files, ``{relative path: text}``, for plugin ``name``."""
    from vaezoo import __version__

    names = {
        "name": name,
        "distribution": f"vaezoo-{name}",
        "package": f"vaezoo_{name.replace('-', '_')}",
        "card": f"{name}-mnist",
        "vaezoo_version": __version__,
    }
    templates = resources.files("vaezoo") / "templates" / "plugin"
    return {destination.format(**names): Template((templates / source).read_text(encoding="utf-8")).substitute(names)
            for source, destination in FILES.items()}


def create_plugin(name: str, parent: Path) -> Path:
    """Write the package ``vaezoo-NAME`` into ``parent`` and return its directory.

    Args:
        name: the plugin's name (its entry-point name and architecture name).
        parent: the directory to create the package in; created if missing.

    Returns:
        The new package's directory.
    """
    check_name(name)
    target = parent / f"vaezoo-{name}"
    if target.exists():
        raise VaezooError(f"{target} already exists; remove it or choose another --dir")
    if parent.exists() and not parent.is_dir():
        raise VaezooError(f"--dir {parent} is a file, not a directory")
    files = render(name)
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".vaezoo-{name}.", dir=parent))
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        staging.chmod(0o777 & ~_umask())
        if target.exists():  # created while we were writing
            raise VaezooError(f"{target} already exists; remove it or choose another --dir")
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
