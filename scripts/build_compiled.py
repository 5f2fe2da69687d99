"""Build the compiled core: mypyc over the hot modules (``sim/compiled_core.py``), from these same sources.

    python scripts/build_compiled.py [--out build/compiled] [--jobs 2]

Copies ``sim/`` (its ``*.py``) to ``OUT/sim``, compiles ``COMPILED_MODULES`` there into C extensions beside
the copies, and writes ``OUT/compiled.json`` (the sources' hash, the modules, the tool versions). Then run
anything with ``HYBRIDCACHE_COMPILED=1`` (or ``=OUT``) to use it, e.g.
``HYBRIDCACHE_COMPILED=1 python cli.py simulate --trace traces/fanout.jsonl`` or
``HYBRIDCACHE_COMPILED=1 python -m pytest``. Needs mypy (the ``dev`` extra) and a C compiler; pure Python,
the default, needs neither. Edit a source and the build is refused until rebuilt.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sim.compiled_core import (  # noqa: E402
    COMPILED_MODULES,
    DEFAULT_BUILD,
    MANIFEST,
    compiled_sources,
    sources_sha256,
)

SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

paths = sys.argv[1:]  # mypy options (the project's config file), then the modules
sys.argv = [sys.argv[0], "build_ext", "--inplace", "--parallel", "{jobs}"]
setup(name="hybridcache_compiled_core", ext_modules=mypycify(paths, opt_level="3"))
"""


def copy_sources(out: Path) -> None:
    """``OUT/sim`` becomes an exact copy of the checkout's ``sim/*.py`` tree (old extensions removed)."""
    target = out / "sim"
    if target.exists():
        shutil.rmtree(target)
    for source in sorted((REPO / "sim").rglob("*.py")):
        copied = target / source.relative_to(REPO / "sim")
        copied.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copied)
    for stale in out.glob("*__mypyc*"):
        stale.unlink()


def compile_tree(out: Path, jobs: int) -> list[str]:
    """mypyc over ``COMPILED_MODULES``' copies in ``out``, under the project's mypy settings (``pyproject.toml``'s
    ``[tool.mypy]``: run in ``out``, mypy would find no config, and the imports the project's overrides let
    pass untyped, ``pandas``', would each need an ignore that the project's mypy reports unused)."""
    modules = [path.relative_to(out).as_posix() for path in compiled_sources(out)]
    (out / "setup_compiled.py").write_text(SETUP.format(jobs=jobs))
    env = {**os.environ, "MYPYPATH": str(out), "HYBRIDCACHE_COMPILED": "0"}
    config = ["--config-file", str(REPO / "pyproject.toml")]  # mypycify reads mypy options among its paths
    done = subprocess.run([sys.executable, "setup_compiled.py", *config, *modules], cwd=out, env=env)
    if done.returncode:
        raise SystemExit(f"error: mypyc failed (exit {done.returncode}); see its output above")
    return modules


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_BUILD, help=f"the build folder [{DEFAULT_BUILD}]")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="C compiles at once")
    args = parser.parse_args(argv)
    try:
        import mypy.version
    except ImportError:
        raise SystemExit(
            "error: the compiled core needs mypy (pip install -e '.[dev]') and a C compiler"
        ) from None
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # no manifest while the tree is half built
    started = time.perf_counter()
    copy_sources(out)
    built_from = sources_sha256(out / "sim")  # what is compiled: an edit during the build makes it stale
    modules = compile_tree(out, args.jobs)
    manifest = {
        "sources_sha256": built_from,
        "modules": modules,
        "patterns": list(COMPILED_MODULES),
        "mypy": mypy.version.__version__,
        "python": platform.python_version(),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"compiled {len(modules)} modules into {out} in {time.perf_counter() - started:.0f} s")
    print(f"use it: HYBRIDCACHE_COMPILED=1 python cli.py ...  (or HYBRIDCACHE_COMPILED={out})")


if __name__ == "__main__":
    main()
