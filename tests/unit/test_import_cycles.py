"""No import cycles between modules, counting every import statement: module-level, inside functions and
under TYPE_CHECKING. A cycle hidden by a deferred import is still one in the design (two modules that
each need the other); it is broken by moving the shared piece down or passing a callback, never by moving
the import into a function.

The graph is read from the source with `ast` (nothing is imported): an edge A -> B for every import in A
that names module B, a package's `__init__` counted as the package. Importing `a.b.c` also runs `a` and
`a.b`, but those implicit edges are not counted: a package re-exporting its modules would otherwise be a
cycle with each of them.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gateway", "channels", "agent", "workspace", "config")
NAMESPACE = "clawgate"


def module_files(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """clawgate.<package>.<...> -> its source file, for every .py under the repository's packages."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((NAMESPACE, *parts))] = path
    return modules


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` (at `path`) imports anywhere in its body, resolved to known module names."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from pkg import name`: name is a submodule when one exists, else an attribute of pkg
            candidates = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                          for alias in node.names]
        else:
            continue
        for candidate in candidates:
            # `import a.b.c` where only a.b is ours (c an attribute): the nearest known module
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                found.add(candidate)
    return found


def import_graph(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    modules = module_files(root, packages)
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph has hundreds of modules): groups of mutually reachable modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def shortest_cycle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """One shortest cycle through the group's first module, for a readable failure: a -> b -> ... -> a."""
    start = min(group)
    parents: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & group):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if child not in parents:
                parents[child] = node
                queue.append(child)
    raise AssertionError(f"no cycle through {start} in a strongly connected group")


def cycles(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    graph = import_graph(root, packages)
    return [" -> ".join(shortest_cycle(graph, group)) + f"  ({len(group)} modules in the knot"
            + (f": {', '.join(sorted(group))})" if len(group) > 2 else ")")
            for group in strongly_connected(graph)]


def test_no_module_imports_itself_back_through_any_import() -> None:
    found = cycles(ROOT)
    assert found == [], "import cycles (deferred imports counted):\n" + "\n".join(found)


def test_the_graph_sees_the_project_modules() -> None:
    """The walk reads the real tree: modules it must see, and an edge it must find, are there."""
    graph = import_graph(ROOT)
    for package in PACKAGES:
        assert f"{NAMESPACE}.{package}" in graph
    assert f"{NAMESPACE}.channels.kit.adapter" in graph[f"{NAMESPACE}.channels.kit"]
    assert len(graph) > 200


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    for parent in path.relative_to(root).parents:
        if parent != Path(".") and not (root / parent / "__init__.py").exists():
            (root / parent / "__init__.py").write_text("")
    path.write_text(text)


def test_a_cycle_under_type_checking_is_found_and_named(tmp_path: Path) -> None:
    write(tmp_path, "channels/kit/adapter.py",
          "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .kit import ChannelKit\n")
    write(tmp_path, "channels/kit/kit.py", "from clawgate.channels.kit.adapter import PlatformAdapter\n")
    assert cycles(tmp_path, ("channels",)) == [
        "clawgate.channels.kit.adapter -> clawgate.channels.kit.kit -> clawgate.channels.kit.adapter"
        "  (2 modules in the knot)"]


def test_a_cycle_through_a_function_level_import_and_a_package_is_found(tmp_path: Path) -> None:
    write(tmp_path, "gateway/app.py", "def build():\n    from clawgate.gateway import fleet\n    return fleet\n")
    write(tmp_path, "gateway/fleet.py", "import clawgate.agent.mcp.tool as tool\n")
    write(tmp_path, "agent/mcp/tool.py", "from ...gateway.app import build\n")
    write(tmp_path, "agent/mcp/__init__.py", "")
    (found,) = cycles(tmp_path, ("gateway", "agent"))
    assert found.startswith("clawgate.agent.mcp.tool -> clawgate.gateway.app -> clawgate.gateway.fleet -> "
                            "clawgate.agent.mcp.tool")


def test_imports_that_only_name_a_package_or_an_attribute_make_no_cycle(tmp_path: Path) -> None:
    """A package re-exporting its modules is not a cycle with them; `from pkg import name` of a non-module
    name points at the package."""
    write(tmp_path, "config/__init__.py", "from .schema import Settings\n")
    write(tmp_path, "config/schema.py", "from clawgate.config.loader import load\n")
    write(tmp_path, "config/loader.py", "import os\n")
    assert cycles(tmp_path, ("config",)) == []
    assert import_graph(tmp_path, ("config",))["clawgate.config"] == {"clawgate.config.schema"}
