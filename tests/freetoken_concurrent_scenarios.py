"""A hand-made concurrent scenario on FreeToken 0.2.1's scheduler, with what FreeToken answered step by step (its
own loop and cache on CPU; tests/conformance/test_freetoken_engine.py runs it again, tests/test_freetoken_scheduler.py
checks that simulate answers the same without the engine installed).

Five siblings of one 200-token system prompt arrive together, a stranger three steps later; FULL+MAMBA, page 16,
256 tokens a prefill pass, a 2048-token pool, 17 GDN slots. What it exercises: the pass's token budget shared
by chunks (a's 240, then the 16 tokens b gets: a page, the GDN chunk alignment), the first refusal ending the
pass, the four table rows (e waits for a row), prefill before decode, and the loop: with overlap a prompt is
committed only once the next step has launched, so c and d, admitted in the step after a's prefill, miss the
system prompt that the plain loop lets them reuse.
"""

from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, trace_lines
from conformance.trajectory import Served


def _request(request_id: str, parts: list[tuple[str, int]], output_len: int, arrival: int) -> dict:
    return {
        "id": request_id,
        "arrival": float(arrival),
        "output_len": output_len,
        "prompt": [{"ref": ref, "len": n} for ref, n in parts],
    }


def siblings(overlap: bool) -> Scenario:
    system = ("sys", 200)
    requests = [
        _request("a", [system, ("a", 40)], 6, 0),
        _request("b", [system, ("b", 30)], 3, 0),
        _request("c", [system, ("c", 300)], 4, 0),
        _request("d", [system, ("d", 20)], 2, 0),
        _request("e", [system, ("e", 10)], 3, 0),
        _request("f", [("f", 90)], 2, 3),
    ]
    config = EngineConfig(
        "full+mamba",
        16,
        0,
        64,
        64,
        256,
        128,
        full_tokens=2048,
        swa_tokens=0,
        mamba_states=17,
        overlap=overlap,
    )
    return Scenario(
        f"siblings-{'overlap' if overlap else 'plain'}",
        "freetoken",
        0,
        "concurrent-hand",
        True,
        config,
        trace_lines(requests),
    )


def _decode(*names: str) -> tuple:
    return tuple((name, 1, False) for name in names)


# (step, batch) as FreeToken launched them
BATCHES = {
    True: [
        (0, (("a", 240, True), ("b", 16, True))),
        (1, (("b", 214, True), ("c", 32, True), ("d", 10, True))),
        (2, (("c", 256, True),)),
        (3, (("c", 212, True), ("d", 38, True))),
        (4, (("d", 172, True),)),
        (5, _decode("a", "b", "c", "d")),
        (6, _decode("a", "b", "c")),
        (7, (("e", 18, True),)),
        (8, (("f", 90, True),)),
        (9, _decode("a", "c", "e", "f")),
        (10, _decode("a", "e")),
        (11, _decode("a")),
    ],
    False: [
        (0, (("a", 240, True), ("b", 16, True))),
        (1, (("b", 214, True), ("c", 32, True), ("d", 10, True))),
        (2, (("c", 256, True),)),
        (3, (("c", 20, True), ("d", 18, True))),
        (4, _decode("a", "b", "c", "d")),
        (5, (("e", 18, True),)),
        (6, _decode("a", "b", "c", "e")),
        (7, (("f", 90, True),)),
        (8, _decode("a", "c", "e", "f")),
        (9, _decode("a")),
        (10, _decode("a")),
    ],
}
# (free, tree-held) FULL pages and GDN slots after steps 0 and 4
POOLS = {
    True: {0: ((112, 0), (11, 0)), 4: ((76, 31), (2, 3))},
    False: {0: ((112, 12), (10, 1)), 4: ((89, 13), (6, 2))},
}
# (cached tokens, finished at) per request
OUTCOMES = {
    True: {"a": (0, 12), "b": (0, 7), "c": (0, 10), "d": (0, 6), "e": (192, 11), "f": (0, 10)},
    False: {"a": (0, 11), "b": (0, 7), "c": (192, 9), "d": (192, 5), "e": (192, 9), "f": (0, 9)},
}


def double_free(lead: int = 0) -> Scenario:
    """FreeToken frees pages twice (docs/notes/conformance-concurrent-findings.md): three siblings of a 909-token
    prompt prefill together (W 256, page 1, the plain loop). b is done at its prompt: its finish inserts the
    prompt and trims the head's SWA below 1071 - 256 - 16, a tombstone over most of the shared prefix. c's
    commit (``CacheManager._cache_req_swa(finished=False)``) then finds [0, 909) in the tree, frees its own
    copies of those pages as duplicates and re-matches its prompt, which stops short (the window at its end is
    not live), so its page table keeps the 909 freed pages: the first, wrong free, in the siblings' first step.
    Its finish frees the same pages again, 17 steps later. ``lead``: the siblings arrive at that step, after
    a stranger decoding alone from step 0 (steps both sides agree on before the wrong free)."""
    system = ("sys", 909)
    requests = [
        _request("a", [system, ("a", 192)], 27, lead),
        _request("b", [system, ("b", 162)], 1, lead),
        _request("c", [system, ("c", 64)], 18, lead),
    ]
    if lead:
        requests.insert(0, _request("z", [("z", 100)], lead + 30, 0))
    config = EngineConfig(
        "full+swa",
        1,
        256,
        256,
        64,
        8192,
        128,
        full_tokens=8000,
        swa_tokens=8000,
        mamba_states=0,
        overlap=False,
    )
    name = f"double-free-lead-{lead}" if lead else "double-free"
    return Scenario(name, "freetoken", 0, "concurrent-hand", False, config, trace_lines(requests))


def done_first() -> Scenario:
    """The plain loop processes a step in its order (``_process_last_data``): a request done at its prompt is
    released before the next one commits its prompt. W 128, page 1. r0 (300 shared + 20) finishes at step 1
    and its finish trims the shared head's SWA below 320 - 144 (tombstones). At step 2 r1 (done at its prompt)
    and r2 both recompute the prompt (the live run after the tombstones is shorter than a window). r1's finish
    revives the head with its own pages and trims it again below 350 - 144; r2's commit then revives those
    196 pages once more (``SWARadixCache.insert``, Branch 1): all 411 SWA pages in use are the tree's. Had r2
    committed first, r1's trim would have tombstoned them (215 in the tree)."""
    system = ("sys", 300)
    requests = [
        _request("r0", [system, ("q0", 20)], 2, 0),
        _request("r1", [system, ("q1", 50)], 1, 2),
        _request("r2", [system, ("q2", 40)], 3, 2),
    ]
    config = EngineConfig(
        "full+swa", 1, 128, 256, 64, 8192, 128, full_tokens=4000, swa_tokens=4000, mamba_states=0, overlap=False
    )
    return Scenario("done-first", "freetoken", 0, "concurrent-hand", False, config, trace_lines(requests))


# (free, tree-held) FULL and SWA pages after steps 2 and 4, and (cached tokens, finished at), as FreeToken answered
DONE_FIRST_POOLS = {2: ((3589, 411), (3589, 411)), 4: ((3587, 413), (3783, 217))}
DONE_FIRST_OUTCOMES = {"r0": (0, 2), "r1": (0, 3), "r2": (0, 5)}


def outcomes(requests: dict[str, Served]) -> dict[str, tuple[int, int | None]]:
    return {name: (served.cached_tokens, served.finished_at) for name, served in requests.items()}
