"""Marconi keeps a cached node's SWA until it deletes the node (no tombstones), so SGLang's budget, as Marconi
and SGLang+ answer it on SGLang's loop, counts as evictable SWA only the pages of nodes no running request's
path locks. Counting SGLang's way (the tree's SWA less the windows' locks) admitted chunks whose SWA pages
Marconi's eviction could not free: the run stopped with "the budget admitted a chunk the pools refuse"."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sim.cache.engines.marconi as marconi_rules
from sim.cache.engines.sglang_locked import swa_pages_on_locked_paths
from sim.run.simulate import SimConfig, simulate
from sim.trace import Request, Segment, Trace

CHECKS = {"calls": 0, "below_window_count": 0}

# the smallest run hypothesis found refused (r1's last chunk: "SWA pool: need 43, at most 42 obtainable")
REFUSED_SHAPES = [("r0", 0.0, 2, 1), ("r2", 0.0, 304, 1), ("r3", 0.0, 392, 930), ("r4", 0.0, 392, 1061)]
REFUSED_SHAPES += [("r5", 0.0, 392, 1056), ("r6", 0.0, 392, 1056), ("r1", 0.249, 177, 1)]


def _trace(shapes, prefix_len: int) -> Trace:
    return Trace(
        Request(id=rid, arrival=at, output_len=out, prompt=[Segment(ref="p0", len=prefix_len), Segment(ref=rid, len=own)])
        for rid, at, out, own in shapes
    )


def _config(policy: str, page: int, chunk: int, running: int, pool_tokens: int) -> SimConfig:
    knobs = dict(page_size=page, chunked_prefill_size=chunk, max_running_requests=running, mixed_chunk=False)
    return SimConfig(
        policy=policy, model="inkling", knobs=dict(knobs, overlap=False), pool_tokens=pool_tokens,
        mamba_states=48, mode="timed", bounds=False,
    )  # fmt: skip


def test_the_run_refused_a_chunk_runs_to_the_end():
    result = simulate(_trace(REFUSED_SHAPES, 760), _config("marconi-sglang", 1, 128, 6, 12000))
    produced = dict(zip(result.requests["id"], result.requests["output_tokens"], strict=True))
    assert produced == {rid: output_len for rid, _, output_len, _ in REFUSED_SHAPES}


def checked_swa_pages(manager, candidate) -> int:
    """The count the budget uses, held to every holder's whole path (``path_from_root``), node by node."""
    holders = [*manager.requests.values(), *([candidate] if candidate is not None else [])]
    nodes = {node.id: node for h in holders for node in h.last_node.path_from_root()}
    reference = sum(len(node.swa_pages) for node in nodes.values() if node.swa_pages is not None)
    counted = swa_pages_on_locked_paths(manager, candidate)
    assert counted == reference, (counted, reference)
    windows = {node.id: node for h in holders for node in h.locks.swa_nodes if node.swa_pages is not None}
    CHECKS["calls"] += 1
    CHECKS["below_window_count"] += reference > sum(len(node.swa_pages) for node in windows.values())
    return counted


@st.composite
def bursts(draw):
    """A wave of requests on one shared prefix, then a wave that finds it cached while the first still runs,
    in tight pools (the shape of the refused run)."""
    first = draw(st.lists(st.tuples(st.integers(300, 1200), st.integers(2, 400)), min_size=2, max_size=6))
    second = draw(st.lists(st.tuples(st.integers(1, 300), st.integers(2, 200), st.integers(50, 800)), max_size=3))
    requests = [(f"a{i}", 0.0, out, own) for i, (own, out) in enumerate(first)]
    requests += [(f"b{i}", at / 1000, out, own) for i, (own, out, at) in enumerate(second)]
    page = draw(st.sampled_from([1, 64]))
    chunk = max(page, 64) * draw(st.integers(2, 8))
    policy = draw(st.sampled_from(["marconi", "marconi-sglang"]))
    config = _config(policy, page, chunk, draw(st.integers(2, 6)), draw(st.sampled_from([3000, 6000, 12000])))
    return sorted(requests, key=lambda r: r[1]), draw(st.integers(200, 1500)), config


def _refused_burst(policy: str, page: int, chunk: int, running: int, pool_tokens: int):
    return sorted(REFUSED_SHAPES, key=lambda r: r[1]), 760, _config(policy, page, chunk, running, pool_tokens)


# the floor below rests on these fixed examples, not on what the generated ones reach: they ask the budget with
# paths past the windows (1,227 and 673 such calls)
@pytest.mark.interpreted  # patches a module global the compiled core binds
@settings(max_examples=40, deadline=None, derandomize=True)
@given(bursts())
@example(_refused_burst("marconi-sglang", 1, 128, 6, 12000))
@example(_refused_burst("marconi-sglang", 64, 128, 2, 3000))
@example(_refused_burst("marconi", 64, 256, 4, 6000))
def test_every_budgeted_chunk_is_allocated(burst):
    shapes, prefix_len, config = burst
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(marconi_rules, "swa_pages_on_locked_paths", checked_swa_pages)
        result = simulate(_trace(shapes, prefix_len), config)
    assert sorted(result.requests["id"]) == sorted(rid for rid, *_ in shapes)


@pytest.mark.interpreted
def test_the_bursts_ask_with_swa_locked_past_the_windows():
    """The property is exercised: the budget was asked where the paths hold more SWA than the windows lock."""
    test_every_budgeted_chunk_is_allocated()
    assert CHECKS["below_window_count"] > 1000, CHECKS


test_every_budgeted_chunk_is_allocated.__test__ = False  # runs once, inside the test above
