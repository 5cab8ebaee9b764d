"""The plugin manager: plugins from the entry-point group ``vaezoo``, loaded once, lazily.

A plugin is one entry point, named by the entry point's name. The built-in
plugins are the entry points of the ``vaezoo`` distribution itself (``core``,
the core's own parts, and the folders of ``plugins/`` in the source tree): they
take the same path as a third party's and load first, ``core`` first, then the
other built-ins, then third-party plugins, each by entry-point name. So a name
that a built-in registers stays the built-in's, and a third party's entry point
that takes a built-in's name (or a name an earlier third party took) is refused,
never imported, and reported naming both distributions.

``VAEZOO_LOAD_PLUGINS`` (comma-separated entry-point names) is an allow-list;
set to the empty string, only vaezoo's own ``core`` and ``extras`` load: the core's parts and vaezoo's own
commands are always there.

Plugin code (its import and every hook) is isolated: whatever it raises,
``SystemExit`` and ``KeyboardInterrupt`` included, marks the plugin failed (a
:class:`PluginWarning`, and ``vaezoo plugins``), and the others and vaezoo's own
exit code are unaffected. A real Ctrl-C still stops vaezoo: a
``KeyboardInterrupt`` is taken for the plugin's own only when no SIGINT arrived
while its code ran. Python cannot stop a plugin that hangs, so a third-party
plugin still running after ``VAEZOO_PLUGIN_TIMEOUT`` seconds (default 10) is
named on stderr with the ``VAEZOO_LOAD_PLUGINS`` setting that skips it.
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
import threading
import warnings
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TextIO

import pluggy

import vaezoo.hookspecs as hookspecs
from vaezoo.errors import PluginError, SharedChange, VaezooError
from vaezoo.registry import Registry
from vaezoo.signals import STOP_SIGNALS, Interrupted

ENTRY_POINT_GROUP = "vaezoo"
DISTRIBUTION = "vaezoo"  # the entry points of this distribution are the built-in plugins
CORE = "core"  # the built-in plugin holding the core's own parts; always loaded
ALWAYS = (CORE, "extras")
"""vaezoo's own plugins that load whatever ``VAEZOO_LOAD_PLUGINS`` says: the core's parts and vaezoo's commands."""
DEFAULT_TIMEOUT = 10.0  # seconds of plugin code before VAEZOO_PLUGIN_TIMEOUT's message


class PluginWarning(UserWarning):
    """A plugin failed to load, was refused, or raised inside a hook."""


@dataclass
class PluginInfo:
    """What ``vaezoo plugins`` shows for one plugin (one entry point).

    Attributes:
        name: the entry point's name, which is the plugin's.
        version: the version of the distribution declaring it.
        distribution: the name of that distribution.
        builtin: whether that distribution is vaezoo itself.
        package: the top-level package of the plugin's module (the code :meth:`Plugins.owner_of` attributes to it).
        hooks: the hooks the plugin implements.
        status: ``"ok"``; ``"failed"`` (its import, or one of its hooks, raised or broke a rule); ``"refused"``
            (its name is taken: never imported).
        error: why, in one line, when the status is not ``"ok"``: each failure, separated by ``"; "``.
    """

    name: str
    version: str
    distribution: str
    builtin: bool
    package: str = ""
    hooks: list[str] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None

    def fail(self, error: str, status: str = "failed") -> None:
        """Set ``status``, add ``error`` (made one printable line) to :attr:`error`, and warn with a
        :class:`PluginWarning`."""
        self.status = status
        line = _one_line(error)
        self.error = line if self.error is None else f"{self.error}; {line}"
        warnings.warn(f"vaezoo plugin {self.name!r} {status}: {line}", PluginWarning, stacklevel=3)


def _one_line(text: str) -> str:
    """``text`` on one line, control characters escaped: plugins' and pluggy's messages may hold any."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(text.split()))


def _is_class_of(base_path: str):
    """A registration check: the object must be a subclass of ``base_path`` (imported lazily)."""

    def check(obj: object) -> str | None:
        module, _, attr = base_path.rpartition(".")
        base = getattr(__import__(module, fromlist=[attr]), attr)
        if isinstance(obj, type) and issubclass(obj, base):
            return None
        return f"expected a subclass of {base_path}, got {obj!r}"

    return check


def _is_instance_of(base_path: str):
    """A registration check: the object must be an instance of ``base_path`` (imported lazily)."""

    def check(obj: object) -> str | None:
        module, _, attr = base_path.rpartition(".")
        base = getattr(__import__(module, fromlist=[attr]), attr)
        return None if isinstance(obj, base) else f"expected a {base_path} instance, got {obj!r}"

    return check


def _is_callable(obj: object) -> str | None:
    return None if callable(obj) else f"expected a callable, got {obj!r}"


def _is_command(obj: object) -> str | None:
    """A command's registration check: what :class:`vaezoo.cli.Command` has, on any object."""
    add_arguments = getattr(obj, "add_arguments", None)
    if (isinstance(getattr(obj, "help", None), str) and obj.help.strip() and callable(getattr(obj, "run", None))
            and (add_arguments is None or callable(add_arguments))):
        return None
    return (f"expected a vaezoo.cli.Command (or an object alike: a non-empty str help, a callable run(args), and "
            f"add_arguments(parser) callable or absent), got {obj!r}")


# kind -> (hook name, registration check)
KINDS: dict[str, tuple[str, object]] = {
    "architecture": ("vaezoo_register_architectures", _is_callable),
    "latent family": ("vaezoo_register_latent_families", _is_class_of("vaezoo.latents.base.LatentFamily")),
    "regularizer": ("vaezoo_register_regularizers", _is_class_of("vaezoo.regularizers.base.Regularizer")),
    "net": ("vaezoo_register_nets", _is_class_of("torch.nn.Module")),
    "likelihood": ("vaezoo_register_likelihoods", _is_class_of("vaezoo.likelihoods.Likelihood")),
    "dataset": ("vaezoo_register_datasets", _is_instance_of("vaezoo.data.base.Dataset")),
    "metric": ("vaezoo_register_metrics", _is_callable),
    "converter": ("vaezoo_register_converters", _is_callable),
    "card section": ("vaezoo_register_card_sections", _is_class_of("pydantic.BaseModel")),
    "command": ("vaezoo_register_commands", _is_command),
}


def _not_a_loss(name: str) -> str | None:
    """A metric's name check: ``vaezoo eval`` records the losses beside the metrics, under these names
    (:func:`vaezoo.evaluation.measure.losses`), so a metric of one of them would replace that loss on the card."""
    if name in ("reconstruction", "objective") or name.startswith("kl_"):
        return "the name is one of the losses vaezoo eval records (reconstruction, objective, kl_PART); choose another"
    return None


CARD_FIELDS = frozenset({"name", "architecture", "summary", "dataset", "paper", "license", "vaezoo_version", "model",
                         "train", "weights", "metrics", "eval_metrics", "eval_settings", "headline", "latent",
                         "parameters", "training_parameters", "plugins", "input", "sections"})
"""The fields of :class:`vaezoo.entries.schema.Card`, which the plugin manager, below the card schema, names here
(tests/test_layers.py holds the two equal)."""


def _not_a_card_field(name: str) -> str | None:
    """A card section's name check: a section is written at the card's top level, beside its fields."""
    return "the name is one of a card's fields; choose another" if name in CARD_FIELDS else None


COMMAND_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
"""What a plugin's command may be called: lowercase words of letters and digits joined by ``-``."""


def _a_command_name(name: str) -> str | None:
    """A command's name check: spelled as the built-in commands are, and none of theirs (a plugin adds commands,
    it never replaces or shadows one)."""
    from vaezoo.registry import COMMANDS

    if COMMAND_NAME.fullmatch(name) is None:
        return "a command's name is lowercase letters and digits, words joined by '-' (e.g. 'my-command')"
    if name in COMMANDS:
        return "the name is one of vaezoo's own commands, which no plugin can replace; choose another"
    return None


NAME_CHECKS = {"metric": _not_a_loss, "card section": _not_a_card_field, "command": _a_command_name}
"""Checks of the names a kind's registry takes, beyond being non-empty and unique."""


def _is_builtin(ep: EntryPoint) -> bool:
    """Whether ``ep`` is declared by vaezoo's own distribution (names compared as PEP 503 normalizes them)."""
    return ep.dist is not None and re.sub(r"[-_.]+", "-", ep.dist.name or "").lower() == DISTRIBUTION


def _timeout() -> float:
    """``VAEZOO_PLUGIN_TIMEOUT`` in seconds, or :data:`DEFAULT_TIMEOUT` when unset."""
    raw = os.environ.get("VAEZOO_PLUGIN_TIMEOUT", "")
    try:
        seconds = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise VaezooError(f"VAEZOO_PLUGIN_TIMEOUT must be a positive number of seconds, got {raw!r}")
    return seconds


class _SignalWatch:
    """Tells a stop signal that arrives while plugin code runs from what that code raises itself.

    While entered in the main thread (the only one Python delivers signals to), each of
    :data:`~vaezoo.signals.STOP_SIGNALS` handled in Python (SIGINT always; SIGTERM and SIGHUP under the CLI)
    goes to the handler that was there before; when that handler raises, ``received`` is set to the signal's
    number. Code that catches the resulting ``KeyboardInterrupt`` (as some libraries' imports do, wrapping it
    or swallowing it) cannot hide the signal. In another thread no signal interrupts the plugin's code, so
    ``received`` stays None.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def _note(self, signum, frame) -> None:
        try:
            self._previous[signum](signum, frame)
        except BaseException:  # the signal stops the command (a training loop's handler only notes the first)
            self.received = signum
            raise

    def __enter__(self) -> _SignalWatch:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if callable(signal.getsignal(signum)):
                    self._previous[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._note:  # a plugin's own handler stays
                signal.signal(signum, previous)


class Plugins:
    """Loaded plugins, their status, and the registries they fill (each filled on first use).

    Attributes:
        manager: the pluggy plugin manager.
        info: the plugins loaded or tried, by name, in load order.
        refused: the entry points refused because their name was taken (never imported).
        left_out: the names of the installed plugins that ``VAEZOO_LOAD_PLUGINS`` leaves out.

    Raises:
        PluginError: vaezoo's own ``core`` entry point is missing (an incomplete installation).
        VaezooError: ``VAEZOO_PLUGIN_TIMEOUT`` is not a positive number.
    """

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager("vaezoo")
        self.manager.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}
        self.refused: list[PluginInfo] = []
        self._registries: dict[str, Registry] = {}
        self._card_dirs: list[tuple[str, Path]] | None = None
        self._failed: set[tuple[str, str]] = set()  # what failed in guarded()
        self._lock = threading.RLock()
        self._timeout = _timeout()
        self._load_entry_points()
        for name, info in self.info.items():
            plugin = self.manager.get_plugin(name)
            if plugin is not None:
                info.hooks = sorted(h.name for h in self.manager.get_hookcallers(plugin) or [])
        self._order = {name: i for i, name in enumerate(self.info)}

    def _load_entry_points(self) -> None:
        allowed = os.environ.get("VAEZOO_LOAD_PLUGINS")
        allow = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        installed = list(entry_points(group=ENTRY_POINT_GROUP))
        names = sorted({ep.name for ep in installed})
        unknown = sorted((allow or set()) - set(names))
        if unknown:  # a misspelt name would silently leave its plugin out
            warnings.warn(_one_line(f"VAEZOO_LOAD_PLUGINS names {', '.join(map(repr, unknown))}, which no installed "
                                    f"plugin is called; installed: {', '.join(names)}"), PluginWarning, stacklevel=2)
        found = [ep for ep in installed if allow is None or ep.name in allow or (ep.name in ALWAYS and _is_builtin(ep))]
        self.left_out = sorted({ep.name for ep in installed} - {ep.name for ep in found})
        if not any(ep.name == CORE and _is_builtin(ep) for ep in found):
            raise PluginError(f"vaezoo's own entry point '{CORE}' (group '{ENTRY_POINT_GROUP}') is missing: the "
                              f"installation is incomplete; reinstall vaezoo (e.g. 'pip install -e .' in its checkout)")
        found.sort(key=lambda ep: (not _is_builtin(ep), ep.name != CORE, ep.name, ep.dist.name or ""))
        self._names = sorted({ep.name for ep in found})
        for ep in found:
            self._load(ep)

    def _load(self, ep: EntryPoint) -> None:
        """Import and register the plugin of ``ep``, or refuse it when its name is taken."""
        info = PluginInfo(ep.name, ep.dist.version or "?", ep.dist.name or "?", _is_builtin(ep),
                          ep.module.partition(".")[0])
        taken = self.info.get(ep.name)
        if taken is not None:
            why = (f"the built-in plugin of distribution {taken.distribution!r} has this name, and no other "
                   f"distribution can replace it; rename the entry point" if taken.builtin else
                   f"plugin {ep.name!r} of distribution {taken.distribution!r} has this name and loaded first; "
                   f"uninstall one of them")
            info.fail(f"entry point {ep.name!r} of distribution {info.distribution!r}: {why}", "refused")
            self.refused.append(info)
            return
        self.info[ep.name] = info
        imported, module = self._guarded(info, f"import of {ep.value!r}", ep.load)
        if imported:
            self._guarded(info, f"registration of {ep.value!r}", self.manager.register, module, name=ep.name)

    def _guarded(self, info: PluginInfo, what: str, function, /, *args, **kwargs) -> tuple[bool, object]:
        """Run plugin code, ``function(*args, **kwargs)``; if it raises anything, mark the plugin failed. What it
        prints goes to stderr: stdout carries the command's data (``vaezoo list --json``), which a plugin's
        ``print`` at import or in a hook came before.

        Args:
            info: the plugin whose code runs.
            what: what runs, for messages ("import of 'module'", "hook vaezoo_card_dirs").

        Returns:
            ``(True, result)``, or ``(False, None)`` when it raised.

        Raises:
            Interrupted: only when a stop signal (the user's Ctrl-C, SIGTERM, SIGHUP) stopped it, whatever the
                code then made of the ``KeyboardInterrupt``.
        """
        watchdog = None
        if not info.builtin:
            watchdog = threading.Timer(self._timeout, self._report_slow, (info, what))
            watchdog.daemon = True
            watchdog.start()
        watch = _SignalWatch()
        try:
            with watch, prints_to_stderr:
                return True, function(*args, **kwargs)
        except VaezooError as exc:  # a rule the plugin broke, already worded
            if watch.received is None:
                info.fail(str(exc))
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: plugin code must not end vaezoo
            if isinstance(exc, Interrupted):
                raise  # a stop signal (SIGTERM, SIGHUP) the command turned into Interrupted
            if watch.received is None:
                info.fail(f"{what} raised {type(exc).__name__}" + (f": {exc}" if str(exc) else ""))
        finally:
            if watchdog is not None:
                watchdog.cancel()
            if watch.received is not None:  # the user's signal, whatever the plugin's code made of it
                raise Interrupted(watch.received) from None
        return False, None

    def guarded(self, plugin: str, what: str, function, /, *args, **kwargs) -> tuple[bool, object]:
        """Run code that ``plugin`` registered, ``function(*args, **kwargs)``, isolated as its hooks are: whatever
        it raises marks the plugin failed (a :class:`PluginWarning`). Once ``what`` has failed, it is not run
        (nor warned about) again.

        Args:
            plugin: the name of the plugin whose code runs.
            what: what runs, for messages ("add_arguments of command 'hello'").

        Returns:
            ``(True, result)``, or ``(False, None)`` when it raised.

        Raises:
            Interrupted: a stop signal (the user's Ctrl-C, SIGTERM, SIGHUP) stopped it.
        """
        with self._lock:
            if (plugin, what) in self._failed:
                return False, None
            done, result = self._guarded(self.info[plugin], what, function, *args, **kwargs)
            if not done:
                self._failed.add((plugin, what))
            return done, result

    def _report_slow(self, info: PluginInfo, what: str) -> None:
        """The watchdog's line on stderr: which plugin is slow, and the setting that skips it."""
        others = ",".join(n for n in self._names if n not in (info.name, CORE))
        print(_one_line(f"vaezoo: plugin {info.name!r} of distribution {info.distribution!r} is still running {what} "
                        f"after {self._timeout:g} s; to skip it, load only the others: VAEZOO_LOAD_PLUGINS={others}"),
              file=sys.stderr, flush=True)

    def _in_load_order(self, hook: str) -> list:
        """``hook``'s implementations in the order their plugins loaded: built-ins first, so their names win a clash.

        pluggy's own order lets a ``trylast`` or ``tryfirst`` implementation move; a third party must not
        get ahead of the built-ins that way.
        """
        return sorted(getattr(self.manager.hook, hook).get_hookimpls(), key=lambda impl: self._order[impl.plugin_name])

    def call(self, hook: str, **kwargs) -> list[tuple[str, object]]:
        """Call ``hook`` on each plugin separately; a plugin that raises is marked failed.

        A plugin that failed in another hook is still called: what one hook gives never depends on which
        hook ran first.

        Returns:
            ``(plugin name, result)`` for each plugin whose implementation returned.
        """
        results = []
        for impl in self._in_load_order(hook):
            returned, result = self._guarded(self.info[impl.plugin_name], f"hook {hook}", impl.function, **kwargs)
            if returned:
                results.append((impl.plugin_name, result))
        return results

    def owner_of(self, obj: object) -> PluginInfo | None:
        """The plugin whose package defines ``obj`` (a class, a function or an instance of a class), if any."""
        package = str(getattr(obj, "__module__", None) or "").partition(".")[0]
        return next((info for info in self.info.values() if info.package == package), None)

    def registry(self, kind: str) -> Registry:
        """The registry of ``kind``, filled from every plugin on first use."""
        with self._lock:
            if kind not in self._registries:
                hook, check = KINDS[kind]
                registry = Registry(kind, check, self._unknown_hint(), NAME_CHECKS.get(kind))
                for impl in self._in_load_order(hook):
                    self._fill(registry, hook, impl)
                self._registries[kind] = registry
            return self._registries[kind]

    def _unknown_hint(self) -> str:
        """Where an unknown part may come from: the installed plugins VAEZOO_LOAD_PLUGINS leaves out, if any."""
        if not self.left_out:
            return ""
        return (f"Installed plugins that VAEZOO_LOAD_PLUGINS leaves out: {', '.join(self.left_out)}; add the one "
                f"that registers it to VAEZOO_LOAD_PLUGINS")

    def _fill(self, registry: Registry, hook: str, impl) -> None:
        """Run one plugin's registration hook; commit its names only if all of them are accepted.

        A refusal costs the plugin that hook's names only, whichever registry was filled first: its other
        hooks' names are the same in every program.
        """
        info = self.info[impl.plugin_name]

        def stage() -> list[tuple[str, object]]:
            pending: list[tuple[str, object]] = []
            impl.function(register=lambda name, obj: pending.append((name, obj)))
            staged = Registry(registry.kind, registry._check, name_check=registry._name_check)
            for name, obj in pending:
                if isinstance(name, str) and registry.taken(name) is not None:
                    registry.register(name, obj, impl.plugin_name)  # raises, naming both plugins
                staged.register(name, obj, impl.plugin_name)
            return pending

        accepted, pending = self._guarded(info, f"hook {hook}", stage)
        if accepted:
            for name, obj in pending:
                registry.register(name, obj, impl.plugin_name)

    def card_dirs(self) -> list[tuple[str, Path]]:
        """Directories of zoo cards contributed by plugins, with the plugin that gave each (asked once)."""
        with self._lock:
            if self._card_dirs is None:
                dirs = []
                for plugin, result in self.call("vaezoo_card_dirs"):
                    if not (isinstance(result, list | tuple)
                            and all(isinstance(d, str | os.PathLike) for d in result)):
                        self.info[plugin].fail(f"hook vaezoo_card_dirs must return a list of paths, got {result!r}")
                        continue
                    dirs.extend((plugin, Path(d)) for d in result)
                self._card_dirs = dirs
            return list(self._card_dirs)


_plugins: Plugins | None = None


def _stdout_to_stderr() -> TextIO:
    found, sys.stdout = sys.stdout, sys.stderr
    return found


prints_to_stderr = SharedChange(_stdout_to_stderr, lambda found: setattr(sys, "stdout", found))
"""Send what is printed to stdout to stderr for the block (``sys.stdout`` is the process's, not a thread's): a plugin's
hooks, and a command of the CLI whose data alone goes to stdout (:func:`vaezoo.cli.common.data_alone_on_stdout`);
its :attr:`~vaezoo.errors.SharedChange.made` is the stdout set aside."""


_plugins_lock = threading.Lock()


def get_plugins() -> Plugins:
    """The process-wide :class:`Plugins`, loaded on first call."""
    global _plugins
    with _plugins_lock:
        if _plugins is None:
            _plugins = Plugins()
        return _plugins


def raised_in(exc: BaseException) -> PluginInfo | None:
    """The third-party plugin whose code ``exc`` was raised in (the innermost of its traceback's frames that runs
    a loaded plugin's package), if any: what a command cannot blame on vaezoo, or on the user's input. None when
    no plugin was loaded (nothing is loaded to answer)."""
    plugins = _plugins
    if plugins is None:
        return None
    found = None
    frame = exc.__traceback__
    while frame is not None:
        package = str(frame.tb_frame.f_globals.get("__name__", "")).partition(".")[0]
        found = next((info for info in plugins.info.values() if info.package == package and not info.builtin),
                     found)
        frame = frame.tb_next
    return found


def reset() -> None:
    """Forget loaded plugins so the next call reloads them (tests and plugin development)."""
    global _plugins
    with _plugins_lock:
        _plugins = None


def registry(kind: str) -> Registry:
    """Shortcut for ``get_plugins().registry(kind)``."""
    return get_plugins().registry(kind)
