"""Marconi's rules move a request's locks one node down by sliding the lock set (``locks.slide``: the window
gains the new node and drops the nodes leaving it at the top) instead of releasing and rebuilding it, which
``marconi-vllm`` did at every 32-token chunk. Two managers run the same requests, interleaved, on pools of a
few dozen pages (so that walks split locked nodes and leaves are evicted under the running requests): one
slides (the default), one rebuilds (``slides_window_locks`` off: the reference). After every admission,
chunk and decode segment the caches, every node's locks and every request's lock set are compared, and
every slide is checked against the walk a rebuild makes from its new node.
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import pytest
from cache_helpers import hybrid_model, manager, seq
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decode_fast_path_property import Run, snapshot

from sim.cache import locks
from sim.cache.engines import marconi_vllm_chunks, marconi_vllm_run
from sim.cache.sizing import PoolSizes

MARCONI_PRESETS = ("marconi", "marconi-sglang", "marconi-vllm")


@st.composite
def tight_runs(draw):
    page = draw(st.sampled_from([1, 2, 16, 32]))
    knobs = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(1, 6)))
    # a window of whole pages makes the window's top node end exactly on it (the walk's stopping edge case)
    window = draw(st.one_of(st.integers(1, 90), st.integers(1, 5).map(lambda pages: pages * page)))
    model = hybrid_model(swa=True, mamba=draw(st.sampled_from([True, True, False])), window=window)
    tokens_per_pool = draw(st.integers(8, 60)) * 16
    sizes = PoolSizes(-(-tokens_per_pool // page), -(-tokens_per_pool // page), draw(st.integers(6, 16)))
    return draw(st.sampled_from(MARCONI_PRESETS)), model, knobs, sizes


def workloads(max_size: int):
    """Requests as (shared-prefix family, shared length, branch, own length, output length, decode steps to
    run before the next request arrives: the running requests overlap). Requests of one family and branch
    (branch 3: none) share their own part up to the shorter one's end: a new request splits a running one's
    nodes inside its window."""
    request = st.tuples(
        st.integers(0, 2),
        st.sampled_from([0, 48, 100]),
        st.integers(0, 3),
        st.integers(1, 200),
        st.integers(2, 120),
        st.integers(0, 60),
    )
    return st.lists(request, min_size=2, max_size=max_size)


def lock_state(run: Run) -> tuple:
    """Every node's locks and every running request's lock set, by position."""
    nodes = tuple(
        (n.start, n.end, n.full_lock, tuple(sorted(n.swa_holders)), n.state_lock)
        for n in run.manager.tree.nodes()
    )
    held = tuple(
        (
            rid,
            r.locks.node.end,
            tuple((n.start, n.end) for n in r.locks.swa_nodes),
            None if r.locks.state_node is None else r.locks.state_node.end,
        )
        for rid, r in sorted(run.manager.requests.items())
    )
    return nodes, held, run.manager.tree.num_unlocked_tokens


def rebuilt_window(tree, node, window: int) -> list:
    """The nodes ``_lock_window_and_state`` would lock from ``node`` (the rebuild's walk)."""
    found, covered, current = [], 0, node
    while current is not tree.root and covered < window:
        if current.swa_pages is not None:
            found.append(current)
            covered += current.end - current.start
        current = current.parent
    return found


@contextmanager
def checked_slides():
    """Every slide compared with the rebuild's walk from its new node; yields the count of slides."""
    count = [0]
    real_slide, real_direct = locks.slide, marconi_vllm_chunks.slide_unreleased

    def check(tree, held, node, window, has_swa):
        expected = rebuilt_window(tree, node, window) if has_swa else []
        assert held.swa_nodes == expected, "the slid window is not the rebuilt one"
        assert held.swa_covered == sum(n.end - n.start for n in expected)
        assert all(held.holder in n.swa_holders for n in expected)
        count[0] += 1

    def slide(tree, held, node, window, has_swa, has_mamba):
        real_slide(tree, held, node, window, has_swa, has_mamba)
        check(tree, held, node, window, has_swa)

    # vLLM+'s direct commit slides so, and its page commit (a chunk run's, or a timed page chunk's)
    def direct_slide(held, node, tree, window, has_swa, has_mamba):
        real_direct(held, node, tree, window, has_swa, has_mamba)
        check(tree, held, node, window, has_swa)

    with (
        mock.patch.object(locks, "slide", slide),
        mock.patch.object(marconi_vllm_chunks, "slide_unreleased", direct_slide),
        mock.patch.object(marconi_vllm_run, "slide_unreleased", direct_slide),
    ):
        yield count


def _drive(runs: tuple[Run, Run], requests) -> None:
    slid, rebuilt = runs
    for index, (family, shared_len, branch, own_len, output_len, steps) in enumerate(requests):
        rid = f"r{index}"
        own = rid if branch == 3 else f"own{family}-{branch}"
        tokens = seq((f"shared{family}", shared_len), (own, own_len), (f"out-{rid}", output_len))
        for run in runs:
            run.start(rid, tokens, shared_len + own_len, output_len)
        assert lock_state(slid) == lock_state(rebuilt), f"after admitting {rid}"
        for other in sorted(slid.remaining)[:2]:
            for run in runs:
                run.decode(other, steps)
            assert lock_state(slid) == lock_state(rebuilt), f"after decoding {other}"
        assert snapshot(slid.manager) == snapshot(rebuilt.manager), f"after {rid}"
        slid.manager.check_integrity()
    for rid in sorted(slid.remaining):
        for run in runs:
            run.decode(rid, 1 << 20)
    assert snapshot(slid.manager) == snapshot(rebuilt.manager)
    slid.manager.check_integrity()


_NUM_SLIDES: list[int] = []


@pytest.mark.interpreted
@settings(max_examples=150, deadline=None, derandomize=True)
@given(tight_runs(), workloads(8))
def test_a_slid_lock_set_is_the_rebuilt_one(configuration, requests):
    preset, model, knobs, sizes = configuration
    slid, rebuilt = (Run(preset, model, knobs, fast=True, sizes=sizes) for _ in range(2))
    assert slid.manager.rules.slides_window_locks
    rebuilt.manager.rules.slides_window_locks = False
    with checked_slides() as count:
        _drive((slid, rebuilt), requests)
    _NUM_SLIDES.append(count[0])


# the property runs once, inside test_the_property_slides (which also asserts what its examples reach):
# collected on its own too, it ran its examples twice
test_a_slid_lock_set_is_the_rebuilt_one.__test__ = False


@pytest.mark.interpreted
def test_the_property_slides():
    """The runs above do slide (else the property compares nothing)."""
    _NUM_SLIDES.clear()
    test_a_slid_lock_set_is_the_rebuilt_one()
    assert sum(_NUM_SLIDES) > 500


@pytest.mark.interpreted
def test_marconi_vllm_slides_at_every_chunk():
    """A 640-token prompt at 32-token chunks: every chunk's relock after the first is a slide."""
    run = Run(
        "marconi-vllm",
        hybrid_model(swa=True, mamba=True, window=100),
        dict(page_size=32, chunked_prefill_size=64),
        fast=True,
    )
    with checked_slides() as count:
        run.start("r0", seq(("p", 640), ("out", 8)), 640, 8)
    assert count[0] >= 640 // 32 - 1
    run.manager.check_integrity()


@pytest.mark.parametrize("slides", [True, False])
def test_a_split_inside_the_window_makes_the_next_relock_a_rebuild(slides):
    """A split of a window node (not its top) appends the upper half out of walk order: the next relock
    one node down must rebuild (a slide over that list would drop the upper half)."""
    m = manager(
        "marconi", hybrid_model(swa=True, mamba=False, window=150), page_size=32, chunked_prefill_size=1024
    )
    m.rules.slides_window_locks = slides
    m.admit("a", seq(("a", 640), ("out", 4)), 640)
    m.prepare_prefill("a", 640, 0)
    m.complete_prefill("a", 640)
    req = m.requests["a"]
    m.insert(req, 320)  # [0, 160) and a leaf of one window, [160, 320)
    m.insert(req, 416)  # [320, 416) below it: a relock one node down
    near = req.locks.node
    assert [(n.start, n.end) for n in req.locks.swa_nodes] == [(320, 416), (160, 320)]
    m.tree.split(near, 32)  # as another request's walk splits it: [320, 352) over [352, 416)
    assert not req.locks.in_walk_order
    m.insert(req, 448)
    assert [(n.start, n.end) for n in req.locks.swa_nodes] == [(416, 448), (352, 416), (320, 352), (160, 320)]
    m.check_integrity()
