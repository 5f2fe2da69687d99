"""Every file hybridcache writes goes through here: written to a temporary sibling, then renamed over the
target, so a reader, a crash, a kill or a full disk never leaves a half-written output.

The temporary sibling is ``.NAME.PID.tmp``: the PID says which process owns it, so a later run can sweep
the ones whose writer is gone (``sweep_stale_temps``) without touching a live writer's. A failed write
removes its temporary file and raises an ``OSError`` naming the target (not the temporary) with its errno.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.tmp$")


def temp_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """``path`` holds ``data`` (text is written as UTF-8), or is left as it was."""
    return atomic_write_many({path: data})[0]


def atomic_write_many(files: Mapping[str | os.PathLike, str | bytes]) -> list[Path]:
    """Several files as one output: every temporary file is written before any is renamed, so a full
    disk or a bad path leaves none of them changed (a kill between two renames can still leave the first
    renamed: readers that need all of them check the one renamed last)."""
    written: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            written.append((temp_path(path), path))
            _write_file(written[-1][0], data.encode("utf-8") if isinstance(data, str) else data, path)
        for tmp, path in written:
            _rename(tmp, path)
    except BaseException:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        raise
    return [path for _, path in written]


@contextmanager
def atomic_open(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """A text file to stream into; it replaces ``path`` only when the ``with`` block ends without error."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        f = _named(lambda: open(tmp, "w", encoding=encoding, newline="\n"), path)
        try:
            yield f
        except OSError as e:
            if e.filename in (None, str(tmp)):  # the write itself failed (a full disk): name the target
                raise OSError(e.errno, e.strerror or str(e), str(path)) from None
            raise
        finally:
            _named(f.close, path)
        _rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sweep_stale_temps(*folders: str | os.PathLike) -> list[Path]:
    """Remove the temporary files in ``folders`` whose writing process is gone (a kill between write and
    rename leaves them); returns what was removed."""
    removed = []
    for folder in folders:
        for entry in _entries(Path(folder)):
            match = _TEMP_NAME.match(entry.name)
            if match and not _alive(int(match.group(1))) and entry.is_file():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def temp_files(*folders: str | os.PathLike) -> list[Path]:
    """The temporary files (live or stale) in ``folders``: tests assert there are none left."""
    return [e for folder in folders for e in _entries(Path(folder)) if _TEMP_NAME.match(e.name)]


def describe_os_error(error: OSError) -> str:
    """One line: the path, what went wrong and the errno's name (``out/x.csv: No space left on device
    (ENOSPC)``)."""
    text = error.strerror or str(error)
    if error.errno is not None:
        text += f" ({errno.errorcode.get(error.errno, error.errno)})"
    if error.filename is not None:
        text = f"{error.filename}: {text}"
    return text


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _write_file(tmp: Path, data: bytes, target: Path) -> None:
    with _opened(tmp, target) as f:
        _named(lambda: write_all(f, data), target)


def write_all(f: IO[bytes], data: bytes) -> None:
    """The one place bytes reach a file (tests replace it to simulate a full disk)."""
    f.write(data)
    f.flush()


@contextmanager
def _opened(tmp: Path, target: Path) -> Iterator[IO[bytes]]:
    f = _named(lambda: open(tmp, "wb"), target)
    try:
        yield f
    finally:
        _named(f.close, target)


def _rename(tmp: Path, path: Path) -> None:
    _named(lambda: os.replace(tmp, path), path)


def _named(action, target: Path):
    """Run ``action``; an OSError is raised again naming ``target`` (the user's path, not the temporary)."""
    try:
        return action()
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(target)) from None
