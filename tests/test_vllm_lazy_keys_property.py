"""Kept-out blocks left unkeyed (``sim/cache/blocks/lazy_keys.py``, switch ``LAZY_KEYS``): the runs' request and
step tables and summaries equal the reference's, where every kept-out block is keyed (``out_of_map.py``); and at
each run's end the map with its kept-out blocks put back is the reference's, block for block, but for the
blocks left unkeyed, each of which the reference holds private under a key of its own.

The private-blocks property's generated traces and configs and its fixed cases, with floors: a replay that leaves
blocks unkeyed, and a timed run whose preemption keys and lists a running request's unkeyed blocks."""

from __future__ import annotations

from hypothesis import event
from test_vllm_private_blocks_property import (
    FIXED,
    PREEMPTED,
    PRIVATE_EVICTED,
    both_ways_or_skip,
    on_fixed_and_generated,
    reached,
    run_seen_at_end,
)
from vllm_bare_view import dressed_entries

from sim.cache.blocks import lazy_keys, manager, out_of_map


def keyed_map(pool) -> tuple[dict, dict]:
    """The pool's map with every keyed block kept out listed again, and the unkeyed blocks with their groups."""
    blocks_of, unkeyed = pool.blocks_of, {}
    keys, _, marks, groups = dressed_entries(pool)  # bare blocks dressed (``bare_runs.py``)
    for block, mark in enumerate(marks):
        key = (keys[block], groups[block])
        if key[0] == "Unkeyed":
            assert mark == out_of_map.KEPT_OUT, f"block {block} unkeyed, marked {mark}"
            unkeyed[block] = key[1]
        elif mark == out_of_map.KEPT_OUT:
            assert key not in blocks_of, f"a kept-out block's key {key} is in the map"
            blocks_of[key] = [block]
    return blocks_of, unkeyed


def run_with(trace_spec, config_spec, late: bool, monkeypatch, seen: dict) -> tuple:
    """The run with the switch set; ``seen`` gets its end's map and unkeyed blocks, and the blocks its
    preemptions keyed."""
    monkeypatch.setattr(lazy_keys, "LAZY_KEYS", late)
    keyed_at_preemption, stayed_out = [], []

    def counted(pool, running, block_keys):
        keyed_at_preemption.append(sum(len(noted[1]) for req in running for noted in req.kept_unkeyed))
        lazy_keys.list_late(pool, running, block_keys)
        stayed = [block for block, key in enumerate(pool.key_at) if isinstance(key, out_of_map.Unkeyed)]
        assert all(pool.private[block] == out_of_map.KEPT_OUT for block in stayed), "an unkeyed block listed"
        stayed_out.append(len(stayed))

    monkeypatch.setattr(manager, "list_late", counted)

    def ended(manager, watcher):
        seen[late] = (*keyed_map(manager.pool), sum(keyed_at_preemption), sum(stayed_out))

    return run_seen_at_end(trace_spec, config_spec, monkeypatch, ended)


def same_runs(trace_spec, config_spec, monkeypatch) -> tuple[dict, object]:
    """Both runs held equal, and their maps but for the unkeyed blocks; what each saw (True: the switch on)."""
    seen: dict = {}
    on = both_ways_or_skip(lambda on: run_with(trace_spec, config_spec, on, monkeypatch, seen))
    (late_map, unkeyed, *_), (reference, none, *_) = seen[True], seen[False]
    assert not none
    held_private = {blocks[0]: key[1] for key, blocks in reference.items() if blocks[0] in unkeyed}
    assert held_private == unkeyed, "an unkeyed block is not private in the reference"
    assert late_map == {key: blocks for key, blocks in reference.items() if blocks[0] not in unkeyed}
    return seen, on[1]


@on_fixed_and_generated(120, *FIXED)
def test_kept_out_blocks_left_unkeyed_leave_the_runs_as_the_reference(trace_spec, config_spec, monkeypatch):
    if (runs := reached(same_runs, trace_spec, config_spec, monkeypatch)) is None:
        return
    seen, result = runs
    event(f"unkeyed at the end: {bool(seen[True][1])}, keyed at a preemption: {bool(seen[True][2])}")
    event(f"left out at a preemption: {bool(seen[True][3])}")
    event(f"preempted {bool(result.requests['retractions'].sum())}, {trace_spec[0]} {config_spec[0]}")


# three short requests of their own, then eight long ones sharing a ref: a preemption while a finished request's
# private blocks are unkeyed (they stay out) and a running one's (keyed and listed)
STAYED_OUT = (
    ("mixed", [([("o", 150)], 20)] * 3 + [([("s", 0, 300), ("o", 199)], 200)] * 8),
    ("timed", "tiny", {}, 2000),
)


def test_the_fixed_cases_leave_blocks_unkeyed_and_key_them_at_a_preemption(monkeypatch):
    """A replay whose private blocks are unkeyed at its end; timed runs whose preemption keys some, and leaves a
    finished request's out."""
    seen, _ = same_runs(*PRIVATE_EVICTED, monkeypatch)
    assert seen[True][1], "no block left unkeyed"
    for case in (PREEMPTED, STAYED_OUT):
        seen, result = same_runs(*case, monkeypatch)
        assert result.requests["retractions"].sum() > 0
        assert seen[True][2] > 0, "no unkeyed block keyed at a preemption"
    assert seen[True][3] > 0, "no finished request's unkeyed block left out at a preemption"
