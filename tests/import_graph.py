"""The project's import graph, read from the source (never imported): which of our modules each module
imports, which third-party packages, and the graph's cycles (tests/test_layering.py)."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


def module_files(root: Path, roots: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the given folders (or the given top-level files)."""
    files: dict[str, Path] = {}
    for top in roots:
        path = root / top
        for file in ([path] if path.suffix == ".py" else sorted(path.rglob("*.py"))):
            parts = file.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = file
    return files


def _imports(tree: ast.AST):
    """Every import statement, wherever it is: inside functions (lazy) and under ``if TYPE_CHECKING:`` too
    (a type-only import still ties two modules together)."""
    for node in ast.iter_child_nodes(tree):
        yield from _imports_in(node)


def _imports_in(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _imports(node)


@dataclass
class ImportGraph:
    edges: dict[str, set[str]]  # module -> our modules it imports
    third_party: dict[str, set[str]]  # module -> top-level names of everything else it imports

    @classmethod
    def of(cls, files: dict[str, Path]) -> ImportGraph:
        edges, third_party = {}, {}
        for name, file in files.items():
            ours, others = set(), set()
            for node in _imports(ast.parse(file.read_text(), str(file))):
                for target in _targets(node):
                    resolved = _ours(target, files)
                    if resolved:
                        ours.add(resolved)
                    else:
                        others.add(target.split(".")[0])
            ours.discard(name)
            edges[name], third_party[name] = ours, others
        return cls(edges, third_party)


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level or not node.module:
        return []
    # ``from package import submodule`` imports the submodule; ``from module import name`` the module
    return [f"{node.module}.{alias.name}" for alias in node.names]


def _ours(target: str, files: dict[str, Path]) -> str | None:
    """The deepest of our modules a dotted target names (a name inside a module resolves to the module)."""
    while target:
        if target in files:
            return target
        target = target.rpartition(".")[0]
    return None


def layer_of(module: str, layers) -> str | None:
    """The layer whose package (or module) is the longest prefix of ``module``."""
    best, best_len = None, -1
    for layer, packages in layers:
        for package in packages:
            if (module == package or module.startswith(package + ".")) and len(package) > best_len:
                best, best_len = layer, len(package)
    return best


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(edges.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(cycles)
