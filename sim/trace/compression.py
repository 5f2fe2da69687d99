"""Compression recognised by its magic bytes, not by the file name: gzip, and zstd through the optional
``zstandard`` package (without it a zstd input is refused with the instruction to install it). What a
decompressor reads is counted and what it yields capped (``sim/trace/input_limits.py``)."""

from __future__ import annotations

import gzip
import io
from typing import BinaryIO, cast

from sim.trace.checks import TraceError
from sim.trace.input_limits import ByteStream, CountingReader, capped

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def decompressed(raw: BinaryIO, name: str, is_stdin: bool) -> BinaryIO:
    """``raw``'s bytes, decompressed when it is gzip or zstd; standard input's capped either way."""
    # cast: a stream without peek is an in-memory one (BytesIO: standard input read whole, or a replaced
    # sys.stdin's buffer), with the readinto a BufferedReader reads through (BinaryIO does not declare it)
    buffered = raw if hasattr(raw, "peek") else io.BufferedReader(cast(io.BytesIO, raw))
    head = buffered.peek(4)[:4]
    if head.startswith(_GZIP_MAGIC):
        compressed = CountingReader(buffered)
        return capped(gzip.GzipFile(fileobj=compressed, mode="rb"), compressed)
    if head == _ZSTD_MAGIC:
        compressed = CountingReader(buffered)
        return capped(_zstd_reader(compressed, name), compressed)
    return capped(buffered, None) if is_stdin else buffered


def _zstd_reader(raw: CountingReader, name: str) -> ByteStream:
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
    # zstandard's stub asks for IO[bytes]; its stream_reader reads any object with a read(size) method
    return zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)  # type: ignore[arg-type]


def zstd_error() -> type[Exception]:
    try:
        import zstandard
    except ImportError:
        return _NeverRaised
    return zstandard.ZstdError


class _NeverRaised(Exception):
    """Stands for zstandard's error class where zstandard is not installed (no zstd stream was opened)."""
