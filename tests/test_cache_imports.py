"""sim/cache stands alone: no import cycle among its modules and no import of the layers above it (the
scheduler, the timed engine, replay of a trace, metrics). Every import counts, also one inside a function;
only ``if TYPE_CHECKING:`` imports do not. (Complements tests/test_layering.py, which bans whole packages.)"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "sim" / "cache"
# what sim/cache may import from the rest of sim: the model, the token sequences, the cost model's arithmetic
ALLOWED_BELOW = ("sim.models", "sim.tokens", "sim.cost")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path, known: set[str]) -> set[str]:
    """Modules ``path`` imports when it runs; ``from package import name`` counts the submodule if ``name`` is
    one, else the package (whose ``__init__`` then runs)."""
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level or node.module is None:
                return
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)

    Visitor().visit(ast.parse(path.read_text(), str(path)))
    return {name for name in found if name == "sim" or name.startswith("sim.")}


def _graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in sorted(CACHE.rglob("*.py"))}
    return {name: runtime_imports(path, set(files)) for name, path in files.items()}


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start through sim/cache modules, if there is one (depth-first)."""
    stack, seen = [(start, [start])], set()
    while stack:
        name, path = stack.pop()
        for target in sorted(graph.get(name, ())):
            if target == start:
                return path + [start]
            if target in graph and target not in seen:
                seen.add(target)
                stack.append((target, path + [target]))
    return None


def test_no_import_cycle_in_sim_cache():
    graph = _graph()
    cycles = [cycle for name in graph if (cycle := _cycle_from(name, graph))]
    assert not cycles, "import cycles in sim/cache:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_sim_cache_imports_nothing_above_it():
    upward = {
        name: sorted(t for t in targets if not t.startswith("sim.cache") and not t.startswith(ALLOWED_BELOW))
        for name, targets in _graph().items()
    }
    upward = {name: targets for name, targets in upward.items() if targets}
    assert not upward, f"sim/cache imports modules above it (only {ALLOWED_BELOW} are below it): {upward}"
