"""Opening what a user hands a trace command: a plain file, a gzip or zstd file, or standard input (``-``).

Compression is recognised by its magic bytes, not by the file name, so ``zcat x.gz | ... -`` and a
``.jsonl.gz`` renamed to ``.jsonl`` both work. zstd needs the optional ``zstandard`` package
(``pip install -e ".[zstd]"``); without it a zstd input is refused with that instruction.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from sim.atomic import atomic_write
from sim.trace.checks import TraceError

STDIN = "-"
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def display_name(path: str | os.PathLike) -> str:
    """What an error message calls the input: the path, or ``<stdin>``."""
    return "<stdin>" if str(path) == STDIN else str(path)


def check_regular_file(path: str | os.PathLike, name: str | None = None) -> None:
    """Refuse, up front, an input that is not a plain file: a directory, or a FIFO or device, which a command
    that reads its input more than once (``grid``) would wait on forever. ``-`` (standard input) passes."""
    if str(path) == STDIN:
        return
    name = name or display_name(path)
    mode = os.stat(path).st_mode  # a missing file raises FileNotFoundError, named by the caller's edge
    if stat.S_ISDIR(mode):
        raise TraceError(name, None, "file", "is a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise TraceError(
            name,
            None,
            "file",
            f"is {kind}, not a regular file (to stream an input, pass - and pipe it to standard input)",
        )


@contextmanager
def open_binary(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """The input's bytes, decompressed when it is gzip or zstd; standard input for ``-`` (left open)."""
    name = display_name(path)
    check_regular_file(path, name)
    raw = _stdin_bytes() if str(path) == STDIN else open(path, "rb")
    try:
        try:
            yield _decompressed(raw, name)
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise TraceError(name, None, "file", f"not a readable gzip file ({e})") from None
        except _zstd_error() as e:
            raise TraceError(name, None, "file", f"not a readable zstd file ({e})") from None
    finally:
        if str(path) != STDIN:
            raw.close()


@contextmanager
def open_lines(path: str | os.PathLike) -> Iterator[Iterator[str]]:
    """The input's lines as UTF-8 text (line endings kept, a leading byte-order mark dropped), decoded one
    by one so that a byte that is not UTF-8 is reported with its line number."""
    name = display_name(path)
    with open_binary(path) as binary:
        yield _decoded_lines(binary, name)


def _decoded_lines(binary: BinaryIO, name: str) -> Iterator[str]:
    for line_no, raw in enumerate(binary, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceError(
                name,
                line_no,
                "file",
                f"not UTF-8 text: byte 0x{raw[e.start]:02x} at column {e.start + 1} ({e.reason})",
            ) from None
        yield text.removeprefix("\ufeff") if line_no == 1 else text


def read_text(path: str | os.PathLike) -> str:
    """The whole input as UTF-8 text; a byte that is not UTF-8 is reported with its line number."""
    name = display_name(path)
    data = read_bytes(path)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise TraceError(
            name, line, "file", f"not UTF-8 text: byte 0x{data[e.start]:02x} at column {column} ({e.reason})"
        ) from None


def parse_json(text: str, name: str, line: int | None) -> object:
    """JSON read from an input; every way it can fail is a TraceError naming the place (``line`` None: a
    whole document, whose own line numbers are used)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        where = line if line is not None else e.lineno
        column = e.colno if line is None or e.lineno == 1 else e.pos + 1
        raise TraceError(name, where, "json", f"malformed JSON: {e.msg} at column {column}") from None
    except RecursionError:
        line_offset, column = _too_deep_at(text)
        where = line_offset + (line if line is not None else 1)
        raise TraceError(
            name, where, "json", f"nested too deeply (over {_MAX_DEPTH} levels at column {column})"
        ) from None
    except ValueError as e:  # an integer longer than Python converts (4300 digits)
        raise TraceError(name, line, "json", f"a number too long to read ({str(e).split(':')[0]})") from None


_MAX_DEPTH = 500  # below where Python's recursion limit stops the JSON parser


def _too_deep_at(text: str) -> tuple[int, int]:
    """(lines before, column) of the bracket that opens level ``_MAX_DEPTH + 1``: where to look."""
    depth, in_string, escaped = 0, False, False
    for index, char in enumerate(text):
        if in_string:
            in_string, escaped = (char != '"' or escaped), (char == "\\" and not escaped)
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return text.count("\n", 0, index), index - text.rfind("\n", 0, index)
        elif char in "]}":
            depth -= 1
    return 0, 0


def read_bytes(path: str | os.PathLike) -> bytes:
    """The input's bytes, decompressed; standard input for ``-``."""
    with open_binary(path) as binary:
        return binary.read()


def read_stored_bytes(path: str | os.PathLike) -> bytes:
    """The input's bytes as stored (compressed or not); standard input for ``-``."""
    if str(path) == STDIN:
        return _stdin_bytes().read()
    check_regular_file(path)
    with open(path, "rb") as f:
        return f.read()


def save_stdin(folder: str | os.PathLike, name: str = "stdin-trace.jsonl", check=None) -> Path:
    """Standard input's bytes saved as ``folder/name`` (atomically): for commands that hand a path on.
    ``check(path)`` (a loader) sees them first, from a private copy: a bad input leaves nothing behind."""
    data = read_stored_bytes(STDIN)
    if check is not None:
        with tempfile.TemporaryDirectory() as private:
            copy = Path(private) / name
            copy.write_bytes(data)
            try:
                check(copy)
            except TraceError as e:
                raise TraceError(display_name(STDIN), e.line, e.field, e.message) from None
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, data)


def _stdin_bytes() -> BinaryIO:
    stream = getattr(sys.stdin, "buffer", None)
    return stream if stream is not None else io.BytesIO(sys.stdin.read().encode())


def _decompressed(raw: BinaryIO, name: str) -> BinaryIO:
    buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
    head = buffered.peek(4)[:4]
    if head.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=buffered, mode="rb")
    if head == _ZSTD_MAGIC:
        return _zstd_reader(buffered, name)
    return buffered


def _zstd_reader(raw: BinaryIO, name: str) -> BinaryIO:
    try:
        import zstandard
    except ImportError:
        raise TraceError(
            name,
            None,
            "file",
            "is zstd-compressed; reading it needs the zstandard package "
            '(pip install -e ".[zstd]", or decompress it first)',
        ) from None
    return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=False))


def _zstd_error() -> type[Exception]:
    try:
        import zstandard
    except ImportError:
        return _NeverRaised
    return zstandard.ZstdError


class _NeverRaised(Exception):
    """Stands for zstandard's error class where zstandard is not installed (no zstd stream was opened)."""
