"""The opt-in compiled core (``sim/compiled_core.py``): asked for only through the environment, refused when
stale or missing, and, when asked for, really the code that runs (every hot module an extension)."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from sim import compiled_core
from sim.compiled_core import (
    COMPILED_MODULES,
    ENV,
    INTERPRETED,
    MANIFEST,
    SIM_DIR,
    StaleBuild,
    check_build,
    compiled_sources,
    requested_build,
    sources_sha256,
)


def test_nothing_is_asked_for_without_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    assert requested_build() is None
    monkeypatch.setenv(ENV, "0")
    assert requested_build() is None
    monkeypatch.setenv(ENV, "1")
    assert requested_build() == compiled_core.DEFAULT_BUILD
    monkeypatch.setenv(ENV, str(tmp_path))
    assert requested_build() == tmp_path.resolve()


def test_a_missing_build_is_refused_with_the_command_that_makes_it(tmp_path):
    with pytest.raises(StaleBuild, match="build_compiled.py"):
        check_build(tmp_path)


def test_a_build_of_other_sources_is_refused(tmp_path):
    (tmp_path / MANIFEST).write_text(json.dumps({"sources_sha256": "0" * 64}))
    with pytest.raises(StaleBuild, match="other sources"):
        check_build(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"sources_sha256": sources_sha256()}))
    assert check_build(tmp_path)["sources_sha256"] == sources_sha256()


def test_the_sources_hash_sees_an_edit(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    before = sources_sha256(tmp_path)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert sources_sha256(tmp_path) != before


def test_a_stale_build_stops_the_import_of_sim(tmp_path):
    (tmp_path / MANIFEST).write_text(json.dumps({"sources_sha256": "stale"}))
    done = subprocess.run([sys.executable, "-c", "import sim"], capture_output=True, text=True,
                          cwd=SIM_DIR.parent, env={**os.environ, ENV: str(tmp_path)})
    assert done.returncode != 0 and "StaleBuild" in done.stderr and "rebuild it" in done.stderr


def test_the_module_lists_name_real_files():
    compiled = compiled_sources(SIM_DIR.parent)
    assert len(compiled) > 40
    for pattern in COMPILED_MODULES:
        assert list(SIM_DIR.parent.glob(pattern)), pattern
    names = {path.name for path in SIM_DIR.rglob("*.py")}
    assert set(INTERPRETED) <= names
    assert not any(path.name in INTERPRETED for path in compiled)


@pytest.mark.skipif(requested_build() is None, reason=f"runs against the compiled core only ({ENV}=1)")
def test_every_hot_module_runs_compiled():
    """Under ``HYBRIDCACHE_COMPILED`` the whole suite runs the compiled core: no hot module from source."""
    for path in compiled_sources(SIM_DIR.parent):
        name = ".".join(path.relative_to(SIM_DIR.parent).with_suffix("").parts)
        module = importlib.import_module(name)
        assert not str(module.__file__).endswith(".py"), f"{name} loads from {module.__file__}"


def test_no_compiled_module_caches_with_cached_property():
    """mypyc compiles ``functools.cached_property`` as a plain property: a compiled module's figure "computed
    once" would be rebuilt at every read (vLLM's block layout was: a compiled replay 1.4x slower than pure
    Python). Such a module stays in ``INTERPRETED``, or keeps its figures in attributes set once."""
    offenders = [path for path in compiled_sources(SIM_DIR.parent) if "cached_property" in path.read_text()]
    assert not offenders, offenders


@pytest.mark.parametrize("script", ["scripts/output_hashes.py", "benchmarks/compiled_profile.py"])
def test_the_measuring_scripts_refuse_a_build_of_other_sources(tmp_path, script):
    """A build whose own copy of ``sim`` agrees with its manifest but not with the checkout is refused: the
    scripts import the checkout's ``sim``, which checks the build against these sources (with the build first
    on the path, its copy was checked against itself and an out-of-date build ran)."""
    copy = tmp_path / "sim"
    copy.mkdir()
    (copy / "__init__.py").write_text("")  # a build's sources that are not the checkout's
    (tmp_path / MANIFEST).write_text(json.dumps({"sources_sha256": sources_sha256(copy)}))
    done = subprocess.run([sys.executable, script, "1", "sglang:replay"], capture_output=True, text=True,
                          cwd=SIM_DIR.parent, env={**os.environ, ENV: str(tmp_path)}, timeout=120)
    assert done.returncode != 0 and "built from other sources" in done.stderr, done.stderr[-2000:]
