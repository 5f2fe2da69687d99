"""The input rule, for everything a user hands a command (traces, datasets, grid files, stores, calibration
files, standard input): a plain file, a gzip or zstd file, or standard input (``-``), nothing else.

A directory, FIFO, device or socket is refused up front (a command that reads its input more than once,
``grid``, would wait on a FIFO forever, and ``/dev/zero`` never ends), as is standard input that is closed,
a terminal or a device. Compression is recognised by its magic bytes, not by the file name
(``sim/trace/compression.py``), so ``zcat x.gz | ... -`` and a ``.jsonl.gz`` renamed to ``.jsonl`` both
work; what it decompresses to is capped while it is read (``sim/trace/input_limits.py``). zstd needs the
optional ``zstandard`` package (``pip install -e ".[zstd]"``); without it a zstd input is refused with that
instruction. JSON is read strictly (``sim/trace/strict_json.py``). Every refusal is a TraceError naming the
input (and the line, where one).
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from sim.atomic import atomic_write, file_kind
from sim.trace import input_limits
from sim.trace.checks import TraceError
from sim.trace.compression import decompressed, zstd_error
from sim.trace.input_limits import MAX_LINE_BYTES, InputTooLarge
from sim.trace.strict_json import JSONError, loads

STDIN = "-"
_PIPE_IT = "to stream an input, pass - and pipe it to standard input"


def display_name(path: str | os.PathLike) -> str:
    """What an error message calls the input: the path, or ``<stdin>``."""
    return "<stdin>" if str(path) == STDIN else str(path)


def check_regular_file(path: str | os.PathLike, name: str | None = None, stream_hint: bool = True) -> None:
    """Refuse, up front, an input that is not a plain file (or, for ``-``, standard input that cannot be
    read as a stream). ``stream_hint``: say how to stream the input instead (a trace's, not a store's)."""
    if str(path) == STDIN:
        check_stdin()
        return
    name = name or display_name(path)
    mode = os.stat(path).st_mode  # a missing file raises FileNotFoundError, named by the caller's edge
    if stat.S_ISDIR(mode):
        raise TraceError(name, None, "file", "is a directory, not a file")
    if not stat.S_ISREG(mode):
        hint = f" ({_PIPE_IT})" if stream_hint else ""
        raise TraceError(name, None, "file", f"is {file_kind(mode)}, not a regular file{hint}")


def check_stdin() -> None:
    """Standard input is open and a pipe or a file: not closed (``<&-``), not a terminal nor a device."""
    stream = sys.stdin
    if stream is None or stream.closed:
        raise TraceError(
            "<stdin>", None, "file", "standard input is closed; pipe the input in, or give a file"
        )
    try:
        fd = stream.fileno()
    except (OSError, ValueError):  # an in-memory stream (a test's): nothing to check
        return
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        raise TraceError("<stdin>", None, "file", "standard input is closed; pipe the input in") from None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISDIR(mode):
        what = "a terminal" if os.isatty(fd) else file_kind(mode)
        raise TraceError(
            "<stdin>", None, "file", f"standard input is {what}; pipe the input in, or give a file"
        )


@contextmanager
def open_binary(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """The input's bytes, decompressed when it is gzip or zstd; standard input for ``-`` (left open)."""
    name = display_name(path)
    check_regular_file(path, name)
    raw = _stdin_bytes() if str(path) == STDIN else open(path, "rb")
    try:
        try:
            yield decompressed(raw, name, str(path) == STDIN)
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise TraceError(name, None, "file", f"not a readable gzip file ({e})") from None
        except zstd_error() as e:
            raise TraceError(name, None, "file", f"not a readable zstd file ({e})") from None
        except InputTooLarge as e:
            raise TraceError(name, None, "file", str(e)) from None
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
    read_line = binary.readline
    for line_no, raw in enumerate(iter(lambda: read_line(MAX_LINE_BYTES + 1), b""), 1):
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(
                name, line_no, "file", f"a line longer than {MAX_LINE_BYTES >> 20} MiB: not one request"
            )
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
    return decoded(read_bytes(path), display_name(path))


def read_document(path: str | os.PathLike, max_bytes: int) -> str:
    """A small document as stored (a grid file, a store's JSON, a calibration file): a regular file of at
    most ``max_bytes``, as UTF-8 text."""
    name = display_name(path)
    check_regular_file(path, name, stream_hint=False)
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TraceError(name, None, "file", f"larger than {max_bytes:,} bytes: not the file meant?")
    return decoded(data, name)


def decoded(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise TraceError(
            name, line, "file", f"not UTF-8 text: byte 0x{data[e.start]:02x} at column {column} ({e.reason})"
        ) from None


def parse_json(text: str, name: str, line: int | None) -> object:
    """JSON read strictly from an input; every way it can fail is a TraceError naming the place (``line``:
    the text's line in the input, None for a whole document)."""
    try:
        return loads(text)
    except JSONError as e:
        raise TraceError(name, e.line if line is None else line + e.line - 1, e.field, e.message) from None


def read_bytes(path: str | os.PathLike) -> bytes:
    """The input's bytes, decompressed; standard input for ``-``."""
    if str(path) != STDIN and os.path.isfile(path) and os.path.getsize(path) > input_limits.max_input_bytes():
        raise TraceError(
            display_name(path),
            None,
            "file",
            f"larger than a simulation can hold (raise {input_limits.MAX_INPUT_ENV} if it is meant)",
        )
    with open_binary(path) as binary:
        return binary.read()


def read_stored_bytes(path: str | os.PathLike) -> bytes:
    """The input's bytes as stored (compressed or not); standard input for ``-``."""
    check_regular_file(path)
    limit = input_limits.max_input_bytes()
    if str(path) == STDIN:
        data = _stdin_bytes().read(limit + 1)
    else:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    if len(data) > limit:
        raise TraceError(display_name(path), None, "file", f"holds over {limit:,} bytes")
    return data


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
