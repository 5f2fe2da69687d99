"""The project's layers (docs/ARCHITECTURE.md): each package imports only from its own layer or the ones
below it, no module imports a third-party package its layer must not need (SPEC section 2: sim/cache no
simpy, sim no torch/triton, the executor no simpy), and the import graph has no cycle.

Every import counts: lazy ones inside functions and type-only ones under ``if TYPE_CHECKING:`` too (they tie
two modules as surely as any other); the parent package that importing a submodule runs implicitly does not."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.import_graph import ImportGraph, find_cycles, layer_of, module_files

ROOT = Path(__file__).resolve().parents[1]

# lowest first; a module may import its own layer and the layers below it
LAYERS = [
    ("base", ("sim", "sim.tokens", "sim.atomic", "sim.code_version", "sim.progress", "sim.models")),
    ("trace", ("sim.trace",)),
    ("cost", ("sim.cost",)),
    ("cache", ("sim.cache",)),
    ("sched", ("sim.sched",)),
    ("engines", ("sim.engines",)),
    ("bounds", ("sim.bounds",)),
    ("run", ("sim.run",)),
    ("studies", ("sim.grid", "sim.experiments")),
    ("outputs", ("reports", "executor", "conformance")),
    ("commands", ("commands", "cli")),
]
THIRD_PARTY_BANS = [("sim.cache", {"simpy", "torch", "triton"}), ("sim", {"torch", "triton"}),
                    ("executor", {"simpy"})]


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph.of(module_files(ROOT, ("sim", "reports", "executor", "conformance", "commands", "cli.py")))


def upward_imports(graph: ImportGraph, layers=LAYERS) -> list[str]:
    names = [name for name, _ in layers]
    found = []
    for module, imported in sorted(graph.edges.items()):
        own = layer_of(module, layers)
        for other in sorted(imported):
            theirs = layer_of(other, layers)
            if own is not None and theirs is not None and names.index(theirs) > names.index(own):
                found.append(f"{module} ({own}) imports {other} ({theirs}): a lower layer never imports a higher one")
    return found


def test_every_module_has_a_layer(graph):
    assert not [m for m in graph.edges if layer_of(m, LAYERS) is None], "add the module's package to LAYERS"


def test_no_upward_import(graph):
    assert not upward_imports(graph), "\n".join(upward_imports(graph))


def test_no_import_cycle(graph):
    cycles = find_cycles(graph.edges)
    assert not cycles, "import cycles, each a set of modules that import each other:\n" + "\n".join(
        ", ".join(c) for c in cycles)


@pytest.mark.parametrize("package, forbidden", THIRD_PARTY_BANS)
def test_third_party_bans(graph, package, forbidden):
    offenders = {m: sorted(graph.third_party[m] & forbidden) for m in graph.edges
                 if m == package or m.startswith(package + ".")}
    assert not {m: mods for m, mods in offenders.items() if mods}


def test_the_checks_catch_a_deliberate_violation(tmp_path):
    """An upward import and a cycle planted in a copy of two modules are both reported, by name."""
    (tmp_path / "sim" / "cache").mkdir(parents=True)
    (tmp_path / "sim" / "run").mkdir()
    (tmp_path / "sim" / "cache" / "a.py").write_text("from sim.run.b import thing\n")
    (tmp_path / "sim" / "run" / "b.py").write_text("def f():\n    from sim.cache.a import other\n")
    (tmp_path / "sim" / "cache" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sim.run.b import thing\n")
    planted = ImportGraph.of(module_files(tmp_path, ("sim",)))
    assert upward_imports(planted) == [
        "sim.cache.a (cache) imports sim.run.b (run): a lower layer never imports a higher one",
        "sim.cache.c (cache) imports sim.run.b (run): a lower layer never imports a higher one"]
    assert find_cycles(planted.edges) == [["sim.cache.a", "sim.run.b"]]


def test_package_folders_open_with_a_docstring():
    folders = [p.parent for p in ROOT.glob("*/**/__init__.py") if ".venv" not in p.parts and "tests" not in p.parts
               and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    missing = [str(f.relative_to(ROOT)) for f in folders
               if not ast.get_docstring(ast.parse((f / "__init__.py").read_text()))]
    assert not sorted(missing)
