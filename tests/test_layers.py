"""The core's layers (../shared/DESIGN.md, docs/architecture.md), read from the source as the next owner reads it.

The import graph counts every import, inside functions too: an import cycle or a part that looks names up is
a failure here, not a surprise at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kit import REPO

PACKAGE = REPO / "vaezoo"
PARTS = ("vaezoo.latents", "vaezoo.regularizers", "vaezoo.nets", "vaezoo.likelihoods", "vaezoo.metrics",
         "vaezoo.data", "vaezoo.reduction", "vaezoo.context", "vaezoo.model")
LOOKUPS = ("vaezoo.plugins", "vaezoo.registry", "vaezoo.assemble")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """``module -> the vaezoo modules it imports``, at top level or inside functions."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_vaezoo_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_parts_never_look_names_up():
    """Parts receive built sub-parts (through a BuildContext); only vaezoo.assemble calls the registries."""
    graph = import_graph()
    offenders = {module: sorted(graph[module] & set(LOOKUPS)) for module in graph
                 if module.startswith(PARTS) and graph[module] & set(LOOKUPS)}
    assert offenders == {}


def test_the_plugin_manager_imports_no_part():
    graph = import_graph()
    for module in ("vaezoo.plugins", "vaezoo.registry"):
        assert {m for m in graph[module] if m.startswith(PARTS)} == set(), module
