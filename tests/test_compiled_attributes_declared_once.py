"""A compiled class never declares again an attribute its base class declares.

mypyc (2.4.1) lays out such an attribute once in the instance but lists it in both classes, and the class's
cycle-collector traversal visits it once per listing: a list held once and visited twice reads to the collector
as held from outside, so whatever it holds outlives the collection that frees its owner (a dropped timed
engine's scheduler kept every request record, match and radix node alive one collection longer; under the
compiled core ``test_gc_pause``'s timed cases counted the previous case's 362 to 910 objects). In a subclass,
``self.x = ...`` keeps the base's declaration; ``self.x: T = ...`` or a class-level ``x: T`` makes a new one.
A class-level constant of an atomic type (``name = "sglang"``) is visited twice too but holds nothing the
collector tracks: allowed."""

from __future__ import annotations

import ast
from pathlib import Path

from sim.compiled_core import SIM_DIR, compiled_sources

ATOMIC = (int, float, bool, str, bytes, type(None))


def _declared(cls: ast.ClassDef) -> dict[str, str]:
    """Attribute name -> how the class declares it (class-level names and ``self.x: T`` in its methods)."""
    found: dict[str, str] = {}
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            found[item.target.id] = "annotated"
        elif isinstance(item, ast.Assign):
            atomic = isinstance(item.value, ast.Constant) and isinstance(item.value.value, ATOMIC)
            for target in item.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = "atomic constant" if atomic else "assigned"
        elif isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(item):
                target = node.target if isinstance(node, ast.AnnAssign) else None
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    if target.value.id == "self":
                        found.setdefault(target.attr, "self-annotated")
    return found


def _classes() -> dict[str, ast.ClassDef]:
    classes: dict[str, ast.ClassDef] = {}
    for path in compiled_sources(SIM_DIR.parent):
        for node in ast.walk(ast.parse(Path(path).read_text())):
            if isinstance(node, ast.ClassDef):
                classes[node.name] = node
    return classes


def _base_names(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> list[str]:
    """The compiled classes above ``cls``, nearest first."""
    out, todo = [], [b.id for b in cls.bases if isinstance(b, ast.Name)]
    while todo:
        name = todo.pop(0)
        if name in classes and name not in out:
            out.append(name)
            todo += [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
    return out


def redeclared_attributes() -> list[str]:
    classes = _classes()
    found = []
    for name, cls in sorted(classes.items()):
        above = {attr for base in _base_names(cls, classes) for attr in _declared(classes[base])}
        for attr, how in sorted(_declared(cls).items()):
            if attr in above and how != "atomic constant":
                found.append(f"{name}.{attr} ({how} again)")
    return found


def test_no_compiled_class_declares_a_base_attribute_again():
    assert redeclared_attributes() == []


def test_the_check_finds_an_attribute_declared_again(monkeypatch, tmp_path):
    base = "class Base:\n    items: list\n    name = 'base'\n"
    sub = "class Sub(Base):\n    name = 'sub'\n    def __init__(self):\n        self.items: list = []\n"
    (tmp_path / "mod.py").write_text(base + sub)
    monkeypatch.setattr(__import__(__name__), "compiled_sources", lambda root: [tmp_path / "mod.py"])
    assert redeclared_attributes() == ["Sub.items (self-annotated again)"]
