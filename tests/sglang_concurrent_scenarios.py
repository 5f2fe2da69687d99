"""A hand-made concurrent scenario on SGLang 0.5.23's scheduler, with what SGLang answered step by step (its own
``Scheduler.event_loop_overlap`` on CPU; tests/conformance/test_sglang_engine.py runs it again,
tests/test_sglang_scheduler.py checks that simulate answers the same without SGLang installed).

Three siblings of a 300-token prompt arrive together, a fourth two steps later, a stranger at step 4; FULL+SWA,
page 16, window 64, 256 tokens a chunk, a small SWA pool (24 pages). What it exercises: a prefill batch apart
from the decode batch, the chunked request's next chunk first, FCFS admission while the PrefillAdder budget
lasts, the overlap loop (a prompt committed and a finish released a step late), and decode running short of
pages, so ``retract_decode`` sends back the request with the fewest outputs to prefill again and keeps the rest
in its keep order (``filter_batch(keep_indices=sorted_indices)``: b, a, c from then on).
"""

from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, trace_lines
from conformance.trajectory import Served


def _request(request_id: str, parts: list[tuple[str, int]], output_len: int, arrival: int) -> dict:
    return {"id": request_id, "arrival": float(arrival), "output_len": output_len,
            "prompt": [{"ref": ref, "len": n} for ref, n in parts]}


def siblings() -> Scenario:
    system = ("sys", 300)
    requests = [_request("a", [system, ("a", 40)], 60, 0), _request("b", [system, ("b", 30)], 50, 0),
                _request("c", [system, ("c", 100)], 60, 0), _request("d", [system, ("d", 20)], 40, 2),
                _request("e", [("e", 90)], 8, 4)]
    config = EngineConfig("full+swa", 16, 64, 64, 64, 256, 128, full_tokens=4096, swa_tokens=384,
                          mamba_states=0)
    return Scenario("sglang-siblings", "sglang", 0, "concurrent-hand", True, config, trace_lines(requests))


def outcomes(requests: dict[str, Served]) -> dict[str, tuple[int, bool, int | None]]:
    return {name: (served.cached_tokens, served.served, served.finished_at) for name, served in requests.items()}


# what SGLang 0.5.23 answered (conformance/engines/sglang_steps.py)
FIRST_BATCHES = [
    (0, (("a", 256, True),)),
    (1, (("a", 84, True), ("b", 74, True), ("c", 80, True))),
    (2, (("c", 64, True),)),
    (3, (("a", 1, False), ("b", 1, False), ("c", 1, False))),
    (4, (("d", 32, True),)),
]
AFTER_RETRACTION = [
    (37, (("b", 1, False), ("a", 1, False), ("c", 1, False))),
    (38, (("b", 1, False), ("a", 1, False), ("c", 1, False))),
]
NUM_STEPS = 73
RETRACTED = [(37, ("d",))]
# (cached tokens, served, finished at) per request
OUTCOMES = {"a": (0, True, 64), "b": (256, True, 53), "c": (256, True, 64), "d": (288, True, 73), "e": (0, True, 62)}


def chunked_plain_loop() -> Scenario:
    """``--disable-overlap-schedule`` (``event_loop_normal``): a 160-token prompt in chunks of 64 beside a
    sibling arriving at step 1. A middle chunk reaches the tree only at the next step's scheduling
    (``stash_chunked_request``), the last one when its result is processed, in the same iteration."""
    requests = [_request("a", [("sys", 100), ("a", 60)], 4, 0), _request("b", [("sys", 100), ("b", 20)], 3, 1)]
    config = EngineConfig("full+swa", 16, 64, 64, 64, 64, 128, full_tokens=1024, swa_tokens=512,
                          mamba_states=0, overlap=False)
    return Scenario("sglang-plain-loop", "sglang", 0, "concurrent-hand", False, config, trace_lines(requests))


# what SGLang 0.5.23 answered (event_loop_normal): per step the batch and the pools after it, ((FULL free,
# FULL in the tree), (SWA free, SWA in the tree)) in pages: nothing in the tree after a's first chunk, its first
# chunk after the second; b reuses the 96 tokens of a's first two chunks (its shared 100, floored to a page)
PLAIN_LOOP_STEPS = [
    (0, (("a", 64, True),), ((60, 0), (28, 0))),
    (1, (("a", 64, True),), ((56, 4), (24, 4))),
    (2, (("a", 32, True), ("b", 24, True)), ((52, 11), (20, 11))),
    (3, (("a", 1, False), ("b", 1, False)), ((51, 11), (19, 11))),
    (4, (("a", 1, False), ("b", 1, False)), ((52, 11), (20, 11))),
    (5, (("a", 1, False),), ((53, 11), (21, 11))),
]
PLAIN_LOOP_OUTCOMES = {"a": (0, True, 6), "b": (96, True, 5)}


def queued(schedule_policy: str) -> Scenario:
    """``--schedule-policy``: ``a`` (a 200-token system prompt) prefills in chunks of 64 while four requests
    queue behind it: ``x1`` and ``x2`` share 34 tokens the tree does not hold, ``s1`` shares ``a``'s system
    prompt, ``y`` shares nothing; outputs of different lengths. FCFS admits them in arrival order; LPM the longest tree match
    first, and ``x2`` last, behind ``y`` (in-batch prefix caching: ``x1`` and ``x2`` match nothing and share 32
    tokens); LOF the longest output first."""
    system = ("sys", 200)
    requests = [_request("a", [system, ("a", 20)], 30, 0), _request("x1", [("x", 34)], 5, 1),
                _request("x2", [("x", 34), ("x2", 2)], 20, 1), _request("s1", [system, ("s1", 10)], 9, 1),
                _request("y", [("y", 8)], 3, 2)]
    config = EngineConfig("full+swa", 16, 64, 64, 64, 64, 128, full_tokens=2048, swa_tokens=2048,
                          mamba_states=0, schedule_policy=schedule_policy)
    name = f"sglang-queued-{schedule_policy}"
    return Scenario(name, "sglang", 0, "concurrent-hand", False, config, trace_lines(requests))


# what SGLang 0.5.23 answered per policy: its prefill steps from step 3 on (steps 0-2 are a's chunks in every
# policy), and (cached tokens, served, finished at) per request
QUEUED_PREFILLS = {
    "fcfs": [(3, (("a", 28, True), ("x1", 32, True))), (4, (("x1", 2, True), ("x2", 4, True), ("s1", 18, True))),
             (5, (("y", 8, True),))],
    "lpm": [(3, (("a", 28, True), ("s1", 18, True))), (4, (("x1", 34, True), ("y", 8, True))),
            (5, (("x2", 36, True),))],
    "lof": [(3, (("a", 28, True), ("x2", 32, True))), (4, (("x2", 4, True), ("s1", 18, True), ("x1", 2, True))),
            (5, (("y", 8, True),))],
    "dfs-weight": [(3, (("a", 28, True), ("s1", 18, True))), (4, (("x1", 34, True), ("x2", 16, True))),
                   (5, (("x2", 20, True), ("y", 8, True)))],
    "hrrn": [(3, (("a", 28, True), ("y", 8, True), ("s1", 16, True))), (4, (("s1", 2, True), ("x1", 34, True))),
             (5, (("x2", 36, True),))],
}
QUEUED_OUTCOMES = {
    "fcfs": {"a": (0, True, 35), "x1": (0, True, 10), "x2": (32, True, 25), "s1": (192, True, 14), "y": (0, True, 8)},
    "lpm": {"a": (0, True, 35), "x1": (0, True, 10), "x2": (0, True, 25), "s1": (192, True, 14), "y": (0, True, 8)},
    "lof": {"a": (0, True, 35), "x1": (32, True, 10), "x2": (0, True, 25), "s1": (192, True, 14), "y": (0, True, 8)},
    "dfs-weight": {"a": (0, True, 35), "x1": (0, True, 10), "x2": (0, True, 25), "s1": (192, True, 14),
                   "y": (0, True, 8)},
    "hrrn": {"a": (0, True, 35), "x1": (0, True, 10), "x2": (0, True, 25), "s1": (192, True, 14), "y": (0, True, 8)},
}


def mixed_chunks() -> Scenario:
    """``--enable-mixed-chunk``: ``a`` decodes inside ``b``'s prefill batches. Each pass's chunk budget loses a
    token per running request, so ``b``'s chunks are cut off the page grid (63, then continuations cut
    anywhere); ``a``'s decode rows ride in those batches, where SGLang tracks no MAMBA state (its decode
    checkpoint at 64 is never saved), so ``c``, ``a``'s follow-up, reuses less of ``a``."""
    requests = [_request("a", [("a", 50)], 40, 0), _request("b", [("b", 300)], 3, 10),
                {"id": "c", "arrival": 60.0, "output_len": 2,
                 "prompt": [{"ref": "a", "len": 50}, {"output_of": "a"}, {"ref": "c", "len": 10}]}]
    config = EngineConfig("full+mamba", 16, 0, 64, 64, 64, 128, full_tokens=2048, swa_tokens=0,
                          mamba_states=40, mixed_chunk=True)
    return Scenario("sglang-mixed-chunks", "sglang", 0, "concurrent-hand", False, config, trace_lines(requests))


# what SGLang 0.5.23 answered (--enable-mixed-chunk): b's prefill steps with a's decode row riding in them,
# b's order first (mix_with_running appends the running batch), then both decode
MIXED_STEPS = [
    (10, (("b", 48, True), ("a", 1, False))),
    (11, (("b", 63, True), ("a", 1, False))),
    (12, (("b", 63, True), ("a", 1, False))),
    (13, (("b", 63, True), ("a", 1, False))),
    (14, (("b", 63, True), ("a", 1, False))),
    (15, (("b", 1, False), ("a", 1, False))),
]
MIXED_NUM_STEPS = 43
MIXED_OUTCOMES = {"a": (0, True, 40), "b": (0, True, 17), "c": (0, True, 63)}


def clipped_to_nothing() -> Scenario:
    """``--schedule-policy lof`` where a request's ``max_new_tokens`` is clipped to 0: ``a``'s 170-token prompt
    leaves no room in a 192-token pool for a decode (``init_req_max_new_tokens``: 192 - 176 - 16 - 1 < 0), so
    it sorts after ``b``'s one output though it asked for six; ``c`` (four) first. The pass admits ``c`` and
    ``b``, then stops at ``a``, which waits for the room they leave."""
    requests = [_request("a", [("a", 170)], 6, 0), _request("b", [("b", 20)], 1, 0),
                _request("c", [("c", 30)], 4, 0)]
    config = EngineConfig("full+swa", 16, 64, 64, 64, 256, 128, full_tokens=192, swa_tokens=1024,
                          mamba_states=0, schedule_policy="lof")
    name = "sglang-clipped-to-nothing"
    return Scenario(name, "sglang", 0, "concurrent-hand", True, config, trace_lines(requests))


# what SGLang 0.5.23 answered: every step's batch and the pools after it, ((FULL free, FULL in the tree),
# (SWA free, SWA in the tree)) in pages; (cached tokens, served, finished at) per request (a: its first token)
CLIPPED_STEPS = [
    (0, (("c", 30, True), ("b", 20, True)), ((8, 0), (60, 0))),
    (1, (("c", 1, False),), ((9, 2), (61, 2))),
    (2, (("c", 1, False),), ((9, 2), (61, 2))),
    (3, (("c", 1, False),), ((8, 2), (60, 2))),
    (4, (("a", 170, True),), ((1, 0), (53, 0))),
]
CLIPPED_OUTCOMES = {"a": (0, True, 5), "b": (0, True, 1), "c": (0, True, 4)}


def freed_at_prefill() -> Scenario:
    """``--disable-overlap-schedule`` with ``--max-running-requests 2``: ``a`` and ``b`` fill the two rows at step
    0 and ``a`` (one output) finishes with its prefill, released in the same iteration. At step 1 the last
    batch, filtered, has shrunk (``get_next_batch_to_run``: ``filter_batch`` then ``batch_is_full = False``),
    so the pass admits ``c`` instead of decoding ``b`` alone."""
    requests = [_request("a", [("a", 40)], 1, 0), _request("b", [("b", 40)], 5, 0),
                _request("c", [("c", 40)], 3, 0)]
    config = EngineConfig("full+mamba", 16, 0, 64, 64, 8192, 128, full_tokens=1024, swa_tokens=0,
                          mamba_states=40, overlap=False, max_running=2)
    name = "sglang-freed-at-prefill"
    return Scenario(name, "sglang", 0, "concurrent-hand", False, config, trace_lines(requests))


# what SGLang 0.5.23 answered (event_loop_normal): every step's batch and the pools after it, ((FULL free,
# FULL in the tree), (MAMBA free, MAMBA in the tree))
FREED_STEPS = [
    (0, (("a", 40, True), ("b", 40, True)), ((61, 0), (37, 0))),
    (1, (("c", 40, True),), ((58, 0), (34, 0))),
    (2, (("b", 1, False), ("c", 1, False)), ((58, 0), (34, 0))),
    (3, (("b", 1, False), ("c", 1, False)), ((61, 0), (37, 0))),
    (4, (("b", 1, False),), ((61, 0), (37, 0))),
    (5, (("b", 1, False),), ((64, 0), (40, 0))),
]
FREED_OUTCOMES = {"a": (0, True, 1), "b": (0, True, 6), "c": (0, True, 4)}
