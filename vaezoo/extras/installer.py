"""Plugins installed into, and uninstalled from, the Python environment that runs vaezoo, as simonw/llm's
``llm install`` does: pip of the interpreter running vaezoo (``sys.executable -m pip``), run in a subprocess whose
output goes where vaezoo's goes, and the ``vaezoo`` entry points the environment gained or lost by it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from vaezoo.errors import InstallError

GROUP = "vaezoo"
"""The entry-point group of vaezoo's plugins."""

# One line of JSON: whether pip imports, and every entry point of the group, as a fresh interpreter finds them (a
# package pip puts on a path this process did not have at its start, a user site made by the install, is seen
# there). pip is looked for there, not here: on Python 3.11, setuptools' distutils shim takes any look for pip in a
# process for pip running and gives that process the standard library's distutils for good (torch.compile then fails).
_PROBE = f"""
import json
from importlib.metadata import entry_points
try:
    import pip
except ImportError:
    pip = None
print(json.dumps({{"pip": pip is not None,
                  "plugins": [[e.name, e.value, e.dist.name, e.dist.version] for e in entry_points(group={GROUP!r})]}}))
"""


@dataclass(frozen=True)
class PluginEntry:
    """A plugin as the environment declares it: an entry point of the group ``vaezoo``.

    Attributes:
        name: the plugin's name (the entry point's).
        module: the module holding its hooks (the entry point's value).
        distribution: the distribution that declares it, e.g. ``vaezoo-laplace``.
        version: that distribution's version.
    """

    name: str
    module: str
    distribution: str
    version: str


@dataclass(frozen=True)
class PipRun:
    """What one successful run of pip did to the environment's plugins.

    Attributes:
        command: the command that ran, ``[python, "-m", "pip", ...]``.
        added: the plugins the environment declares now and did not before, by name.
        removed: the plugins it declared before and does not now, by name.
    """

    command: list[str]
    added: list[PluginEntry]
    removed: list[PluginEntry]


def install(packages: Iterable[str] = (), *, upgrade: bool = False, editable: str | None = None,
            force_reinstall: bool = False, no_cache_dir: bool = False, pre: bool = False) -> PipRun:
    """Install ``packages`` with pip into the environment running vaezoo (``pip install``).

    Args:
        packages: what pip installs: names with optional versions (``vaezoo-laplace>=0.2``), paths, URLs.
        upgrade: pip's ``--upgrade``: upgrade them to the newest version.
        editable: pip's ``--editable``: install the project at this path in editable mode.
        force_reinstall: pip's ``--force-reinstall``: reinstall them even when they are up to date.
        no_cache_dir: pip's ``--no-cache-dir``: leave pip's cache alone.
        pre: pip's ``--pre``: take pre-release and development versions too.

    Returns:
        The run, with the plugins it added.

    Raises:
        InstallError: nothing to install, pip missing from the environment, or pip failed (its messages were shown).
    """
    packages = list(packages)
    if not packages and editable is None:
        raise InstallError.about("nothing to install: give a package, or a path with {editable}")
    options = [flag for flag, given in (("--upgrade", upgrade), ("--force-reinstall", force_reinstall),
                                        ("--no-cache-dir", no_cache_dir), ("--pre", pre)) if given]
    return _run_pip(["install", *options, *(["--editable", editable] if editable is not None else []), *packages])


def uninstall(packages: Iterable[str], *, yes: bool = False) -> PipRun:
    """Uninstall ``packages`` with pip from the environment running vaezoo (``pip uninstall``).

    Args:
        packages: the distributions to remove, e.g. ``vaezoo-laplace``; never vaezoo itself.
        yes: pip's ``--yes``: remove them without asking first.

    Returns:
        The run, with the plugins it removed.

    Raises:
        InstallError: nothing to uninstall, vaezoo among the packages, pip missing from the environment, or pip
            failed (its messages were shown).
    """
    packages = list(packages)
    if not packages:
        raise InstallError("nothing to uninstall: give the packages to remove")
    if any(_distribution_name(package) == "vaezoo" for package in packages):
        raise InstallError(f"refusing to uninstall vaezoo itself, which runs this command; use pip: "
                           f"{_python()} -m pip uninstall vaezoo")
    return _run_pip(["uninstall", *packages, *(["--yes"] if yes else [])])


def _run_pip(arguments: list[str]) -> PipRun:
    """Run ``python -m pip ARGUMENTS`` in the environment running vaezoo, its input and output vaezoo's; the
    plugins that run added and removed."""
    has_pip, before = _environment()
    if not has_pip:
        raise InstallError(f"pip is not installed in the Python environment running vaezoo ({sys.executable}); "
                           f"add it with '{_python()} -m ensurepip', or install plugins with "
                           f"'uv pip install --python {_python()} PACKAGE'")
    command = [sys.executable, "-m", "pip", *arguments]
    code = subprocess.run(command, check=False).returncode
    if code != 0:
        raise InstallError(f"pip {arguments[0]} failed with exit code {code}; pip's messages above say why")
    after = _environment()[1]
    return PipRun(command=command, added=[after[key] for key in sorted(after.keys() - before.keys())],
                  removed=[before[key] for key in sorted(before.keys() - after.keys())])


def _environment() -> tuple[bool, dict[tuple[str, str, str], PluginEntry]]:
    """Whether pip imports in the environment, and the plugins it declares, by (name, module, distribution): a
    version changed is the same plugin.

    Read by a fresh interpreter (``-P``: not from the current folder), as the next ``vaezoo`` will find them.
    """
    listed = subprocess.run([sys.executable, "-P", "-c", _PROBE], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        last = (listed.stderr.strip().splitlines() or ["no message"])[-1]
        raise InstallError(f"cannot list the environment's plugins ({_python()} exited with code "
                           f"{listed.returncode}: {last})")
    found = json.loads(listed.stdout)
    entries = [PluginEntry(*fields) for fields in found["plugins"]]
    return found["pip"], {(e.name, e.module, e.distribution): e for e in entries}


def _distribution_name(requirement: str) -> str | None:
    """The normalized distribution name a requirement starts with (``Vaezoo[hub]>=1`` -> ``vaezoo``), else None."""
    match = re.match(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)", requirement)
    return None if match is None else re.sub(r"[-_.]+", "-", match[1]).lower()


def _python() -> str:
    """The interpreter running vaezoo, as a shell reads it."""
    return shlex.quote(sys.executable)
