"""The core's layers (../shared/DESIGN.md, docs/architecture.md), read from the source as the next owner reads it.

The import graph counts every import, inside functions too: an import cycle or a part that looks names up is
a failure here, not a surprise at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kit import REPO

SOURCES = (REPO / "vaezoo", REPO / "plugins")
"""Where the modules are: the core and the built-in plugins (each plugin a top-level package)."""
PARTS = ("vaezoo.latents", "vaezoo.regularizers", "vaezoo.nets", "vaezoo.likelihoods", "vaezoo.metrics",
         "vaezoo.data", "vaezoo.context", "vaezoo.context", "vaezoo.model")
LOOKUPS = ("vaezoo.plugins", "vaezoo.registry", "vaezoo.assemble")
STRING_IMPORTERS = ("__import__", "import_module")
LONGEST_CHAIN = 11
"""The most modules a chain of imports may pass through (issue 36: 15 before the house was redrawn)."""


def modules() -> dict[str, Path]:
    """``name -> file`` of every module in :data:`SOURCES` (``plugins/vaezoo_core/__init__.py`` is ``vaezoo_core``)."""
    found = {}
    for root in SOURCES:
        base = root.parent if root.name == "vaezoo" else root
        for path in root.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(strings: bool = True, types: bool = False) -> dict[str, set[str]]:
    """``module -> the modules of vaezoo and its plugins it imports``, at top level or inside functions; with
    ``types``, those under ``if TYPE_CHECKING:`` too, which never run but tie the module to another all the same.

    With ``strings``, a module that calls ``__import__`` or ``importlib.import_module`` also imports every module
    a dotted string constant of it names (``"vaezoo.latents.LatentFamily"`` names ``vaezoo.latents``; the word
    ``"vaezoo"``, an entry-point group, names none).
    """
    found = modules()
    graph = {}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges = set()
        for node in (ast.walk(tree) if types else _runtime_nodes(tree)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from vaezoo.evaluation import viz`` imports the module vaezoo.evaluation.viz;
                # ``from vaezoo.x import f``, vaezoo.x
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in found else base for a in node.names]
            else:
                continue
            edges.update(t for t in targets if t in found and t != name)
        if strings and _imports_by_string(tree):
            named = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and "." in n.value]
            edges.update(m for text in named for m in (text, text.rpartition(".")[0]) if m in found and m != name)
        graph[name] = edges
    return graph


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports a type checker reads, Python never)."""
    work = [tree]
    while work:
        node = work.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not (isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING"):
                work.append(child)


def _imports_by_string(tree: ast.AST) -> bool:
    """Whether the module calls ``__import__`` or ``import_module``."""
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) in STRING_IMPORTERS
               for n in ast.walk(tree))


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports ``a -> b -> ...`` in an acyclic ``graph``, as the modules it passes through.

    A cycle has no longest chain (the walk below would go round it, growing until memory runs out): refused.
    """
    looped = cycles(graph) + [[m] for m in sorted(graph) if m in graph[m]]
    if looped:
        raise ValueError(f"the imports go round in a cycle, so no chain is the longest: {looped}")
    best: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:  # iterative depth-first, so a deep graph needs no deep recursion
        work = [module]
        while work:
            top = work[-1]
            pending = [m for m in graph[top] if m not in best]
            if pending:
                work.extend(pending)
                continue
            work.pop()
            below = max((best[m] for m in sorted(graph[top])), key=len, default=[])
            best[top] = [top, *below]
        return best[module]

    return max((chain(m) for m in sorted(graph)), key=len, default=[])


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


BASE = ("vaezoo.errors", "vaezoo.terminal", "vaezoo.devices", "vaezoo.signals", "vaezoo.version")
"""The modules every room may import: errors, what goes to a terminal, devices, stop signals (a file is not
written after one), the version."""
FOLDER_RULES = {
    "vaezoo.store": (),
    "vaezoo.entries": ("vaezoo.store", "vaezoo.context", "vaezoo.plugins", "vaezoo.registry"),
    "vaezoo.evaluation": ("vaezoo.entries", "vaezoo.store", "vaezoo.assemble", "vaezoo.model", "vaezoo.plugins",
                          "vaezoo.context", *PARTS),
    "vaezoo.training": ("vaezoo.evaluation", "vaezoo.entries", "vaezoo.store", "vaezoo.assemble", "vaezoo.model",
                        "vaezoo.context", *PARTS),
}
"""Of the rooms of vaezoo (a folder, or a module at the top), those each folder may import beside :data:`BASE`
(docs/architecture.md draws them): the store knows nothing of cards, a card entry nothing of training or
evaluation, evaluation nothing of training."""
TOP_LEVEL_MODULES = 15
"""The most modules at the top of vaezoo/ (``__init__`` and ``__main__`` included); the rest live in folders."""


def room(module: str) -> str:
    """The room ``module`` lives in: its folder right under vaezoo/ (``vaezoo.store``), or itself at the top."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "vaezoo" else parts[0]


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``room -> the rooms it imports``, from a module graph."""
    rooms: dict[str, set[str]] = {room(m): set() for m in graph}
    for module, imported in graph.items():
        rooms[room(module)] |= {room(m) for m in imported} - {room(module)}
    return rooms


def test_no_room_imports_one_that_imports_it_back():
    """Rooms stack into floors: no import from a lower room up to a higher one, even through an annotation."""
    assert cycles(room_graph(import_graph(types=True))) == []


def test_each_folder_imports_only_the_rooms_its_rule_allows():
    rooms = room_graph(import_graph(types=True))
    broken = {folder: sorted(rooms[folder] - set(allowed) - set(BASE)) for folder, allowed in FOLDER_RULES.items()
              if rooms[folder] - set(allowed) - set(BASE)}
    assert broken == {}


def test_nothing_imports_the_extras_but_the_face_of_the_package():
    """extras/ is a plugin like a third party's: the plugin manager finds it through its entry point."""
    graph = import_graph(types=True)
    importers = {m for m, imported in graph.items() if any(room(i) == "vaezoo.extras" for i in imported)}
    assert {m for m in importers if room(m) != "vaezoo.extras"} == {"vaezoo"}


def test_the_top_of_the_package_holds_few_modules_and_each_folder_says_what_it_holds():
    top = sorted(p.name for p in (REPO / "vaezoo").glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, top
    for folder in (REPO / "vaezoo").iterdir():
        if (folder / "__init__.py").is_file():
            docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
            assert docstring, f"{folder.name}/__init__.py says nothing of what lives there"


def test_the_plugin_manager_names_the_card_fields_the_schema_has():
    from vaezoo.entries.schema import Card
    from vaezoo.plugins import CARD_FIELDS

    assert CARD_FIELDS == set(Card.model_fields)


def drawn_rows(rooms: set[str]) -> list[list[str]]:
    """The rooms of docs/architecture.md's drawing of the house, row by row from the top: a row names its rooms
    first (``hub   training/   evaluation/``, folders with their ``/``), then says what they hold; a line that
    starts with spaces goes on saying it."""
    drawing = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8").partition("## Rooms")[2].split("```")[1]
    rows = []
    for line in drawing.splitlines():
        if line[:1].strip():
            names = []
            for word in line.split():
                if f"vaezoo.{word.rstrip('/')}" not in rooms:
                    break
                names.append(f"vaezoo.{word.rstrip('/')}")
            rows.append(names)
    return rows


def test_the_drawing_of_the_house_draws_every_room_once_above_the_rooms_it_imports():
    """docs/architecture.md draws the rooms in rows; a room imports only rooms of its own row or of rows below."""
    rooms = room_graph(import_graph(types=True))
    ours = {r for r in rooms if r.startswith("vaezoo.")} - {"vaezoo.__main__"}  # the package's face is above all
    rows = drawn_rows(ours)
    assert sorted(r for row in rows for r in row) == sorted(ours)
    level = {r: i for i, row in enumerate(rows) for r in row}
    assert sorted(f"{r} -> {i}" for r in ours for i in rooms[r] if i in level and level[i] < level[r]) == []


def test_the_room_finder_finds_a_room_cycle():
    assert cycles(room_graph({"vaezoo.a.x": {"vaezoo.b.y"}, "vaezoo.b.y": {"vaezoo.a.z"}, "vaezoo.a.z": set()})) \
        == [["vaezoo.a", "vaezoo.b"]]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_vaezoo_has_no_import_cycle():
    """Not even through an annotation: a lower layer that names a higher one's type is tied to it too."""
    graph = import_graph(types=True)
    assert any(m.startswith("vaezoo_jointvae") for m in graph) and graph["vaezoo.plugins"] & set(PARTS)
    assert cycles(graph) == []


def test_the_chain_finder_finds_the_longest_chain():
    assert longest_chain({"a": {"b", "d"}, "b": {"c"}, "c": set(), "d": set(), "e": {"a"}}) == ["e", "a", "b", "c"]
    assert longest_chain({"a": set()}) == ["a"]
    for looped in ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, {"a": {"a"}}):
        with pytest.raises(ValueError, match="cycle"):
            longest_chain(looped)


def test_no_chain_of_imports_is_longer_than_the_layers_allow():
    chain = longest_chain(import_graph())
    assert len(chain) <= LONGEST_CHAIN, " -> ".join(chain)


def test_the_package_front_exports_each_name_it_lends_and_each_resolves():
    import vaezoo

    assert set(vaezoo._HOMES) | {"list_models", "__version__"} == set(vaezoo.__all__)
    assert all(callable(getattr(vaezoo, name)) for name in vaezoo._HOMES)


def test_the_version_comes_from_its_own_module():
    """``__version__`` is imported from vaezoo.version, never through the package front (which lifts a verb above
    hub)."""
    offenders = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and node.module == "vaezoo" and not node.level
                    and any(alias.name == "__version__" for alias in node.names) and name != "vaezoo"):
                offenders.append(name)
    assert offenders == []


def test_parts_never_look_names_up():
    """Parts receive built sub-parts (through a BuildContext); only vaezoo.assemble calls the registries."""
    graph = import_graph()
    offenders = {module: sorted(graph[module] & set(LOOKUPS)) for module in graph
                 if module.startswith(PARTS) and graph[module] & set(LOOKUPS)}
    assert offenders == {}


def test_the_plugin_manager_imports_no_part_but_the_base_classes_it_checks_by_name():
    """The plugin manager reads no part at import (``vaezoo list`` never imports torch); it imports a kind's base
    class, by its name, only to check what a plugin registers."""
    graph, by_statement = import_graph(), import_graph(strings=False)
    for module in ("vaezoo.plugins", "vaezoo.registry"):
        assert {m for m in by_statement[module] if m.startswith(PARTS)} == set(), module
    assert {m for m in graph["vaezoo.plugins"] if m.startswith(PARTS)} == {
        "vaezoo.latents.base", "vaezoo.regularizers.base", "vaezoo.likelihoods", "vaezoo.data.base"}


COMMAND_FOLDERS = (REPO / "vaezoo" / "cli", REPO / "vaezoo" / "extras" / "commands")
"""The modules of vaezoo's commands: the core's and the extras'."""
NOT_THE_LIBRARY = ("vaezoo.cli", "vaezoo.terminal", "vaezoo.errors", "vaezoo.version")
"""What a command may call beside its one library call: the command line's own helpers, printing, errors."""


def library_calls(path: Path) -> list[str]:
    """The library functions a command module's ``run`` calls, itself or through the module's own functions:
    each a name imported from vaezoo outside :data:`NOT_THE_LIBRARY`, once per call site."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    imported = {alias.asname or alias.name: f"{node.module}.{alias.name}" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vaezoo")
                and not node.module.startswith(NOT_THE_LIBRARY) for alias in node.names}
    calls, seen, work = [], set(), ["run"]
    while work:
        name = work.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in imported:
                    calls.append(imported[node.func.id])
                elif node.func.id in functions:
                    work.append(node.func.id)
    return calls


def test_the_call_counter_counts_library_calls_through_a_commands_own_helpers(tmp_path):
    command = tmp_path / "command.py"
    command.write_text("from vaezoo.cli.common import printable\nfrom vaezoo.hub import load\n"
                       "from vaezoo.assemble import build_model\n\n"
                       "def run(args):\n    print(printable(_model(args)))\n\n"
                       "def _model(args):\n    return load(args.name), build_model(args.name)\n")
    assert library_calls(command) == ["vaezoo.hub.load", "vaezoo.assemble.build_model"]


def test_every_command_is_parse_one_library_call_print():
    """A command's ``run`` hands its parsed arguments to one library function and prints the result it returns:
    what the command does lives in the library, where Python callers get it too."""
    counts = {f"{path.parent.name}/{path.name}": library_calls(path)
              for folder in COMMAND_FOLDERS for path in sorted(folder.glob("*.py"))}
    assert {name: calls for name, calls in counts.items() if len(calls) > 1} == {}
    assert sum(len(calls) == 1 for calls in counts.values()) >= 9
