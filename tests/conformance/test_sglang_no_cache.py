"""``no-cache`` against SGLang 0.5.23's ``--disable-radix-cache`` (``UnifiedRadixCache(disable=True)`` under the
same ``Scheduler``): ``cli.py conformance sglang --concurrent --no-cache`` on the first seeds, in its default
and other modes, agrees step by step, MAMBA configurations included (one state per request, no extra buffer).

And the shape that broke (Mooncake, Round 40): a prompt arriving while another request runs, the pass's chunk
budget cut off the page grid by the mixed decode row. ``add_one_req_ignore_eos`` takes a first chunk of what
is left (127 tokens of a page of 128); SGLang with its cache on floors it to no page and drops the request for
the pass, so it waits for the other to finish.

And the shapes ``--boundary --no-cache`` found (full+mamba, no SWA): ``add_one_req_ignore_eos`` also refuses a
request whose prompt fits where the running requests' decode still owed would not (``req_states``, skipped
with hybrid SWA)."""

from __future__ import annotations

import os
from importlib.util import find_spec

import pytest

from conformance.compare_steps import simulated_steps
from conformance.scenario import EngineConfig, Scenario, trace_lines
from conformance.suite import driver
from conformance.suite_steps import report_steps, run_concurrent
from sim.cache.engines.nocache_states import insert_state

NUM_SEEDS = int(os.environ.get("HYBRIDCACHE_CONFORMANCE_SEEDS", "30"))
NUM_MODE_SEEDS = int(os.environ.get("HYBRIDCACHE_CONFORMANCE_MODE_SEEDS", "16"))
MODES = {
    "default": {},
    "no-overlap": {"overlap": False},
    "lpm": {"schedule_policy": "lpm"},  # a cache-aware policy: FCFS over a disabled tree
    "mixed-chunk": {"mixed_chunk": True},
}

needs_sglang = pytest.mark.skipif(
    find_spec("sglang") is None,
    reason="sglang is not installed (pip install --no-deps -c constraints-cpu.txt -r conformance/requirements.txt)",
)


@needs_sglang
@pytest.mark.parametrize("pressure", [False, True], ids=["large-pools", "pressure"])
@pytest.mark.parametrize("mode", list(MODES))
def test_no_cache_agrees_with_sglangs_disabled_cache_under_concurrent_load(mode, pressure):
    from conformance.generate_concurrent import generate_concurrent
    from conformance.modes import forced

    make = forced(generate_concurrent, "sglang", dict(MODES[mode], disable_radix_cache=True))
    seeds = range(NUM_SEEDS if mode == "default" else NUM_MODE_SEEDS)
    result = run_concurrent(driver("sglang", concurrent=True), seeds, (pressure,), None, make)
    assert result.all_equal, report_steps(result)
    compared = sum(v for k, v in result.counts.items() if k[2] == "scenarios")
    assert {k[0] for k in result.counts} <= {"no-cache"}
    assert compared == len(seeds)


CONFIG = EngineConfig(
    components="full+swa",
    page_size=128,
    window=256,
    track_interval=256,
    mamba_chunk=64,
    chunked_prefill_size=128,
    swa_eviction_interval=128,
    full_tokens=128 * 40,
    swa_tokens=128 * 40,
    mamba_states=0,
    overlap=False,
    mixed_chunk=True,
    disable_radix_cache=True,
)
REQUESTS = [
    {"id": "R", "arrival": 0.0, "prompt": [{"ref": "r", "len": 100}], "output_len": 12},
    {"id": "L", "arrival": 2.0, "prompt": [{"ref": "l", "len": 700}], "output_len": 2},
]
SHAPE = Scenario(
    "no-cache-first-chunk-off-the-page", "sglang", 0, "hand", False, CONFIG, trace_lines(REQUESTS)
)
# SGLang 0.5.23 --disable-radix-cache's steps on SHAPE (recorded through the step driver): (at, batch, pools)
RECORDED = [
    (0, (("R", 100, True),), ((39, 0), (39, 0))),
    (1, (("R", 1, False),), ((39, 0), (39, 0))),
    (2, (("L", 127, True), ("R", 1, False)), ((38, 0), (38, 0))),
    (3, (("L", 127, True), ("R", 1, False)), ((37, 0), (37, 0))),
    (4, (("L", 127, True), ("R", 1, False)), ((36, 0), (36, 0))),
    (5, (("L", 127, True), ("R", 1, False)), ((35, 0), (35, 0))),
    (6, (("L", 127, True), ("R", 1, False)), ((34, 0), (35, 0))),
    (7, (("L", 65, True), ("R", 1, False)), ((33, 0), (35, 0))),
    (8, (("L", 1, False), ("R", 1, False)), ((39, 0), (39, 0))),
]


def test_a_first_chunk_cut_off_the_page_grid_is_taken_not_dropped():
    run = simulated_steps(SHAPE, "no-cache")
    assert [(s.at, s.batch, s.pools) for s in run.steps[: len(RECORDED)]] == RECORDED
    assert all(served.served for served in run.requests.values())


def test_with_the_cache_on_the_same_prompt_waits_for_a_page():
    """The contrast: SGLang's ``add_one_req`` floors the first chunk to a page, none fits beside R's decode."""
    cached = Scenario(
        SHAPE.name,
        "sglang",
        0,
        "hand",
        False,
        EngineConfig(**{**vars(CONFIG), "disable_radix_cache": False}),
        SHAPE.trace_lines,
    )
    run = simulated_steps(cached, "sglang-retain")
    first_l = next(step.at for step in run.steps if any(item[0] == "L" for item in step.batch))
    assert first_l == run.requests["R"].finished_at


@needs_sglang
def test_the_recorded_steps_are_sglangs():
    theirs = driver("sglang", concurrent=True).run_steps(SHAPE, "no-cache")
    assert [(s.at, s.batch, s.pools) for s in theirs.steps[: len(RECORDED)]] == RECORDED


def _decode_config(full_tokens: int, chunk: int, overlap: bool) -> EngineConfig:
    return EngineConfig(
        components="full+mamba",
        page_size=16,
        window=0,
        track_interval=64,
        mamba_chunk=64,
        chunked_prefill_size=chunk,
        swa_eviction_interval=128,
        full_tokens=full_tokens,
        swa_tokens=0,
        mamba_states=4,
        overlap=overlap,
        disable_radix_cache=True,
    )


def _request(name: str, prompt: int, output: int, arrival: float = 0.0) -> dict:
    return {
        "id": name,
        "arrival": arrival,
        "prompt": [{"ref": name.lower(), "len": prompt}],
        "output_len": output,
    }


# each shape: (config, requests, B's first step (None: never prefilled, given up), the run's steps), the last two
# SGLang 0.5.23 --disable-radix-cache's, recorded through the step driver
DECODE_SHAPES = {
    # B's prompt and a page (48 tokens) fit beside A's (160 less A's 48 and 60 to decode), but A's and B's decode
    # (60 + 40, each prompt freed only when its request ends) do not: B waits for A
    "decode-owed": (_decode_config(160, 256, False), [_request("A", 32, 60), _request("B", 32, 40)], 60, 100),
    # the running C frees its prompt and its outputs so far once done (not its prompt alone): B fits at once
    "outputs-held": (
        _decode_config(160, 256, False),
        [_request("A", 16, 5), _request("C", 16, 40), _request("B", 16, 140, 1.0)],
        1,
        128,
    ),
    # the same with the overlap loop: a request whose step is in flight owes one more and holds one less
    "in-flight": (
        _decode_config(160, 256, True),
        [_request("A", 16, 5), _request("C", 16, 40), _request("B", 16, 140, 1.0)],
        None,
        40,
    ),
    # a chunked prefill continued in the pass (can_run_list) owes its whole decode too: B waits for A
    "chunk-continued": (
        _decode_config(240, 64, False),
        [_request("A", 100, 50), _request("B", 16, 60)],
        51,
        111,
    ),
}


def _decode_shape(name: str) -> Scenario:
    config, requests, _, _ = DECODE_SHAPES[name]
    return Scenario(f"no-cache-{name}", "sglang", 0, "hand", False, config, trace_lines(requests))


@pytest.mark.parametrize("name", list(DECODE_SHAPES))
def test_a_prompt_that_fits_waits_while_the_running_decode_would_not(name):
    run = simulated_steps(_decode_shape(name), "no-cache")
    first_b = next((step.at for step in run.steps if any(item[0] == "B" for item in step.batch)), None)
    assert (first_b, len(run.steps)) == DECODE_SHAPES[name][2:]


def test_a_later_state_goes_before_the_first_owing_as_much_else_before_the_last():
    states = [(5, 1), (9, 2)]
    insert_state(states, (7, 3))
    insert_state(states, (20, 4))  # owes the most, yet SGLang's loop puts it before the last
    assert states == [(5, 1), (7, 3), (20, 4), (9, 2)]


@needs_sglang
@pytest.mark.parametrize("name", list(DECODE_SHAPES))
def test_the_decode_owed_shapes_are_sglangs(name):
    theirs = driver("sglang", concurrent=True).run_steps(_decode_shape(name), "no-cache")
    ours = simulated_steps(_decode_shape(name), "no-cache")
    assert [(s.at, s.batch, s.pools) for s in theirs.steps] == [(s.at, s.batch, s.pools) for s in ours.steps]


BOUNDARY_SEEDS = (5, 9, 12, 17, 19, 21, 25, 29)  # the full+mamba ones that differed before req_states


@needs_sglang
def test_no_cache_agrees_with_sglang_at_the_boundaries():
    from conformance.generate_boundary import generate_boundary
    from conformance.modes import forced

    make = forced(generate_boundary, "sglang", {"disable_radix_cache": True})
    seeds = range(max(BOUNDARY_SEEDS) + 1) if NUM_SEEDS >= 30 else BOUNDARY_SEEDS
    result = run_concurrent(driver("sglang", concurrent=True), seeds, (False, True), None, make)
    assert result.all_equal, report_steps(result)
