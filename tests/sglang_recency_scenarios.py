"""Hand-made scenarios on SGLang 0.5.23's FULL recency (what its eviction orders leaves by), each with what
SGLang answered (its real scheduler; tests/conformance/test_sglang_recency.py runs them again, and
tests/test_sglang_recency.py checks that simulate answers the same without the engine installed).
Outcomes are (cached tokens, served) per request, in serving order; requests run one at a time.
"""

from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, one_at_a_time, trace_lines


def _request(request_id: str, parts: list[tuple[str, int]], output_len: int = 1) -> dict:
    return {
        "id": request_id,
        "prompt": [{"ref": ref, "len": n} for ref, n in parts],
        "output_len": output_len,
    }


def split_recency() -> Scenario:
    """M1, ``UnifiedTreeCore._split_node``: ``child.last_access_time`` = the current time. a leaves [x y] as
    one node, v an unrelated one; b's match splits a's node after x, so a's tail y is stamped after v. d
    needs room for 1600 tokens: SGLang evicts v, the older leaf, and keeps y, which e then reuses (992 =
    x + y floored to the page). Stamping y with a's old time instead evicts y first."""
    config = EngineConfig(
        "full+swa", 16, 24, 64, 64, 8192, 128, full_tokens=4096, swa_tokens=16384, mamba_states=0
    )
    requests = [
        _request("a", [("x", 512), ("y", 512)]),
        _request("v", [("v", 1024)]),
        _request("b", [("x", 512), ("z", 512)]),
        _request("d", [("d", 1600)]),
        _request("e", [("x", 512), ("y", 512), ("e", 10)]),
        _request("f", [("v", 1024), ("f", 10)]),
    ]
    return Scenario("split-recency", "sglang", 0, "hand", True, config, trace_lines(one_at_a_time(requests)))


SPLIT_RECENCY = [(0, True), (0, True), (512, True), (0, True), (992, True), (0, True)]


def insert_recency() -> Scenario:
    """M3, ``UnifiedTreeCore._insert_walk_step``: an insert stamps every node it walks from the root
    (``_touch_node``), so a request whose match reused nothing (no MAMBA state at its match point) still
    refreshes the shared path when it finishes. Found by a seeded search over small FULL+SWA+MAMBA pools
    with interleaved prefixes, and cut down to the requests that matter: without the refresh the P0 path
    is evicted before r10, which then reuses nothing instead of 128 tokens."""
    config = EngineConfig(
        "full+swa+mamba", 16, 100, 64, 64, 8192, 128, full_tokens=2192, swa_tokens=2192, mamba_states=7
    )
    p0, p1 = ("P0", 189), ("P1", 436)
    requests = [
        _request("r0", [p1, ("u0", 138)]),
        _request("r1", [p0, ("Q0", 20), ("u1", 215)], 2),
        _request("r2", [p0, ("u2", 158)], 39),
        _request("r3", [p1, ("Q1", 91), ("u3", 22)], 2),
        _request("r4", [p1, ("u4", 270)], 2),
        _request("r5", [("u5", 209)], 2),
        _request("r7", [("u7", 347)]),
        _request("r8", [p0, ("u8", 228)], 2),
        _request("r9", [p1, ("Q1", 195), ("u9", 393)], 37),
        _request("r10", [p0, ("u10", 334)], 2),
    ]
    return Scenario("insert-recency", "sglang", 0, "hand", True, config, trace_lines(one_at_a_time(requests)))


INSERT_RECENCY = [(0, True)] * 4 + [(384, True)] + [(0, True)] * 4 + [(128, True)]
