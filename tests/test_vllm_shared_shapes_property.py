"""Round 8's shortcuts in the block pool and the step helpers against the forms they replaced:

* ``cache_all`` puts the keys straight into the cache map (a key twice in one call: taken out again, then
  cached one at a time) and ``free_held`` frees unhashed blocks after one disjointness test: against the
  block-by-block pool (``tests/vllm_pool_reference.py``), many keys already cached, repeated and new;
* ``cache_blocks`` works out a kind's mask and its skipped keys once per (kind, block size, first, stop) and
  hands them to the kind's other groups: against the loop that works them out for every group (the code
  before Round 8, below), with nulls in some tables, groups at different counts, every retention form,
  block sizes 1, 2, 4 and 16."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.blocks import steps
from sim.cache.blocks.hit import Hit
from sim.cache.blocks.keys import BlockKeys, KeyChain
from sim.cache.blocks.layout import Layout
from sim.cache.blocks.pool import BlockPool
from sim.cache.blocks.request import BlockRequest
from sim.cache.blocks.retention import reachable_indices
from sim.cache.events import BlocksDiscarded, BlocksEvicted, BlocksSkipped, EventBus
from sim.cache.results import MatchResult
from sim.models import FULL, MAMBA
from sim.tokens import TokenSeq
from tests.vllm_pool_reference import ReferenceBlockPool

KINDS = ("swa", "swa", "swa", "full", "mamba", "mamba")


def _bus(log: list) -> EventBus:
    bus = EventBus()
    bus.subscribe(BlocksEvicted, lambda event: log.append(("evicted", list(event.keys))))
    bus.subscribe(BlocksDiscarded, lambda event: log.append(("discarded", event.group, list(event.blocks))))
    bus.subscribe(BlocksSkipped, lambda event: log.append(("skipped", event.groups, list(event.keys))))
    return bus


pool_operation = st.tuples(
    st.sampled_from(("get", "free", "cache_all", "touch")), st.integers(0, 9), st.integers(0, 5)
)


@settings(max_examples=150, deadline=None)
@given(st.lists(pool_operation, max_size=80), st.integers(8, 40))
def test_cache_all_and_free_held_match_the_block_by_block_pool(operations, num_blocks):
    told: dict[str, list] = {"fast": [], "reference": []}
    fast = BlockPool(num_blocks, KINDS, _bus(told["fast"]))
    reference = ReferenceBlockPool(num_blocks, KINDS, _bus(told["reference"]))
    held: list[tuple[int, int]] = []
    for name, amount, group in operations:
        mine = [block for block, owner in held if owner == group]
        if name == "get" and amount <= fast.num_free:
            got = fast.get_new_blocks(amount, group)
            assert got == reference.get_new_blocks(amount, group)
            held += [(block, group) for block in got]
        elif name == "free" and mine:  # held blocks, none null: some hashed, some not, shared or not
            chosen = mine[-(amount % len(mine) + 1) :]
            for block in chosen:
                held.remove((block, group))
            fast.free_held(list(reversed(chosen)), group)
            reference.free_blocks(list(reversed(chosen)), group)
        elif name == "cache_all" and mine:  # five keys a group: some cached already, some twice in a call
            chosen = mine[-(amount % 4 + 1) :]
            keys = [((position * amount // 3 + amount) % 5, group) for position in range(len(chosen))]
            fast.cache_all(chosen, keys)
            reference.cache_all(chosen, keys)
        elif name == "touch":
            table = sorted(block for block, (_, owner) in fast.key_of.items() if owner == group)[amount % 3 :: 2]
            fast.touch(list(table), group)
            reference.touch(list(table), group)
            held += [(block, group) for block in table]
        assert fast.queue() == reference.queue()
        assert fast.key_of == reference.key_of
        assert fast.blocks_of == reference.blocks_of
        assert (fast.held, fast.cached_free) == (reference.held, reference.cached_free)
    assert told["fast"] == told["reference"]


def _cache_blocks_per_group(layout, pool, keys, req, end, checkpoint, retention, mamba_keys, on_skip) -> None:
    """``cache_blocks`` before Round 8: each group's mask and skipped keys worked out for that group."""
    cacheable = end // layout.block_size * layout.block_size
    B = layout.uniform_block
    if cacheable // B <= min(req.num_cached):
        return
    keys_of = keys.chain(req.tokens, end // layout.hash_block, req.chain).keys
    boundaries = (req.replay_boundary, req.junction)
    exported = steps._exported_checkpoint(layout, req, end) if checkpoint else -1
    skipped: dict[int, list] = {}
    for group, (kind, B) in enumerate(zip(layout.group_kinds, layout.group_blocks, strict=True)):
        full_blocks = cacheable // B
        table, first = req.tables[group], req.num_cached[group]
        stop = min(full_blocks, len(table))
        indices = reachable_indices(
            kind, first, stop, retention, B, layout.swa_need, boundaries, layout.block_size
        )
        if kind == MAMBA and first <= exported < stop and exported not in indices:
            indices = sorted([*indices, exported])
        stride = layout.key_stride[kind]
        blocks, group_keys = steps._hashed_blocks(table, keys_of, stride, indices)
        new_keys = [(key, group) for key in group_keys]
        pool.cache_all(blocks, new_keys)
        if kind == MAMBA:
            mamba_keys.update(new_keys)
        if on_skip and kind != FULL and first < stop:
            skipped[group] = steps._unhashed_keys(table, keys_of, stride, first, stop, indices)
        req.num_cached[group] = max(first, full_blocks)
    if on_skip and skipped:
        steps.tell_skipped(on_skip, skipped)


def _request(pool: BlockPool, B: int, shapes: list[list[bool]], counts: list[int], prompt: int) -> BlockRequest:
    tables: list[list[int | None]] = []
    for group, live in enumerate(shapes):
        blocks = iter(pool.get_new_blocks(sum(live), group))
        tables.append([next(blocks) if held else None for held in live])
    return BlockRequest(
        "r",
        TokenSeq.of("x", 64 * B),
        prompt,
        MatchResult(0, 0, None),
        Hit(0, 0, min(prompt - 1, 3 * B)),
        KeyChain(),
        tables,
        [min(count, len(table)) for count, table in zip(counts, tables, strict=True)],
        [0] * len(KINDS),
        num_prompt_tokens=prompt,
    )


def _run_steps(call, layout, B, shapes, counts, prompt, ends, checkpoint, retention):
    log: list = []
    bus = _bus(log)
    pool = BlockPool(200, KINDS, bus)
    req = _request(pool, B, shapes, counts, prompt)
    mamba_keys: set = set()
    for end in ends:
        call(layout, pool, BlockKeys(B), req, end, checkpoint, retention, mamba_keys, bus.channel(BlocksSkipped))
    return pool.key_of, pool.blocks_of, req.num_cached, mamba_keys, log


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from((1, 2, 4, 16)),
    st.integers(1, 6),  # the window, in blocks
    st.sampled_from((None, 0, 1, 3)),  # the retention interval, in blocks (None and 0 as vLLM's)
    st.booleans(),  # internal checkpoints
    st.data(),
)
def test_cache_blocks_shared_shapes_match_the_per_group_loop(B, window, retention, checkpoint, data):
    layout = Layout(B, KINDS, 0, window * B, int(checkpoint))
    length = data.draw(st.integers(1, 16))
    held = st.lists(st.booleans(), min_size=length, max_size=length)
    # most tables fully held (the shared case), some with nulls; most counts alike, some apart
    shapes = [data.draw(st.one_of(st.just([True] * length), held)) for _ in KINDS]
    base = data.draw(st.integers(0, length))
    counts = [data.draw(st.one_of(st.just(base), st.integers(0, length))) for _ in KINDS]
    prompt = data.draw(st.integers(1, 20)) * B
    steps_in = data.draw(st.lists(st.integers(0, 4 * B), min_size=1, max_size=4))
    ends = [sum(steps_in[: i + 1]) + 1 for i in range(len(steps_in))]
    interval = retention * B if retention else retention
    args = (layout, B, shapes, counts, prompt, ends, checkpoint, interval)
    fast = _run_steps(steps.cache_blocks, *args)
    assert fast == _run_steps(_cache_blocks_per_group, *args)
