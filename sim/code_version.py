"""Which code computed a result: the package version, a hash of the simulator's source, and git's view.

A grid point's key includes ``version`` and ``source_sha256`` so that a result computed by other code (a
changed preset default, another branch checked out) is never taken for a current one. ``git`` and
``dirty`` are for people reading a report; they do not enter the key (a commit that changes no source file
changes no result).
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from importlib import metadata
from pathlib import Path

SIM_DIR = Path(__file__).resolve().parent  # every source that decides a simulation's outcome lives here
REPO_DIR = SIM_DIR.parent
PACKAGE = "hybridcache"


@functools.cache
def package_version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return _pyproject_version()


def _pyproject_version() -> str:
    import tomllib

    try:
        with open(REPO_DIR / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


@functools.cache
def source_sha256() -> str:
    """sha256 over every ``sim/**/*.py``: its path (relative, POSIX) and its bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(SIM_DIR.rglob("*.py"), key=lambda p: p.relative_to(SIM_DIR).as_posix()):
        digest.update(path.relative_to(SIM_DIR).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.cache
def git_state() -> tuple[str, bool | None]:
    """``git describe --always`` of the checkout and whether ``sim/`` has uncommitted changes; ("", None)
    where there is no git or no repository (an installed wheel)."""
    try:
        describe = _git("describe", "--always", "--tags")
        dirty = bool(_git("status", "--porcelain", "--", str(SIM_DIR)))
    except (OSError, subprocess.SubprocessError):
        return "", None
    return describe, dirty


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO_DIR), *args], capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()


def code_identity() -> dict:
    describe, dirty = git_state()
    return {"version": package_version(), "source_sha256": source_sha256(), "git": describe, "dirty": dirty}


def key_part() -> dict:
    """What of ``code_identity`` a result's key depends on."""
    return {"version": package_version(), "source_sha256": source_sha256()}


def describe_code(code: dict | None) -> str:
    """One line for people: ``0.1.0, source 1a2b3c4d5e6f, git 2175009 (uncommitted changes)``."""
    if not code:
        return "unknown code (a result stored before code versions were recorded)"
    text = f"{code.get('version', '?')}, source {str(code.get('source_sha256', '?'))[:12]}"
    if code.get("git"):
        text += f", git {code['git']}" + (" (uncommitted changes)" if code.get("dirty") else "")
    return text
