"""vLLM's decode fast path (``advance_decode``: runs of steps that only lengthen a request taken in one go, and
the steps at block boundaries taken without the per-step walk) leaves the block manager exactly as
step-by-step decoding does, as a property over layouts (one block size, groups of two block sizes, the
inkling and gemma-4 layouts), windows, retention intervals, async scheduling, the junction, prefill
checkpoints and pools from a few dozen blocks (evictions, refusals) to roomy.

Each example runs the same requests on three managers: one decodes through ``advance_decode``, the others call
``prepare_decode`` + ``settle`` + ``complete_decode`` once per step, one of them with every step's hashes taken by
``cache_blocks`` (``one_block_hash`` off: the reference for the manager's one-block path the timed loop takes). Requests run together, each decoding in
short segments at its own engine iterations; after every segment the two are compared whole: each request's
tables, lengths, hashed and retired counts, history and keys; the pool's free queue in order, ref counts,
hashes, counters; and every event the pool and manager sent, in order (evictions, discards, skipped blocks),
so a bulk step that frees, allocates, hashes or evicts one block in another order is caught at that segment.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.compare import model_for
from conformance.scenario import EngineConfig, Scenario
from sim.cache.blocks.layout import policy_layout
from sim.cache.events import BlockHit, BlocksDiscarded, BlocksEvicted, BlocksSkipped
from sim.cache.results import Refusal
from sim.cache.sizing import PoolSizes
from sim.engines.registry import make_manager, make_policy
from sim.models import get_model
from sim.tokens import TokenSeq


def conformance_model(components: str, page: int, window: int, full_heads: int, swa_heads: int):
    engine = EngineConfig(
        components,
        page,
        window if "swa" in components else 0,
        page * 4,
        64,
        8192,
        128,
        0,
        0,
        0,
        full_kv_heads=full_heads,
        swa_kv_heads=swa_heads,
    )
    return model_for(Scenario("probe", "vllm", 0, "", False, engine, ()))


@st.composite
def configurations(draw):
    window = draw(st.integers(17, 160))
    kind = draw(st.sampled_from(["conformance", "inkling", "gemma-4-26b-a4b"]))
    if kind == "conformance":
        components = draw(st.sampled_from(["full+swa", "full+mamba", "full+swa+mamba"]))
        page = draw(st.sampled_from([16, 32]))
        # vLLM pads a Mamba page instead of scaling unequal attention blocks (the simulator refuses the mix)
        full_heads = 1 if "mamba" in components else draw(st.sampled_from([1, 2]))
        model = conformance_model(components, page, window, full_heads, 1)
    else:
        model, page = get_model(kind).replace(window=window), 16
    knobs = dict(
        page_size=page,
        async_scheduling=draw(st.booleans()),
        junction=draw(st.booleans()),
        prefill_checkpoints=draw(st.booleans()),
        chunked_prefill_size=page * draw(st.integers(2, 12)),
    )
    # the interval must be a multiple of the scheduler block (the lcm of the groups' block sizes)
    scheduler_block = policy_layout(model, make_policy("vllm", **knobs)).block_size
    if model.window and draw(st.booleans()):  # W = 2 (mod B): the window and the states move in one step
        model = model.replace(
            window=scheduler_block * draw(st.integers(1, 4)) + draw(st.sampled_from([1, 2, 3]))
        )
    knobs["retention_interval"] = draw(st.sampled_from([None, 0, scheduler_block, 3 * scheduler_block]))
    return model, knobs, draw(st.integers(60, 700))


@st.composite
def workloads(draw):
    """Requests (shared prefix, own prompt, output) and the decode segments the two managers take."""
    requests = draw(
        st.lists(
            st.tuples(st.integers(0, 300), st.integers(1, 300), st.integers(2, 600)), min_size=1, max_size=4
        )
    )
    segments = draw(st.lists(st.integers(1, 200), min_size=3, max_size=30))
    return requests, segments


class Run:
    """One block manager driven through admission, chunked prefill and segmented decoding, its events kept."""

    def __init__(self, model, knobs: dict, num_blocks: int, fast: bool):
        self.manager = make_manager(
            model, make_policy("vllm", **knobs), PoolSizes(0, 0, 0, blocks=num_blocks)
        )
        self.events: list = []
        for kind in (BlocksEvicted, BlocksDiscarded, BlocksSkipped, BlockHit):
            self.manager.events.subscribe(kind, self.events.append)
        self.chunk, self.fast, self.iteration = knobs["chunked_prefill_size"], fast, 0
        self.remaining: dict[str, int] = {}  # running request -> decode steps left

    def start(self, request_id: str, tokens: TokenSeq, prompt_len: int, output_len: int) -> None:
        manager = self.manager
        manager.begin_pass()
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
        manager, done = self.manager, num_steps
        if self.fast:
            done = manager.advance_decode(request_id, num_steps, self.iteration)
        else:
            for step in range(num_steps):
                if isinstance(manager.prepare_decode(request_id, self.iteration + step), Refusal):
                    done = step
                    break
                manager.settle(request_id, 1)
                manager.complete_decode(request_id)
        self.iteration += done + 1  # an iteration where this request did not decode (the others did)
        self.remaining[request_id] -= done
        if done < num_steps or not self.remaining[request_id]:
            del self.remaining[request_id]
            manager.finish(request_id)


def snapshot(run: Run) -> tuple:
    manager, pool = run.manager, run.manager.pool
    requests = tuple(
        (
            rid,
            r.kv_len,
            r.decode_steps,
            r.history,
            tuple(map(tuple, r.tables)),
            tuple(r.num_cached),
            tuple(r.retired),
            len(r.chain.keys),
        )
        for rid, r in sorted(manager.requests.items())
    )
    blocks_of = tuple(sorted((repr(key), tuple(blocks)) for key, blocks in pool.blocks_of.items()))
    counters = (pool.held, pool.cached_free, pool.num_evictions, pool.num_free, manager.usage())
    mamba_keys = sorted(map(repr, manager._mamba_keys_this_step))  # a Mamba hit hashed this step waits
    return (
        requests,
        tuple(pool.queue()),
        pool.ref_counts(),
        pool.key_of,
        blocks_of,
        repr(counters),
        mamba_keys,
        repr(run.events),
    )


@settings(max_examples=250, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(configurations(), workloads())
def test_fast_decode_leaves_the_block_manager_as_step_by_step(configuration, workload):
    model, knobs, num_blocks = configuration
    requests, segments = workload
    try:
        fast = Run(model, knobs, num_blocks, fast=True)
    except ValueError:  # the start-up check: the pool cannot hold one max_model_len request
        return
    slow = Run(model, knobs, num_blocks, fast=False)
    plain = Run(model, knobs, num_blocks, fast=False)  # every step hashed by cache_blocks: the reference
    plain.manager.one_block_hash = plain.manager.steady_steps = False
    for index, (shared_len, own_len, output_len) in enumerate(requests):
        rid = f"r{index}"
        tokens = TokenSeq.of("r:shared", shared_len) + TokenSeq.of("r:" + rid, own_len)
        tokens = tokens + TokenSeq.of("o:" + rid, output_len)
        for run in (fast, slow, plain):
            run.start(rid, tokens, shared_len + own_len, output_len)
        assert snapshot(fast) == snapshot(slow) == snapshot(plain), f"after admitting {rid}"
    for position, num_steps in enumerate(segments):
        if not fast.remaining:
            break
        rid = sorted(fast.remaining)[position % len(fast.remaining)]
        for run in (fast, slow, plain):
            run.decode(rid, num_steps)
        assert fast.iteration == slow.iteration and fast.remaining == slow.remaining
        assert snapshot(fast) == snapshot(slow) == snapshot(plain), f"after {num_steps} decode steps of {rid}"
    fast.manager.check_integrity()
