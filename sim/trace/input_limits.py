"""How much an input may hold, checked while it is read so that a bomb is refused early, not after it has
filled the memory: the bytes a compressed input may decompress to (in all, and against the compressed
bytes read so far), the bytes standard input may bring, and the length of one line.

The ratio: honest traces compress 10-25 times with gzip -9 and up to about 100 times with zstd --ultra -22
(a million requests with sequential ids and one shared prompt: 104; docs/reliability.md), while gzip
tops out near 1,030 and a zstd bomb goes far beyond. 400 leaves honest traces four times the room and
refuses a gzip bomb after about 13 MB. The first ``RATIO_FREE_BYTES`` are never refused for their ratio
(a small file's header and repeated lines compress unusually well). Each limit can be raised through its
environment variable; the error names it.
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO, Protocol

MAX_RATIO_ENV, MAX_INPUT_ENV = "HYBRIDCACHE_MAX_INPUT_RATIO", "HYBRIDCACHE_MAX_INPUT_GB"
MAX_RATIO = 400
RATIO_FREE_BYTES = 8 << 20
# a decompressed input or standard input: 4 GiB of JSONL is about 20 million requests, more than a
# simulation holds in memory
MAX_INPUT_BYTES = 4 << 30
# one request a line: a Mooncake line is a few kB, an openai-jsonl line with a 1M-token context 4 MB
MAX_LINE_BYTES = 64 << 20


class ByteStream(Protocol):
    """What the readers here read from: a file, standard input, or a decompressor's output."""

    def read(self, size: int = -1, /) -> bytes: ...


class InputTooLarge(Exception):
    """Raised by a capped stream; the reader turns it into an error naming the input."""


def max_ratio() -> float:
    return float(os.environ.get(MAX_RATIO_ENV, MAX_RATIO))


def max_input_bytes() -> int:
    gigabytes = os.environ.get(MAX_INPUT_ENV)
    return MAX_INPUT_BYTES if gigabytes is None else int(float(gigabytes) * (1 << 30))


# the compressed bytes a decompressor gets at a time: what it holds unread is at most this, so the ratio
# is measured against what it has really consumed, within 400 x 8 kB = 3.2 MB
COMPRESSED_READ_BYTES = 8 << 10


class CountingReader(io.RawIOBase):
    """The compressed bytes as they are read, counted, in short reads."""

    def __init__(self, raw: ByteStream):
        self.raw, self.count = raw, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.raw.read(min(len(buffer), COMPRESSED_READ_BYTES))
        buffer[: len(data)] = data
        self.count += len(data)
        return len(data)


class CappedReader(io.RawIOBase):
    """The decompressed (or standard input's) bytes, refused past ``max_input_bytes()`` and, when
    ``compressed`` counts what they came from, past ``max_ratio()`` times that."""

    def __init__(self, stream: ByteStream, compressed: CountingReader | None):
        self.stream, self.compressed, self.count = stream, compressed, 0
        self.limit, self.ratio = max_input_bytes(), max_ratio()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        self.count += len(data)
        self._check()
        return len(data)

    def _check(self) -> None:
        if self.count > self.limit:
            raise InputTooLarge(
                f"holds over {_size(self.limit)} (decompressed); refused as too large for a simulation "
                f"(raise {MAX_INPUT_ENV} if it is meant)"
            )
        if self.compressed is None or self.count <= RATIO_FREE_BYTES:
            return
        if self.count > self.ratio * self.compressed.count:
            raise InputTooLarge(
                f"decompresses to over {self.ratio:g} times its size ({_size(self.count)} from "
                f"{_size(self.compressed.count)} so far): a decompression bomb? (raise {MAX_RATIO_ENV} "
                "if it is meant)"
            )


def capped(stream: ByteStream, compressed: CountingReader | None) -> BinaryIO:
    return io.BufferedReader(CappedReader(stream, compressed), buffer_size=1 << 16)


def _size(num_bytes: int) -> str:
    return f"{num_bytes / (1 << 30):.3g} GiB" if num_bytes >= 1 << 30 else f"{num_bytes / (1 << 20):.3g} MiB"
