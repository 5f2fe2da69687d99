"""A follow-up's key chain seeded from its conversation's last chain (``SHARED_CHAINS``).

A block's key stands for its whole prefix (``keys.py``): the runs before the run its end lies in, where that
run starts, and the block's end in it. So two token sequences whose runs agree up to a point key every block
ending before that point alike. A conversation's follow-up quotes the previous turn's prompt and output,
run for run, so its admission would compute again, digest by digest and key by key, the keys the previous
turn's chain holds already: here they are copied from it (a list slice: the same int objects, which the cache
map's dicts then find by identity), and the chain goes on from its last copied key as ``_extend`` would.

The shelf keeps, per first two runs, the last chain admitted with them, with its tokens (immutable: a
request's tokens are its prompt and every output, so its chain, extended in place as its blocks fill, always
keys a prefix of them). A chain from another conversation that shares the first runs only seeds less; one
that shares none seeds nothing. The shelf holds at most ``SHELF_SIZE`` chains, the oldest dropped first.

Only under the reference's key shape and digests as run (``INT_KEYS``, ``ONE_DIGEST``): a seeded chain's
``before`` is left at ``ROOT``, which ``_extend`` reads only for a run whose digest is not known, and the
seed's run has its digest (the last copied key's high bits). Off: every chain computed from the root, the
reference (``tests/test_vllm_shared_chains_property.py``).
"""

from __future__ import annotations

from typing import cast

from sim.cache.blocks import keys
from sim.cache.blocks.keys import BlockKeys, KeyChain
from sim.tokens import TokenSeq

SHARED_CHAINS = True  # False: each admission's chain computed from the root, the reference
SHELF_SIZE = 1024  # chains kept (each holds its keys alive: a bound on what the shelf keeps from dying)

Runs = tuple[tuple[str, int, int], ...]


class ChainShelf:
    """The last chain admitted per first two runs, with its tokens."""

    def __init__(self, block_keys: BlockKeys) -> None:
        self.block_keys = block_keys
        self.chains: dict[tuple, tuple[TokenSeq, KeyChain]] = {}

    def chain(self, tokens: TokenSeq, num_keys: int, known: KeyChain | None) -> KeyChain:
        """``BlockKeys.chain``: a new chain seeded from the shelf's chain of the same first runs, and kept."""
        if known is not None or not (keys.INT_KEYS and keys.ONE_DIGEST):
            return self.block_keys.chain(tokens, num_keys, known)
        opening = tokens.runs[:2]
        shelved = self.chains.pop(opening, None)
        seed = None if shelved is None else seeded(tokens.runs, shelved, num_keys, self.block_keys.block_size)
        chain = self.block_keys.chain(tokens, num_keys, seed)
        if len(self.chains) >= SHELF_SIZE:
            del self.chains[next(iter(self.chains))]
        self.chains[opening] = (tokens, chain)
        return chain


def seeded(runs: Runs, shelved: tuple[TokenSeq, KeyChain], num_keys: int, size: int) -> KeyChain | None:
    """A chain of ``runs``'s first keys, copied from the shelved chain where both sequences key alike, placed
    where ``_extend`` stands after its last copied key; None where no whole block is shared."""
    tokens, donor = shelved
    num_shared = min(shared_len(runs, tokens.runs) // size, len(donor.keys), num_keys)
    if num_shared <= 0:
        return None
    chain = KeyChain()
    chain.keys = donor.keys[:num_shared]
    end = num_shared * size
    run, run_start = 0, 0
    while run_start + runs[run][2] < end:  # the run the last copied key ends in, as ``_extend`` walks
        run_start += runs[run][2]
        run += 1
    at = cast(int, chain.keys[-1]) - (end - run_start)  # a key's low 64 bits are its end in its run
    chain.run, chain.run_start, chain.at = run, run_start, at
    chain.digest = (at >> 64).to_bytes(16, "big")
    return chain


def shared_len(runs: Runs, other: Runs) -> int:
    """The tokens up to which both run lists key every block alike: their equal leading runs, then the
    first unequal pair's common length where the two start alike (same source and offset)."""
    start = 0
    for mine, theirs in zip(runs, other, strict=False):
        if mine != theirs:
            if mine[0] == theirs[0] and mine[1] == theirs[1]:
                return start + min(mine[2], theirs[2])
            return start
        start += mine[2]
    return start
