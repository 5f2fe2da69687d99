"""Block identity: vLLM's chained block hash.

vLLM hashes block ``i`` as ``sha256(h_{i-1}, tokens of block i)`` (``kv_cache_utils.py:get_request_block_hasher``),
so a key stands for the whole prefix up to the block's end. Here a prefix is told by its token runs, which
are canonical (equal tokens, equal runs: ``TokenSeq`` merges contiguous runs), so the prefix ``[0, e)`` is
exactly: the whole runs before the run holding token ``e - 1``, where that run starts (its source and
offset), and how much of it the prefix takes. A block's key is the 128-bit BLAKE2b digest of the first two
(chained run by run: one digest per run, not per block) with the third: equal prefixes give equal keys, and
unequal ones collide with probability 2^-128 per pair, as vLLM's do with its digest. Keys live only as long
as the blocks and requests that hold them (a table of every block ever seen would grow with the trace).

A key is one int, ``digest << 64 | end`` (``INT_KEYS``; off, the reference: the digest's 16 bytes, then the
end as 8 bytes little-endian): the same equality. An int's hash is its value modulo 2^61 - 1, so the blocks of
a run, whose ends step by the block size, hash to neighbouring values and sit in neighbouring slots of the
cache map's dicts, where bytes hash to random ones: a prefill step's hundreds of new keys, and an eviction's
hundreds of old ones, touch a few stretches of a dict's memory rather than missing the cache a key.

One digest a run (``ONE_DIGEST``): a run's digest takes, for the runs before it, the key of the previous run's
end (that run's digest with its length: it stands for every token before this run), so crossing a run costs
the digest its own blocks need anyway, not a second one of the runs before it. Off, the reference: the runs
before chained apart (a digest of them, then one with where the run starts). The same equality either way.
"""

from __future__ import annotations

from hashlib import blake2b
from itertools import repeat
from operator import add
from struct import Struct

from sim.tokens import TokenSeq

BlockKey = object  # a prefix's identity (an int; the reference's bytes): equal keys mean equal prefixes
ROOT = b""  # the digest of no runs (vLLM's NONE_HASH)
INT_KEYS = True  # False: the reference's keys, bytes (tests/test_vllm_keys.py holds the two alike)
ONE_DIGEST = True  # False: the reference, two digests a run (tests/test_vllm_key_digests_property.py)
# the reference's key: the 16-byte digest, then where in its run the block ends as 8 bytes little-endian
# (packed in one C call: a partial with keywords cost ~15x more)
pack_key = Struct("<16sQ").pack


def block_key(digest: bytes, end: int) -> BlockKey:
    """The key of the block ending ``end`` tokens into the run whose digest (with where it starts) is
    ``digest``."""
    return int.from_bytes(digest, "big") << 64 | end if INT_KEYS else pack_key(digest, end)


def _digest(data: bytes) -> bytes:
    return blake2b(data, digest_size=16).digest()


class KeyChain:
    """The keys of one sequence's whole blocks, oldest first (``keys``), extended as its blocks fill, and
    where the walk over its runs stands: the run the next block ends in, that run's first position, what
    stands for the runs before it (``ONE_DIGEST``: the previous run's end's key as bytes; off, their digest),
    and this run's digest and what its keys are made from (None until needed: an int, the run's key for an
    end of 0; the reference's bytes, the digest)."""

    def __init__(self) -> None:
        self.keys: list[BlockKey] = []
        self.run = 0
        self.run_start = 0
        self.before = ROOT
        self.digest: bytes | None = None
        self.at: int | bytes | None = None


class BlockKeys:
    def __init__(self, block_size: int):
        self.block_size = block_size

    def chain(self, tokens: TokenSeq, num_blocks: int, known: KeyChain | None = None) -> KeyChain:
        """Keys of blocks ``0 .. num_blocks - 1`` of ``tokens`` (whole blocks only): ``known`` (a chain of
        the same tokens) extended in place, or a new chain."""
        chain = known if known is not None else KeyChain()
        stop = min(num_blocks, len(tokens) // self.block_size)
        if len(chain.keys) < stop:
            if ONE_DIGEST:
                _extend(chain, tokens.runs, self.block_size, stop)
            else:
                _extend_reference(chain, tokens.runs, self.block_size, stop)
        return chain


def _extend(chain: KeyChain, runs: tuple[tuple[str, int, int], ...], size: int, stop: int) -> None:
    """``chain``'s keys up to block ``stop``, one digest a run (the runs before it told by the key of the
    previous run's end)."""
    keys, index = chain.keys, len(chain.keys)
    run, run_start, before, digest, at = chain.run, chain.run_start, chain.before, chain.digest, chain.at
    while index < stop:
        end = (index + 1) * size
        while run_start + runs[run][2] < end:  # the block ends past this run: on to the next
            if digest is None:
                digest = _digest(before + repr(runs[run][:2]).encode())
            before = pack_key(digest, runs[run][2])  # the reference key of the run's end
            run_start += runs[run][2]
            run, digest, at = run + 1, None, None
        if at is None:
            digest = _digest(before + repr(runs[run][:2]).encode())
            at = _run_at(digest)
        last = min(stop, (run_start + runs[run][2]) // size)  # the blocks ending inside this run
        keys += _keys(at, range(end - run_start, (last + 1) * size - run_start, size))
        index = last
    chain.run, chain.run_start, chain.before, chain.digest, chain.at = run, run_start, before, digest, at


def _extend_reference(chain: KeyChain, runs: tuple[tuple[str, int, int], ...], size: int, stop: int) -> None:
    """The reference: the runs before a run digested apart, a second digest for where the run starts."""
    keys, index = chain.keys, len(chain.keys)
    run, run_start, before, at = chain.run, chain.run_start, chain.before, chain.at
    while index < stop:
        end = (index + 1) * size
        while run_start + runs[run][2] < end:  # the block ends past this run: on to the next
            before = _digest(before + repr(runs[run]).encode())
            run_start += runs[run][2]
            run, at = run + 1, None
        if at is None:
            at = _run_at(_digest(before + repr(runs[run][:2]).encode()))
        last = min(stop, (run_start + runs[run][2]) // size)  # the blocks ending inside this run
        keys += _keys(at, range(end - run_start, (last + 1) * size - run_start, size))
        index = last
    chain.run, chain.run_start, chain.before, chain.at = run, run_start, before, at


def _run_at(digest: bytes) -> int | bytes:
    """What a run's keys are made from: the key of its end 0, or the reference's digest."""
    return int.from_bytes(digest, "big") << 64 if INT_KEYS else digest


def _keys(at: int | bytes, ends: range) -> list[BlockKey]:
    """The keys of the blocks ending at ``ends`` in a run (``at``: ``_run_at``), one C pass."""
    if isinstance(at, int):
        # ``at`` has 64 zero low bits: + is | here; ``add`` over ``repeat`` is a plain C call a key, where the
        # bound ``at.__add__`` goes through its method wrapper (``add``: ~0.72 of its time, pure Python 3.11)
        return list(map(add, repeat(at), ends))
    return list(map(pack_key, repeat(at), ends))
