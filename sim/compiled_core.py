"""The compiled core, opt-in: the hot modules built by mypyc from these same sources, used instead of them.

``python scripts/build_compiled.py`` copies ``sim/`` to ``build/compiled/sim`` and compiles the modules of
``COMPILED_MODULES`` there (C extensions beside the copied sources), recording the sources' hash. With
``HYBRIDCACHE_COMPILED=1`` in the environment (or a build folder's path) every later import of a ``sim``
submodule comes from that tree (``sim/__init__.py`` points the package's path there), so the command line, the
tests and the benchmarks run the compiled code unchanged. A build whose sources no longer match the checkout's
is refused with the command that rebuilds it: a stale extension never shadows an edited rule. Without the
variable nothing changes: pure Python is the default, and needs no compiler.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

SIM_DIR = Path(__file__).resolve().parent
DEFAULT_BUILD = SIM_DIR.parent / "build" / "compiled"
MANIFEST = "compiled.json"  # in the build folder: the sources' hash and the compiled modules
ENV = "HYBRIDCACHE_COMPILED"
REBUILD = "python scripts/build_compiled.py"

# the hot path of a run: token runs, the cache managers and rules, the block pool, the bounds' inner loops,
# the replay and the scheduler, the trace's token sequences and its ideal reuse (every run's first pass),
# and the timed loop: the engine, its step log, the backend and the step pricing (Round 31).
# ``INTERPRETED`` stays interpreted: ``errors`` and ``integrity`` (mypyc cannot subclass a built-in exception
# other than Exception), what a run reaches only once (knobs, policies, resolution, sizing, the
# protocols), where mypyc's dataclasses would not take ``object`` or ``type`` fields, and vLLM's block
# ``layout``: mypyc compiles a ``cached_property`` as a plain property, so its figures, computed once in
# Python, would be rebuilt at every read (a compiled vLLM replay ran 1.4x slower than pure Python)
COMPILED_MODULES = (
    "sim/tokens.py",
    "sim/align.py",
    "sim/cache/*.py",
    "sim/cache/engines/*.py",
    "sim/cache/blocks/*.py",
    "sim/sched/*.py",
    "sim/run/replay.py",
    "sim/run/engine.py",
    "sim/run/step_log.py",
    "sim/run/backend.py",
    "sim/run/event_delays.py",
    "sim/run/step_runs.py",
    "sim/cost/shape.py",
    "sim/cost/step_sums.py",
    "sim/cost/decode_run.py",
    "sim/cost/decode_run_settled.py",
    "sim/cost/model.py",
    "sim/trace/trace.py",
    "sim/trace/stats.py",
    "sim/bounds/belady.py",
    "sim/bounds/page_paths.py",
    "sim/bounds/segment_trie.py",
    "sim/bounds/trie_cursor.py",
    "sim/bounds/events.py",
    "sim/bounds/recorder.py",
    "sim/bounds/stretch_record.py",
)
INTERPRETED = (
    "__init__.py",
    "errors.py",
    "integrity.py",
    "knobs.py",
    "policy.py",
    "resolve.py",
    "sizing.py",
    "interface.py",
    "ops.py",
    "reasons.py",
    "defaults.py",
    "startup.py",
    "marconi_knobs.py",
    "sglang_knobs.py",
    "freetoken_knobs.py",
    "layout.py",
)


if TYPE_CHECKING:  # mypy and mypyc see the real decorator, whatever the build's own type-check options
    from mypy_extensions import mypyc_attr
else:
    try:
        from mypy_extensions import mypyc_attr
    except ImportError:  # a pure-Python install has no mypy: the decorator only speaks to mypyc

        def mypyc_attr(*attrs, **kwattrs):
            return lambda cls: cls


class StaleBuild(ImportError):
    """The compiled tree was built from other sources than the checkout's."""


def sources_sha256(sim_dir: Path = SIM_DIR) -> str:
    """sha256 over every ``*.py`` under ``sim_dir``: relative path and bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(sim_dir.rglob("*.py"), key=lambda p: p.relative_to(sim_dir).as_posix()):
        digest.update(path.relative_to(sim_dir).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def compiled_sources(root: Path) -> list[Path]:
    """The files of ``COMPILED_MODULES`` under ``root`` (a checkout or a build folder)."""
    found = {path for pattern in COMPILED_MODULES for path in root.glob(pattern)}
    return sorted(path for path in found if path.name not in INTERPRETED)


def requested_build() -> Path | None:
    """The build folder ``$HYBRIDCACHE_COMPILED`` asks for (``1``: the default one), or None."""
    value = os.environ.get(ENV, "").strip()
    if value in ("", "0"):
        return None
    return DEFAULT_BUILD if value == "1" else Path(value).resolve()


def check_build(build: Path) -> dict:
    """The build's manifest, if it exists and matches these sources; else a ``StaleBuild`` saying why."""
    manifest = build / MANIFEST
    if not manifest.is_file():
        raise StaleBuild(f"{ENV} is set but {build} holds no compiled core: run `{REBUILD}` first")
    recorded = json.loads(manifest.read_text())
    if recorded.get("sources_sha256") != sources_sha256():
        raise StaleBuild(
            f"the compiled core in {build} was built from other sources than {SIM_DIR}: rebuild it "
            f"(`{REBUILD}`) or unset {ENV}"
        )
    return recorded


def activate(package_path: list[str]) -> Path | None:
    """Point the ``sim`` package at the requested compiled tree (its path list is changed in place)."""
    build = requested_build()
    if build is None:
        return None
    check_build(build)
    package_path[:] = [str(build / "sim")]
    if str(build) not in sys.path:
        sys.path.append(str(build))  # the extensions' shared library lies at the build's top
    return build
