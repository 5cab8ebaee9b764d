"""Plugins installed into, and uninstalled from, the Python environment that runs vaezoo, as simonw/llm's
``llm install`` does: pip of the interpreter running vaezoo (``sys.executable -P -m pip``: never a ``pip`` of the
current folder), run in a subprocess whose output goes where vaezoo's goes, and the ``vaezoo`` entry points the
environment gained or lost by it.

``uninstall`` removes only distributions it can name before pip runs (names, wheel files, requirement files of
them), and never vaezoo or a distribution vaezoo needs to start (its requirements, and theirs, as the environment's
metadata lists them): afterwards vaezoo could not even run to put it back, so it refuses, naming why, and leaves a
removal that is meant to pip. A plugin's name, as ``vaezoo plugins`` shows it, stands for the distribution that
declares it (``llm uninstall`` takes the names ``llm plugins`` shows), unless a distribution of that name is installed.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from vaezoo.errors import InstallError, first_line
from vaezoo.store.paths import home_path
from vaezoo.terminal import note, shell_quote

GROUP = "vaezoo"
"""The entry-point group of vaezoo's plugins."""

_MARK = "vaezoo-probe:"
# One line of JSON after _MARK: whether pip imports, and every entry point of the group, as a fresh interpreter finds
# them (a package pip puts on a path this process did not have at its start, a user site made by the install, is seen
# there). pip is looked for there, not here: on Python 3.11, setuptools' distutils shim takes any look for pip in a
# process for pip running and gives that process the standard library's distutils for good (torch.compile then
# fails). The mark sets the line apart from whatever else the interpreter prints (a sitecustomize greeting).
_PROBE = f"""
import json
from importlib.metadata import distributions, entry_points
try:
    import pip
except ImportError:
    pip = None
print({_MARK!r} + json.dumps({{"pip": pip is not None, "plugins": [[e.name, e.value, e.dist.name, e.dist.version]
                                                                  for e in entry_points(group={GROUP!r})],
                                 "distributions": [d.metadata["Name"] for d in distributions()]}}))
"""
_REQUIREMENTS_LIMIT = 1 << 20  # bytes of a requirements file read; pip's own are a few lines
_NESTING_LIMIT = 16  # requirements files naming requirements files
_OWN = "vaezoo"
_ARCHIVE = re.compile(r"\.(?:tar\.gz|tgz|tar\.bz2|tbz|tar\.xz|txz|tar|zip|whl)$", re.IGNORECASE)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # https://..., git+https://..., file://...


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


@dataclass(frozen=True)
class _Environment:
    """The environment as a fresh interpreter finds it: whether pip imports, its plugins by (name, module,
    distribution) (a version changed is the same plugin), and its distributions' normalized names."""

    has_pip: bool
    plugins: dict[tuple[str, str, str], PluginEntry]
    distributions: frozenset[str]


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
        InstallError: nothing to install; a package that is empty, an option (``-e x``, ``--index-url=URL``: pip is
            given only the options above), or neither a requirement pip can read nor a path that exists nor a URL,
            all refused before pip runs, as is an ``editable`` path that is no Python project; pip missing from
            the environment, or pip failed (its messages were shown).
    """
    packages = [_package(package) for package in packages]
    if not packages and editable is None:
        raise InstallError.about("nothing to install: give a package, or a path with {editable}")
    if editable is not None:
        _check_project(editable)
    options = [flag for flag, given in (("--upgrade", upgrade), ("--force-reinstall", force_reinstall),
                                        ("--no-cache-dir", no_cache_dir), ("--pre", pre)) if given]
    return _run_pip(["install", *options, *(["--editable", editable] if editable is not None else []),
                     *(["--", *packages] if packages else [])])  # after "--", pip reads no word as an option


def _check_project(editable: str) -> None:
    """Refuse, before pip runs, an editable path that is no Python project (pip's refusal was two lines of its
    own); a VCS URL (``git+https://...``) is left to pip."""
    if _URL.match(str(editable)):
        return
    folder = home_path(editable, "--editable")
    if not folder.is_dir():
        what = "does not exist" if not os.path.lexists(folder) else "is not a folder"
        raise InstallError.about("{editable} {path} " + what + "; give the folder of a Python project (the one "
                                 "holding its pyproject.toml)", path=str(editable))
    if not any((folder / name).is_file() for name in ("pyproject.toml", "setup.py")):
        raise InstallError.about("{editable} {path} is not a Python project: it holds no pyproject.toml or setup.py; "
                                 "give the folder holding the project's pyproject.toml", path=str(editable))


def _package(package: object) -> str:
    """``package`` as pip is given it: a requirement (``vaezoo-laplace>=0.2``, ``name @ URL``), a URL, or a path
    that exists; anything else is refused in one line before pip runs (pip's own parser ended in its traceback).

    Raises:
        InstallError: ``package`` is not text, is empty, starts with ``-`` (an option, never passed to pip), or is
            none of the above, naming what pip's requirement syntax expected.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    fix = "give a package name with an optional version (vaezoo-laplace>=0.2), a path or a URL"
    if not isinstance(package, str):
        raise InstallError(f"PACKAGE {package!r} is not text ({type(package).__name__}); {fix}")
    text = package.strip()
    if not text:
        raise InstallError(f"PACKAGE {package!r} is empty; {fix}")
    if text.startswith("-"):
        raise InstallError.about("PACKAGE {given} is an option, not a package: pip is given only the options of "
                                 "vaezoo install ({upgrade}, {editable}, {force_reinstall}, {no_cache_dir}, {pre}); "
                                 "{fix}", given=repr(package), fix=fix)
    if _URL.match(text) or os.path.exists(os.path.expanduser(text)):
        return text
    if _looks_like_path(text):
        raise InstallError(f"PACKAGE {package!r} is a path, but nothing is there; give the path of a project folder, "
                           f"a wheel or an sdist that exists")
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        why = first_line(exc) or "not a requirement"
        raise InstallError(f"PACKAGE {package!r} is not a requirement pip can read ({why}), a URL or a path that "
                           f"exists; {fix}") from None
    return text


ARCHIVES = (".whl", ".tar.gz", ".tgz", ".tar.bz2", ".zip")
"""The endings pip takes for a distribution's file rather than a project's name."""


_PATH = re.compile(r"[\w.~+ -]*(/[\w.~+ -]*)+")  # folders and file names, no requirement's [extras] or ;markers


def _looks_like_path(text: str) -> bool:
    """Whether ``text`` names a path rather than a requirement: it starts with ``.`` or ``~``, is names joined by
    ``/``, or ends as a wheel or an sdist does (``name @ URL`` is a requirement)."""
    if "@" in text:
        return False
    return text.startswith((".", "~")) or bool(_PATH.fullmatch(text)) or text.lower().endswith(ARCHIVES)


def uninstall(packages: Iterable[str] = (), *, requirements: Iterable[str | os.PathLike] = (),
              yes: bool = False) -> PipRun:
    """Uninstall ``packages`` with pip from the environment running vaezoo (``pip uninstall``).

    Before pip runs, every distribution the call names is read, from the names, the wheel files' names and the
    requirements files (and those they name); a removal that would leave vaezoo unable to start is refused.

    Args:
        packages: the distributions to remove, e.g. ``vaezoo-laplace`` (a requirement, ``name==1.0``, or a wheel
            file, whose name says which distribution); never vaezoo itself, nor one vaezoo needs. A plugin's name
            (``hello``) that names no installed distribution stands for the distribution declaring it
            (``vaezoo-hello``), said on stderr.
        requirements: requirements files listing distributions to remove (pip's ``--requirement``).
        yes: pip's ``--yes``: remove them without asking first; needed where stdin is not a terminal, since pip
            would ask there (unless ``PIP_YES`` says yes, as pip reads it).

    Returns:
        The run, with the plugins it removed.

    Raises:
        InstallError: nothing to uninstall; vaezoo, or a distribution vaezoo needs to start, among the packages;
            a plugin built into vaezoo named; a package or requirements line whose distribution cannot be told
            before pip runs (an option, a path that is no wheel, an editable project), a requirements file that
            cannot be read; no ``yes`` where stdin is not a terminal; pip missing from the environment, or pip
            failed (its messages were shown).
    """
    packages, requirements = list(packages), [os.fspath(path) for path in requirements]
    if not packages and not requirements:
        raise InstallError("nothing to uninstall: give the packages to remove")
    found = _environment()
    packages = [_plugin_distribution(package, found) for package in packages]
    named = [(package, _named(package, "PACKAGE")) for package in packages]
    for path in requirements:
        named += _requirements_file(Path(path), depth=0)
    _refuse_what_vaezoo_needs(named)
    yes = yes or _pip_says_yes()
    if not yes and not os.isatty(0):  # pip asks on the stdin it shares with vaezoo, and fails on its end
        raise InstallError.about("cannot ask before removing {packages}: stdin is not a terminal; add {yes:True} to "
                                 "remove without asking", packages=", ".join(name for _, name in named))
    return _run_pip(["uninstall", *packages, *(f"--requirement={path}" for path in requirements),
                     *(["--yes"] if yes else [])], found)


def _pip_says_yes() -> bool:
    """Whether ``PIP_YES`` tells pip to remove without asking, as pip reads a yes-or-no variable."""
    return os.environ.get("PIP_YES", "").strip().lower() in ("1", "y", "yes", "t", "true", "on")


def _plugin_distribution(package: str, found: _Environment) -> str:
    """``package``, or where it is a plugin's name and no installed distribution's, the distribution declaring
    that plugin.

    Raises:
        InstallError: the plugin is one of vaezoo's own.
    """
    from vaezoo.plugins import ALWAYS

    plugin = next((e for e in found.plugins.values() if e.name == package), None)
    if plugin is None or _normalized(package) in found.distributions:
        return package
    if _normalized(plugin.distribution) == _OWN:
        leave_out = "" if package in ALWAYS else ("; to run without it, leave it out of VAEZOO_LOAD_PLUGINS (the "
                                                  "plugins to load, by name)")
        raise InstallError(f"plugin {package} is built into vaezoo, not a distribution of its own, and cannot be "
                           f"uninstalled apart from vaezoo{leave_out}")
    note(f"plugin {package} comes from the distribution {plugin.distribution}: uninstalling {plugin.distribution}")
    return plugin.distribution


def _named(requirement: str, where: str) -> str:
    """The normalized name of the distribution ``requirement`` (a requirement or a wheel file) removes.

    Raises:
        InstallError: ``requirement`` is an option, or a path, URL or archive whose distribution only pip could tell.
    """
    text = requirement.strip()
    if text.startswith("-"):
        raise InstallError(f"{where} {requirement!r} is an option, not a distribution to uninstall; vaezoo uninstall "
                           f"takes names, wheel files, --requirement FILE and --yes")
    wheel = re.split(r"[\\/]", re.split(r"[#?]", text)[0])[-1]
    if wheel.lower().endswith(".whl") and wheel.count("-") >= 4:  # NAME-VERSION(-BUILD)-PYTHON-ABI-PLATFORM.whl
        return _normalized(wheel.split("-", 1)[0])
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        name = Requirement(text).name
    except InvalidRequirement:  # a path, an archive's URL
        name = None
    if name is None or _ARCHIVE.search(name):
        raise InstallError(f"{where} {requirement!r} names no distribution vaezoo can tell before pip runs; give "
                           f"the distribution's name (or its wheel file), as 'pip list' shows it")
    return _normalized(name)


def _requirements_file(path: Path, depth: int) -> list[tuple[str, str]]:
    """``(line, name)`` for every distribution the requirements file ``path`` (and those it names) lists.

    Raises:
        InstallError: the file cannot be read (no regular file, too big, nested too deep), or a line names no
            distribution vaezoo can tell (an editable project, a path that is no wheel).
    """
    if depth > _NESTING_LIMIT:
        raise InstallError(f"requirements file {path}: requirements files nest more than {_NESTING_LIMIT} deep")
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _REQUIREMENTS_LIMIT:
            raise InstallError(f"requirements file {path} is no regular file of at most {_REQUIREMENTS_LIMIT:,} "
                               f"bytes; give pip's requirements file")
        with open(path, "rb") as file:
            text = file.read(_REQUIREMENTS_LIMIT + 1).decode("utf-8", errors="replace")
    except OSError as exc:
        raise InstallError(f"cannot read requirements file {path} ({exc.strerror or exc})") from None
    named = []
    for line in re.sub(r"\\\r?\n", "", text).splitlines():  # pip joins a line ending in a backslash to the next
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        nested = re.fullmatch(r"(?:-r|--requirement)(?:\s*=\s*|\s+|(?<=-r))(\S.*)", line)
        if nested:
            named += _requirements_file(path.parent / nested[1].strip(), depth + 1)
        elif line.startswith(("-e", "--editable")):
            raise InstallError(f"requirements file {path}: {line!r} is an editable project, whose distribution "
                               f"vaezoo cannot tell before pip runs; give its name")
        elif line and not line.startswith("-"):  # options (an index, constraints) remove nothing
            requirement = re.split(r"\s+-", line, maxsplit=1)[0]  # as pip, without the line's options (--hash=...)
            named.append((line, _named(requirement, f"requirements file {path}: line")))
    return named


def _refuse_what_vaezoo_needs(named: list[tuple[str, str]]) -> None:
    """Refuse a removal of vaezoo or of a distribution it needs to start, naming it and why."""
    for _, name in named:
        if name == _OWN:
            raise InstallError(f"refusing to uninstall vaezoo itself, which runs this command; use pip: "
                               f"{_python()} -m pip uninstall vaezoo")
    needs = needed_by_vaezoo()
    for given, name in named:
        if name in needs:
            raise InstallError(f"refusing to uninstall {given}: vaezoo needs {name} to start ({needs[name]}), and "
                               f"could not run afterwards to put it back; if you mean it, use pip: "
                               f"{_python()} -m pip uninstall {shell_quote(name)}")


def needed_by_vaezoo() -> dict[str, str]:
    """The distributions vaezoo needs to start, by normalized name, each with why: its own requirements and, as the
    environment's metadata lists them, theirs (an extra's are left out: vaezoo starts without them). Empty where
    vaezoo runs from a checkout that was never installed."""
    from packaging.requirements import InvalidRequirement, Requirement

    why: dict[str, str] = {}
    todo = [(_OWN, "")]
    while todo:
        name, via = todo.pop()
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            try:
                parsed = Requirement(requirement)
            except InvalidRequirement:  # a broken distribution's metadata: pip reads no requirement from it either
                continue
            if parsed.marker is not None and "extra" in str(parsed.marker):
                continue
            needed = _normalized(parsed.name)
            if needed in why or needed == _OWN:
                continue
            why[needed] = f"vaezoo requires {requirement.split(';')[0].strip()}" if name == _OWN else \
                f"vaezoo needs it through {via or name}"
            todo.append((needed, via or needed))
    return why


def _run_pip(arguments: list[str], found: _Environment | None = None) -> PipRun:
    """Run ``python -m pip ARGUMENTS`` in the environment running vaezoo (``found``, else read now), its input
    vaezoo's and its messages (its question before an uninstall among them) on vaezoo's stderr, stdout keeping the
    command's data; the plugins that run added and removed."""
    found = found or _environment()
    before = found.plugins
    if not found.has_pip:
        raise InstallError(f"pip is not installed in the Python environment running vaezoo ({sys.executable}); "
                           f"add it with '{_python()} -m ensurepip', or install plugins with "
                           f"'uv pip install --python {_python()} PACKAGE'")
    command = [sys.executable, "-P", "-m", "pip", *arguments]  # -P: never a pip.py or pip/ of the current folder
    code = subprocess.run(command, stdout=_stderr_fd(), check=False).returncode
    if code != 0:
        raise InstallError(f"pip {arguments[0]} failed with exit code {code}; pip's messages above say why")
    after = _environment().plugins
    return PipRun(command=command, added=[after[key] for key in sorted(after.keys() - before.keys())],
                  removed=[before[key] for key in sorted(before.keys() - after.keys())])


def _stderr_fd() -> int | None:
    """The file descriptor of stderr, for pip's messages; None (pip writes to the stdout it inherits) where stderr
    has none, as a stream in memory."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _environment() -> _Environment:
    """Whether pip imports in the environment, the plugins it declares and its distributions.

    Read by a fresh interpreter (``-P``: not from the current folder), as the next ``vaezoo`` will find them.
    """
    listed = subprocess.run([sys.executable, "-P", "-c", _PROBE], capture_output=True, text=True, check=False)
    if listed.returncode != 0:
        last = (listed.stderr.strip().splitlines() or ["no message"])[-1]
        raise InstallError(f"cannot list the environment's plugins ({_python()} exited with code "
                           f"{listed.returncode}: {last})")
    lines = [line[len(_MARK):] for line in listed.stdout.splitlines() if line.startswith(_MARK)]
    try:
        found = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise InstallError(f"cannot list the environment's plugins: {_python()} printed no list of them (a "
                           f"sitecustomize or .pth file of the environment may stop it; run {_python()} -c pass "
                           f"to see what it prints)") from None
    entries = [PluginEntry(*fields) for fields in found["plugins"]]
    return _Environment(found["pip"], {(e.name, e.module, e.distribution): e for e in entries},
                        frozenset(_normalized(name) for name in found["distributions"] if name))


def _normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares names: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _python() -> str:
    """The interpreter running vaezoo, as a shell reads it."""
    return shell_quote(sys.executable)
