"""The plugin manager: plugins from the entry-point group ``vaezoo``, loaded once, lazily.

Built-in plugins (``plugins/`` in the source tree) are declared in vaezoo's own
pyproject and take this same path. ``VAEZOO_LOAD_PLUGINS`` (comma-separated
entry-point names) is an allow-list; set to the empty string, no plugin loads.
A plugin that raises on import or inside a hook is reported as failed (a
warning, and ``vaezoo plugins``) and the others keep working.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

import pluggy

from vaezoo import hookspecs
from vaezoo.errors import VaezooError
from vaezoo.registry import Registry

ENTRY_POINT_GROUP = "vaezoo"
CORE = "core"  # the entry point under which the core registers its own parts


class PluginWarning(UserWarning):
    """A plugin failed to load or raised inside a hook."""


@dataclass
class PluginInfo:
    """What ``vaezoo plugins`` shows for one plugin."""

    name: str
    version: str
    hooks: list[str] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None

    def fail(self, error: str) -> None:
        self.status = "failed"
        self.error = " ".join(error.split())  # one line: pluggy's and plugins' messages may span several
        warnings.warn(f"vaezoo plugin '{self.name}' failed: {self.error}", PluginWarning, stacklevel=3)


def _is_class_of(base_path: str):
    """A registration check: the object must be a subclass of ``base_path`` (imported lazily)."""

    def check(obj: object) -> str | None:
        module, _, attr = base_path.rpartition(".")
        base = getattr(__import__(module, fromlist=[attr]), attr)
        if isinstance(obj, type) and issubclass(obj, base):
            return None
        return f"expected a subclass of {base_path}, got {obj!r}"

    return check


def _is_callable(obj: object) -> str | None:
    return None if callable(obj) else f"expected a callable, got {obj!r}"


# kind -> (hook name, registration check)
KINDS: dict[str, tuple[str, object]] = {
    "architecture": ("vaezoo_register_architectures", _is_callable),
    "latent family": ("vaezoo_register_latent_families", _is_class_of("vaezoo.latents.LatentFamily")),
    "regularizer": ("vaezoo_register_regularizers", _is_class_of("vaezoo.regularizers.Regularizer")),
    "net": ("vaezoo_register_nets", _is_class_of("torch.nn.Module")),
    "likelihood": ("vaezoo_register_likelihoods", _is_class_of("vaezoo.likelihoods.Likelihood")),
    "dataset": ("vaezoo_register_datasets", _is_callable),
    "metric": ("vaezoo_register_metrics", _is_callable),
    "converter": ("vaezoo_register_converters", _is_callable),
}


class Plugins:
    """Loaded plugins, their status, and the registries they fill (each filled on first use)."""

    def __init__(self) -> None:
        self.manager = pluggy.PluginManager("vaezoo")
        self.manager.add_hookspecs(hookspecs)
        self.info: dict[str, PluginInfo] = {}
        self._registries: dict[str, Registry] = {}
        self._lock = threading.RLock()
        self._load_entry_points()
        for name, info in self.info.items():
            plugin = self.manager.get_plugin(name)
            if plugin is not None:
                info.hooks = sorted(h.name for h in self.manager.get_hookcallers(plugin) or [])

    def _load_entry_points(self) -> None:
        allowed = os.environ.get("VAEZOO_LOAD_PLUGINS")
        allow = None if allowed is None else {n.strip() for n in allowed.split(",") if n.strip()}
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name != CORE, e.name)):
            if ep.name in self.info or (allow is not None and ep.name not in allow and ep.name != CORE):
                continue
            dist = getattr(ep, "dist", None)
            info = self.info[ep.name] = PluginInfo(ep.name, dist.version if dist else "?")
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must not break the others
                info.fail(f"import of '{ep.value}' raised {type(exc).__name__}: {exc}")
                continue
            try:
                self.manager.register(module, name=ep.name)
            except Exception as exc:  # pluggy refuses hooks that do not match their specification
                info.fail(f"cannot register '{ep.value}': {type(exc).__name__}: {exc}")

    def _in_load_order(self, hook: str) -> list:
        """``hook``'s implementations in the order their plugins loaded: the core first, then by entry-point name.

        pluggy keeps implementations in registration order (and calls them in reverse); registering in this
        order means the core's names always win a clash, and a clash marks the later plugin failed.
        """
        return getattr(self.manager.hook, hook).get_hookimpls()

    def call(self, hook: str, **kwargs) -> list[tuple[str, object]]:
        """Call ``hook`` on each plugin separately; a plugin that raises is marked failed."""
        results = []
        for impl in self._in_load_order(hook):
            info = self.info[impl.plugin_name]
            if info.status != "ok":
                continue
            try:
                results.append((impl.plugin_name, impl.function(**kwargs)))
            except Exception as exc:
                info.fail(f"hook {hook} raised {type(exc).__name__}: {exc}")
        return results

    def registry(self, kind: str) -> Registry:
        """The registry of ``kind``, filled from every plugin on first use."""
        with self._lock:
            if kind not in self._registries:
                hook, check = KINDS[kind]
                registry = Registry(kind, check)
                for impl in self._in_load_order(hook):
                    self._fill(registry, hook, impl)
                self._registries[kind] = registry
            return self._registries[kind]

    def _fill(self, registry: Registry, hook: str, impl) -> None:
        """Run one plugin's registration hook; commit its names only if all of them are accepted."""
        info = self.info[impl.plugin_name]
        if info.status != "ok":
            return
        pending: list[tuple[str, object]] = []
        try:
            impl.function(register=lambda name, obj: pending.append((name, obj)))
            staged = Registry(registry.kind, registry._check)
            for name, obj in pending:
                if name in registry:
                    registry.register(name, obj, impl.plugin_name)  # raises, naming both plugins
                staged.register(name, obj, impl.plugin_name)
        except VaezooError as exc:
            info.fail(str(exc))
            return
        except Exception as exc:
            info.fail(f"hook {hook} raised {type(exc).__name__}: {exc}")
            return
        for name, obj in pending:
            registry.register(name, obj, impl.plugin_name)

    def card_dirs(self) -> list[tuple[str, Path]]:
        """Directories of zoo cards contributed by plugins, with the plugin that gave each."""
        dirs = []
        for plugin, result in self.call("vaezoo_card_dirs"):
            if not isinstance(result, list | tuple) or not all(isinstance(d, str | os.PathLike) for d in result):
                self.info[plugin].fail(f"hook vaezoo_card_dirs must return a list of paths, got {result!r}")
                continue
            dirs.extend((plugin, Path(d)) for d in result)
        return dirs


def _version() -> str:
    from vaezoo import __version__

    return __version__


_plugins: Plugins | None = None
_plugins_lock = threading.Lock()


def get_plugins() -> Plugins:
    """The process-wide :class:`Plugins`, loaded on first call."""
    global _plugins
    with _plugins_lock:
        if _plugins is None:
            _plugins = Plugins()
        return _plugins


def reset() -> None:
    """Forget loaded plugins so the next call reloads them (tests and plugin development)."""
    global _plugins
    with _plugins_lock:
        _plugins = None


def registry(kind: str) -> Registry:
    """Shortcut for ``get_plugins().registry(kind)``."""
    return get_plugins().registry(kind)
