"""Opening what a user hands a trace command: a plain file, a gzip or zstd file, or standard input (``-``).

Compression is recognised by its magic bytes, not by the file name, so ``zcat x.gz | ... -`` and a
``.jsonl.gz`` renamed to ``.jsonl`` both work. zstd needs the optional ``zstandard`` package
(``pip install -e ".[zstd]"``); without it a zstd input is refused with that instruction.
"""
from __future__ import annotations

import gzip
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from sim.trace_check import TraceError

STDIN = "-"
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def display_name(path: str | os.PathLike) -> str:
    """What an error message calls the input: the path, or ``<stdin>``."""
    return "<stdin>" if str(path) == STDIN else str(path)


@contextmanager
def open_text(path: str | os.PathLike, encoding: str = "utf-8", newline: str | None = None) -> Iterator[TextIO]:
    """The input as text, decompressed when it is gzip or zstd; standard input for ``-`` (left open)."""
    name = display_name(path)
    raw = _stdin_bytes() if str(path) == STDIN else open(path, "rb")
    try:
        binary = _decompressed(raw, name)
        text = io.TextIOWrapper(binary, encoding=encoding, newline=newline)
        try:
            yield text
        except (gzip.BadGzipFile, EOFError) as e:
            raise TraceError(name, None, "file", f"not a readable gzip file ({e})") from None
        except _zstd_error() as e:
            raise TraceError(name, None, "file", f"not a readable zstd file ({e})") from None
        finally:
            if str(path) == STDIN:
                text.detach()
    finally:
        if str(path) != STDIN:
            raw.close()


def read_bytes(path: str | os.PathLike) -> bytes:
    """The input's bytes as stored (compressed or not); standard input for ``-``."""
    if str(path) == STDIN:
        return _stdin_bytes().read()
    with open(path, "rb") as f:
        return f.read()


def save_stdin(folder: str | os.PathLike, name: str = "stdin-trace.jsonl") -> Path:
    """Standard input's bytes saved as ``folder/name`` (atomically): for commands that hand a path on."""
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
    tmp.write_bytes(read_bytes(STDIN))
    os.replace(tmp, path)
    return path


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
        raise TraceError(name, None, "file", "is zstd-compressed; reading it needs the zstandard package "
                                             "(pip install -e \".[zstd]\", or decompress it first)") from None
    return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=False))


def _zstd_error() -> type[Exception]:
    try:
        import zstandard
    except ImportError:
        return _NeverRaised
    return zstandard.ZstdError


class _NeverRaised(Exception):
    """Stands for zstandard's error class where zstandard is not installed (no zstd stream was opened)."""
