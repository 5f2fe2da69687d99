"""A hand-made concurrent scenario on vLLM 0.33.0's scheduler, with what vLLM answered step by step (its own
scheduler and block pool on CPU; tests/conformance/test_vllm_engine.py runs it again, tests/test_vllm_scheduler.py
checks that simulate answers the same without vLLM installed).

Three siblings of a 200-token prompt arrive together, a fourth two steps later, a stranger at step 5; FULL+MAMBA,
block 16, 256 tokens a step, a pool of 48 blocks. What it exercises: running requests first, then waiting ones
in one budget; align-mode Mamba cutting chunks; the pool running short in decode, so the last running request
is preempted (by recompute) until the others finish; no admission in a step that preempted; and async
scheduling (on: a step is processed after the next is scheduled; off: at once), which preempts d four times
against twice.
"""
from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, trace_lines
from conformance.trajectory import Served


def _request(request_id: str, parts: list[tuple[str, int]], output_len: int, arrival: int) -> dict:
    return {"id": request_id, "arrival": float(arrival), "output_len": output_len,
            "prompt": [{"ref": ref, "len": n} for ref, n in parts]}


def siblings(async_scheduling: bool) -> Scenario:
    system = ("sys", 200)
    requests = [_request("a", [system, ("a", 40)], 40, 0), _request("b", [system, ("b", 30)], 30, 0),
                _request("c", [system, ("c", 100)], 40, 0), _request("d", [system, ("d", 20)], 20, 2),
                _request("e", [("e", 90)], 8, 5)]
    config = EngineConfig("full+mamba", 16, 0, 64, 64, 256, 128, full_tokens=0, swa_tokens=0, mamba_states=0,
                          num_blocks=48, retention_interval=0, max_model_len=400, overlap=async_scheduling)
    return Scenario(f"siblings-{'async' if async_scheduling else 'sync'}", "vllm", 0, "concurrent-hand", True,
                    config, trace_lines(requests))


FIRST_BATCHES = {
    True: [(0, (("a", 224, True), ("b", 32, True))), (1, (("a", 16, True), ("b", 160, True))),
           (2, (("a", 1, False), ("b", 32, True), ("c", 96, True), ("d", 16, True))),
           (3, (("a", 1, False), ("b", 6, True), ("c", 12, True))),
           (4, (("a", 1, False), ("b", 1, False), ("c", 1, False), ("d", 12, True)))],
    False: [(0, (("a", 224, True), ("b", 32, True))), (1, (("a", 16, True), ("b", 160, True))),
            (2, (("a", 1, False), ("b", 32, True), ("c", 96, True), ("d", 16, True))),
            (3, (("a", 1, False), ("b", 6, True), ("c", 12, True), ("d", 12, True))),
            (4, (("a", 1, False), ("b", 1, False), ("c", 1, False), ("d", 1, False)))],
}
NUM_STEPS = {True: 51, False: 50}
PREEMPTED = {True: [(3, ("d",)), (9, ("d",)), (11, ("d",)), (13, ("d",))], False: [(8, ("d",)), (14, ("d",))]}
# (cached tokens, finished at) per request
OUTCOMES = {
    True: {"a": (0, 41), "b": (0, 33), "c": (192, 43), "d": (192, 51), "e": (0, 51)},
    False: {"a": (0, 41), "b": (0, 33), "c": (192, 43), "d": (192, 46), "e": (0, 50)},
}


def outcomes(requests: dict[str, Served]) -> dict[str, tuple[int, int | None]]:
    return {name: (served.cached_tokens, served.finished_at) for name, served in requests.items()}
