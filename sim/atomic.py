"""Every file hybridcache writes goes through here: written to a temporary sibling, then renamed over the
target, so a reader, a crash, a kill or a full disk never leaves a half-written output.

The output rule, for every command: a target is a regular file or a new path. A device, FIFO, socket or
directory there is refused (``OutputPathError``) before anything is written, and checked again just before
the rename: replacing ``/dev/null`` with a JSON file, as root, is never what a user meant.

The temporary sibling is ``.NAME.PID.RANDOM.tmp``, created exclusively (``O_EXCL | O_NOFOLLOW``): a file or a
symbolic link planted at a guessed name makes the creation fail (and another random name is drawn) instead
of being written through. The PID says which process owns it, so a later run can sweep the ones whose
writer is gone (``sweep_stale_temps``) without touching a live writer's. A failed write removes its
temporary file and raises an ``OSError`` naming the target (not the temporary) with its errno.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")
_OLD_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.tmp$")  # written before temporary names were random
# exclusive: never an existing file, never through a symbolic link planted at the name
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class OutputPathError(ValueError):
    """A path hybridcache was asked to write that is not a regular file or a new path."""

    def __init__(self, path: str | os.PathLike, problem: str):
        self.path = str(path)
        super().__init__(f"{path}: {problem}")


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (``a FIFO``)."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def check_output_file(path: str | os.PathLike) -> None:
    """The output rule: ``path`` (or the file a symbolic link there names) is absent or a regular file."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # a new path; a missing folder is named by the write itself
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    if not stat.S_ISREG(mode):
        raise OutputPathError(
            path,
            f"is {file_kind(mode)}, not a regular file; hybridcache writes only to a regular file or a new path",
        )


def check_output_dir(path: str | os.PathLike, names: tuple[str, ...] = ()) -> None:
    """A folder to write into: absent (it will be made) or a directory, and each of ``names`` in it (the files
    that will be written) absent or a regular file."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if not stat.S_ISDIR(mode):
        kind = "a file" if stat.S_ISREG(mode) else file_kind(mode)
        raise OutputPathError(path, f"is {kind}, not a directory (the folder to write into)")
    for name in names:
        check_output_file(path / name)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """``path`` holds ``data`` (text is written as UTF-8), or is left as it was."""
    return atomic_write_many({path: data})[0]


def atomic_write_many(files: Mapping[str | os.PathLike, str | bytes]) -> list[Path]:
    """Several files as one output: every temporary file is written before any is renamed, so a full
    disk or a bad path leaves none of them changed (a kill between two renames can still leave the first
    renamed: readers that need all of them check the one renamed last)."""
    for path in files:
        check_output_file(path)
    written: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            tmp, fd = _create_temp(path)
            written.append((tmp, path))
            _write_file(fd, data.encode("utf-8") if isinstance(data, str) else data, path)
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
    check_output_file(path)
    tmp, fd = _create_temp(path)
    try:
        f = _named(lambda: open(fd, "w", encoding=encoding, newline="\n"), path)
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
            pid = _temp_pid(entry.name)
            if pid is not None and not _alive(pid) and entry.is_file() and not entry.is_symlink():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def temp_files(*folders: str | os.PathLike) -> list[Path]:
    """The temporary files (live or stale) in ``folders``: tests assert there are none left."""
    return [e for folder in folders for e in _entries(Path(folder)) if _temp_pid(e.name) is not None]


def describe_os_error(error: OSError) -> str:
    """One line: the path, what went wrong and the errno's name (``out/x.csv: No space left on device
    (ENOSPC)``)."""
    text = error.strerror or str(error)
    if error.errno is not None:
        text += f" ({errno.errorcode.get(error.errno, error.errno)})"
    if error.filename is not None:
        text = f"{error.filename}: {text}"
    return text


def _temp_pid(name: str) -> int | None:
    match = _TEMP_NAME.match(name) or _OLD_TEMP_NAME.match(name)
    return int(match.group(1)) if match else None


def _create_temp(target: Path) -> tuple[Path, int]:
    """A new temporary sibling of ``target`` and its open descriptor (another name is drawn when one is taken)."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, _CREATE, 0o666)
        except FileExistsError:
            continue
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), str(target)) from None
    raise FileExistsError(errno.EEXIST, "no free temporary name beside it", str(target))


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


def _write_file(fd: int, data: bytes, target: Path) -> None:
    with _opened(fd, target) as f:
        _named(lambda: write_all(f, data), target)


def write_all(f: IO[bytes], data: bytes) -> None:
    """The one place bytes reach a file (tests replace it to simulate a full disk)."""
    f.write(data)
    f.flush()


@contextmanager
def _opened(fd: int, target: Path) -> Iterator[IO[bytes]]:
    f = _named(lambda: open(fd, "wb"), target)
    try:
        yield f
    finally:
        _named(f.close, target)


def _rename(tmp: Path, path: Path) -> None:
    check_output_file(path)  # again: the target may have been replaced while the output was computed
    _named(lambda: os.replace(tmp, path), path)


def _named(action, target: Path):
    """Run ``action``; an OSError is raised again naming ``target`` (the user's path, not the temporary)."""
    try:
        return action()
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), str(target)) from None
