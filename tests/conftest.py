"""Shared fixtures: the test data folder, a writer for small JSONL traces, the real traces if present."""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sim.compiled_core import requested_build
from tests.hypothesis_pins import draw_no_local_constants

# before any test draws: a property's examples must not depend on what else the process imported
draw_no_local_constants()

DATA_DIR = Path(__file__).parent / "data"


def _shared_traces_dir() -> Path | None:
    # CI lays shared/ beside the clone; a developer's checkout may have it elsewhere
    repo = Path(__file__).resolve().parent.parent
    candidates = [os.environ.get("HYBRIDCACHE_SHARED"), repo.parent / "shared", Path("/work/shared")]
    for candidate in candidates:
        if candidate and (Path(candidate) / "traces").is_dir():
            return Path(candidate) / "traces"
    return None


@pytest.fixture
def data_dir() -> Path:
    return DATA_DIR


@pytest.fixture
def shared_traces() -> Path:
    """The real traces of shared/traces; the test is skipped where they are absent."""
    found = _shared_traces_dir()
    if found is None:
        pytest.skip("shared/traces not found (set HYBRIDCACHE_SHARED)")
    return found


@pytest.fixture
def write_lines(tmp_path: Path) -> Callable[..., Path]:
    """Write a trace file from dicts (dumped as JSON) and strings (written as they are)."""
    def write(lines: list[dict | str], name: str = "trace.jsonl") -> Path:
        path = tmp_path / name
        text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
        path.write_text(text, encoding="utf-8")
        return path
    return write


def pytest_collection_modifyitems(config, items):
    """Under the compiled core (``HYBRIDCACHE_COMPILED``), a test that replaces a method of a compiled class
    cannot run: mypyc's classes take no such patch."""
    if requested_build() is None:
        return
    skip = pytest.mark.skip(reason="replaces a method of a compiled class (HYBRIDCACHE_COMPILED is set)")
    for item in items:
        if "interpreted" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n`` with ``--dist load`` (the default): each engine's conformance tests on one worker
    (tests/xdist_engines.py), so no engine is imported by both workers."""
    if config.getoption("dist") != "load":
        return None
    from tests.xdist_engines import EngineScheduling

    return EngineScheduling(config, log)


@pytest.fixture(scope="module")
def default_loop_no_cache():
    """``no-cache`` on the default loop, as before Round 41 (tests/default_loop_no_cache.py), for a module."""
    from tests.default_loop_no_cache import default_loop_no_cache as swapped

    with swapped():
        yield
