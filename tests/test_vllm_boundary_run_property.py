"""vLLM's boundary run (``boundary_run.BoundaryRun``: a request's steady decode boundaries taken in one loop, the
residues and the retention mask worked out once, a step's frees of every SWA or Mamba group in one
``free_each``) leaves the block manager exactly as the per-boundary steps (``_boundary_step``, the switch
``boundary_runs`` off) do, as a property over the decode fast path's layouts, windows, retention intervals,
async scheduling and pools (``test_vllm_decode_fast_path_property``), with pages of 16 to 64 tokens, and with and
without a listener for discarded blocks (with one, ``free_each`` frees block by block; without, onto the head in
one ``extend``). After every decode segment the two managers are compared whole (tables, lengths, hashed and
retired counts, keys, the free queue in order, ref counts, the map, counters, every event in order).

Each fixed example pins that the run did what it claims there (counted by watching ``BoundaryRun``): runs taken
and blocks hashed in them, frees onto the head in one ``extend``, hashed blocks freed through ``free_one``, a
run ended by a refusal, the window's general rule."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sim.cache.blocks.boundary_run import BoundaryRun
from sim.cache.blocks.pool import BlockPool
from sim.cache.events import BlocksDiscarded
from sim.models import get_model
from sim.tokens import TokenSeq
from tests.test_vllm_decode_fast_path_property import Run, conformance_model, snapshot

INKLING = get_model("inkling")


class ListenedRun(Run):
    """A ``Run`` deciding whether a listener hears of discarded blocks, its ``boundary_runs`` switch set."""

    def __init__(self, model, knobs: dict, num_blocks: int, runs: bool, discards: bool):
        super().__init__(model, knobs, num_blocks, fast=True)
        self.manager.boundary_runs = runs
        if not discards:  # no one hears of discards (as in replay): the run's frees may go in one ``extend``
            heard = self.manager.events.channel(BlocksDiscarded)
            heard.remove(self.events.append)
            assert not heard


@st.composite
def configurations(draw):
    """The decode fast path's layouts with pages of 16 to 64 tokens (the conformance models) or 16 (the named)."""
    window = draw(st.integers(5, 200))
    if draw(st.booleans()):
        components = draw(st.sampled_from(["full+swa", "full+mamba", "full+swa+mamba"]))
        page = draw(st.sampled_from([16, 32, 48, 64]))  # vLLM refuses pages off FlashAttention's 16
        model = conformance_model(components, page, window, 1, 1)
    else:
        model, page = (
            draw(st.sampled_from([INKLING, get_model("gemma-4-26b-a4b")])).replace(window=window),
            16,
        )
    knobs = dict(
        page_size=page,
        async_scheduling=draw(st.booleans()),
        junction=draw(st.booleans()),
        prefill_checkpoints=draw(st.booleans()),
        chunked_prefill_size=page * draw(st.integers(2, 12)),
        retention_interval=draw(st.sampled_from([None, 0, page, 3 * page])),
    )
    return model, knobs, draw(st.integers(40, 900)), draw(st.booleans())


workloads = st.tuples(
    st.lists(
        st.tuples(st.integers(0, 300), st.integers(1, 300), st.integers(2, 900)), min_size=1, max_size=4
    ),
    st.lists(st.integers(1, 400), min_size=3, max_size=30),
)


def run_both(configuration, workload) -> Counter | None:
    """Both managers through the workload, compared after every step of it; what the run did, counted."""
    model, knobs, num_blocks, discards = configuration
    requests, segments = workload
    try:
        runs = ListenedRun(model, knobs, num_blocks, runs=True, discards=discards)
    except ValueError:  # the start-up check: the pool cannot hold one max_model_len request
        return None
    steps = ListenedRun(model, knobs, num_blocks, runs=False, discards=discards)
    counts: Counter = Counter()
    with watching(counts):
        for index, (shared_len, own_len, output_len) in enumerate(requests):
            tokens = TokenSeq.of("r:shared", shared_len) + TokenSeq.of(f"r:r{index}", own_len)
            tokens += TokenSeq.of(f"o:r{index}", output_len)
            for run in (runs, steps):
                run.start(f"r{index}", tokens, shared_len + own_len, output_len)
            assert snapshot(runs) == snapshot(steps), f"after admitting r{index}"
        for position, num_steps in enumerate(segments):
            if not runs.remaining:
                break
            rid = sorted(runs.remaining)[position % len(runs.remaining)]
            for run in (runs, steps):
                run.decode(rid, num_steps)
            assert runs.iteration == steps.iteration and runs.remaining == steps.remaining
            assert snapshot(runs) == snapshot(steps), f"after {num_steps} decode steps of {rid}"
    runs.manager.check_integrity()
    return counts


def watching(counts: Counter):
    """Counts the run's takes, its hashes, its refusals, and how ``free_each`` and the window's rule went (only
    the run calls them: the per-boundary steps free through ``free_one``)."""
    take, hash_block, free_each = BoundaryRun.take, BoundaryRun.hash_block, BlockPool.free_each
    one_by_one = BoundaryRun.release_windows_one_by_one

    def counted_take(self, end, last):
        taken = take(self, end, last)
        counts["runs"] += 1
        counts["refused"] += taken <= last
        return taken

    def counted_hash(self, index):
        counts["hashed"] += 1
        return hash_block(self, index)

    def counted_free_each(self, blocks, groups):
        hashed = list(map(self.key_of.__contains__, blocks))
        if all(hashed) and self.ref_cnt.keys().isdisjoint(blocks):
            counts["free_each tail"] += bool(blocks)
        elif any(hashed):
            counts["free_each mixed or shared"] += 1
        else:
            counts["free_each heard" if self._discarded else "free_each head"] += 1
        return free_each(self, blocks, groups)

    def counted_one_by_one(self, top, processed):
        counts["window one by one"] += 1
        return one_by_one(self, top, processed)

    stack = ExitStack()
    stack.enter_context(mock.patch.object(BoundaryRun, "take", counted_take))
    stack.enter_context(mock.patch.object(BoundaryRun, "hash_block", counted_hash))
    stack.enter_context(mock.patch.object(BlockPool, "free_each", counted_free_each))
    stack.enter_context(mock.patch.object(BoundaryRun, "release_windows_one_by_one", counted_one_by_one))
    return stack


HYBRID = conformance_model("full+swa+mamba", 16, 40, 1, 1)
ROOMY = (
    HYBRID,
    dict(
        page_size=16,
        async_scheduling=True,
        junction=False,
        prefill_checkpoints=False,
        chunked_prefill_size=64,
        retention_interval=0,
    ),
    900,
    False,
)
TIGHT = (
    HYBRID,
    dict(
        page_size=16,
        async_scheduling=False,
        junction=True,
        prefill_checkpoints=False,
        chunked_prefill_size=64,
        retention_interval=None,
    ),
    70,
    True,
)
LONG = ([(100, 200, 800), (50, 300, 700)], [400, 400, 400, 400])


def paged(page: int, window: int, async_scheduling: bool, retention) -> tuple:
    knobs = dict(ROOMY[1], page_size=page, chunked_prefill_size=4 * page, async_scheduling=async_scheduling)
    model = conformance_model("full+swa+mamba", page, window, 1, 1)
    return (model, dict(knobs, retention_interval=retention), 900 * 16 // page, False)  # 14,400 tokens


PAGES_OF_32, PAGES_OF_64 = paged(32, 70, False, 32), paged(64, 150, True, None)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@example(ROOMY, LONG)
@example(TIGHT, LONG)
@example(PAGES_OF_32, LONG)
@example(PAGES_OF_64, LONG)
@given(configurations(), workloads)
def test_boundary_run_leaves_the_manager_as_the_per_boundary_steps(configuration, workload):
    run_both(configuration, workload)


def test_a_roomy_run_hashes_and_frees_onto_the_head_in_one_extend():
    counts = run_both(ROOMY, LONG)
    assert counts["runs"] >= 4 and counts["hashed"] >= 80, counts
    assert counts["free_each head"] >= 80 and counts["free_each tail"] >= 2, counts


def test_a_tight_run_is_refused_and_frees_block_by_block_where_discards_are_heard():
    counts = run_both(TIGHT, LONG)
    assert counts["refused"] >= 1 and counts["free_each heard"] >= 10, counts


def test_runs_on_pages_of_32_and_64_tokens():
    small, large = run_both(PAGES_OF_32, LONG), run_both(PAGES_OF_64, LONG)
    assert small["hashed"] >= 40 and small["free_each tail"] >= 80, (
        small
    )  # every block hashed: all to the tail
    assert large["hashed"] >= 20 and large["free_each head"] >= 40, large
