"""The decode fast path (``advance_decode``: runs of plain steps taken in one go) leaves every cache exactly
as step-by-step decoding does, as a property over windows, page sizes, track intervals, SWA eviction intervals,
both SWA free triggers and iteration phases that are not multiples of each other.

Each example runs the same requests on two managers: one decodes through ``advance_decode``, the other calls
``prepare_decode`` + ``complete_decode`` once per step. Requests run together, each decoding in short
segments at its own engine iterations; after every segment the two caches are compared whole (each request's
lengths, frontier, pages, states and checkpoints; the tree's nodes; the pools' free ids; evictions), so a fast
path that misplaces one SWA free, page or checkpoint by a single step is caught at that step.
"""
from __future__ import annotations

from cache_helpers import hybrid_model, seq
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.interface import CacheModel
from sim.cache.manager import CacheManager
from sim.cache.results import Refusal
from sim.cache.sizing import PoolSizes
from sim.engines.registry import PRESETS, make_manager, make_policy
from sim.tokens import TokenSeq

# every preset the radix manager runs (vLLM's block manager has its own fast-path tests: test_vllm_manager.py)
RADIX_PRESETS = sorted(name for name, policy in PRESETS.items() if policy.engine != "vllm")


ROOMY = PoolSizes(20_000, 20_000, 200)


@st.composite
def configurations(draw):
    page = draw(st.sampled_from([1, 3, 16, 24, 64]))
    knobs = dict(page_size=page, track_interval=page * draw(st.integers(1, 7)),
                 swa_eviction_interval=draw(st.integers(1, 70)),
                 swa_free_trigger=draw(st.sampled_from(["tokens", "iterations"])),
                 iteration_phase=draw(st.integers(0, 50)),
                 chunked_prefill_size=page * draw(st.integers(2, 12)))
    mamba = draw(st.booleans())
    window = draw(st.integers(17, 300))
    preset = draw(st.sampled_from(RADIX_PRESETS))
    if PRESETS[preset].engine == "freetoken":
        knobs["chunked_prefill_size"] = max(knobs["chunked_prefill_size"], page)
    # SGLang needs the scan chunk and the page to divide one another; FreeToken, the chunk a multiple of
    # the page
    mamba_chunk = page * (draw(st.integers(1, 4)) if page >= 16 else draw(st.integers(16, 24)))
    knobs["mamba_chunk"] = mamba_chunk
    return preset, hybrid_model(swa=True, mamba=mamba, window=window), knobs


@st.composite
def workloads(draw):
    """Requests (shared prefix, own prompt, output) and the decode segments the two managers take."""
    requests = draw(st.lists(st.tuples(st.integers(0, 300), st.integers(1, 400), st.integers(2, 900)),
                             min_size=1, max_size=4))
    segments = draw(st.lists(st.integers(1, 90), min_size=4, max_size=40))
    return requests, segments


def snapshot(manager: CacheManager) -> tuple:
    """Everything a decode step can change, in a comparable form."""
    requests = tuple(
        (rid, r.kv_len, r.decode_steps, r.swa_frontier, r.prefix_len, tuple(r.own_full), tuple(r.own_swa),
         r.state, tuple(r.spare_states), r.checkpoint, r.planned, r.commit_pending, r.last_node.end)
        for rid, r in sorted(manager.requests.items()))
    nodes = tuple((n.start, n.end, tuple(n.full_pages), None if n.swa_pages is None else tuple(n.swa_pages),
                   n.state, n.full_lock, tuple(sorted(n.swa_holders))) for n in manager.tree.nodes())
    pools = tuple((comp, pool.num_free, pool.high_water, tuple(pool.returned_ids()))
                  for comp, pool in manager.pools.items())
    return requests, nodes, pools, tuple(manager.usage().items()), tuple(manager.tree.num_evictions.items())


def decode_step_by_step(manager: CacheModel, request_id: str, num_steps: int, iteration: int) -> int:
    """``advance_decode``'s contract, one ``prepare_decode`` + ``settle`` (an overlap loop processes the step
    before, FreeToken's prompt commit) + ``complete_decode`` per step."""
    for done in range(num_steps):
        if isinstance(manager.prepare_decode(request_id, iteration + done), Refusal):
            return done
        manager.settle(request_id, 1)
        manager.complete_decode(request_id)
    return num_steps


class Run:
    """One manager driven through admission, chunked prefill and segmented decoding."""

    def __init__(self, preset: str, model, knobs: dict, fast: bool, sizes: PoolSizes = ROOMY):
        self.manager = make_manager(model, make_policy(preset, **knobs), sizes)
        self.chunk = knobs["chunked_prefill_size"]
        self.fast = fast
        self.iteration = 0
        self.remaining: dict[str, int] = {}  # running request -> decode steps left

    def start(self, request_id: str, tokens: TokenSeq, prompt_len: int, output_len: int) -> None:
        manager = self.manager
        if isinstance(manager.admit(request_id, tokens, prompt_len), Refusal):
            return
        while manager.requests[request_id].kv_len < prompt_len:
            chunk = manager.next_chunk_len(request_id, self.chunk)
            if chunk <= 0 or isinstance(manager.prepare_prefill(request_id, chunk, self.iteration), Refusal):
                manager.abort(request_id)
                return
            manager.complete_prefill(request_id, chunk)
            self.iteration += 1
        self.remaining[request_id] = output_len - 1

    def decode(self, request_id: str, num_steps: int) -> None:
        num_steps = min(num_steps, self.remaining[request_id])
        if self.fast:
            done = self.manager.advance_decode(request_id, num_steps, self.iteration)
        else:
            done = decode_step_by_step(self.manager, request_id, num_steps, self.iteration)
        self.iteration += done + 1  # an iteration where this request did not decode (the others did)
        self.remaining[request_id] -= done
        if done < num_steps or not self.remaining[request_id]:
            del self.remaining[request_id]
            self.manager.finish(request_id)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(configurations(), workloads())
def test_fast_decode_leaves_the_cache_as_step_by_step(configuration, workload):
    preset, model, knobs = configuration
    requests, segments = workload
    fast, slow = Run(preset, model, knobs, fast=True), Run(preset, model, knobs, fast=False)
    for index, (shared_len, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        tokens = seq(("shared", shared_len), (rid, own_len), ("out-" + rid, output_len))
        for run in (fast, slow):
            run.start(rid, tokens, shared_len + own_len, output_len)
        assert snapshot(fast.manager) == snapshot(slow.manager), f"after admitting {rid}"
    for position, num_steps in enumerate(segments):
        if not fast.remaining:
            break
        rid = sorted(fast.remaining)[position % len(fast.remaining)]
        for run in (fast, slow):
            run.decode(rid, num_steps)
        assert fast.iteration == slow.iteration and fast.remaining == slow.remaining
        assert snapshot(fast.manager) == snapshot(slow.manager), f"after {num_steps} decode steps of {rid}"
    fast.manager.check_integrity()
