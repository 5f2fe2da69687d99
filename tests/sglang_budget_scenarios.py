"""Hand-made scenarios on SGLang's admission and memory budget, each with what SGLang 0.5.23 answered (its real
scheduler, tests/conformance/test_sglang_engine.py runs them again): simulate must answer the same
(tests/test_sglang_admission.py). Outcomes are (cached tokens, served) per request, in serving order.

Every scenario: FULL+SWA (+MAMBA), page 16, W 64, chunks of 64, a 4096-token FULL pool; requests one at a time.
"""
from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, trace_lines


def scenario(components: str, requests: list[dict], **knobs) -> Scenario:
    config = dict(components=components, page_size=16, window=64, track_interval=64, mamba_chunk=64,
                  chunked_prefill_size=64, swa_eviction_interval=128, full_tokens=4096, swa_tokens=4096,
                  mamba_states=64 if "mamba" in components else 0)
    config.update(knobs)
    chained = [dict(r, arrival=0.0) if i == 0 else dict(r, after=requests[i - 1]["id"])
               for i, r in enumerate(requests)]
    return Scenario("hand", "sglang", 0, "hand", True, EngineConfig(**config), trace_lines(chained))


def _request(request_id: str, parts: list[tuple[str, int]], output_len: int) -> dict:
    return {"id": request_id, "prompt": [{"ref": ref, "len": n} for ref, n in parts], "output_len": output_len}


def locked_window(swa_tokens: int) -> Scenario:
    """a (300 in, 2 out) leaves [192, 288) live; b extends it by 40 tokens and decodes 8. b's match (288) locks
    that 96-token window while PrefillAdder checks: the estimate for its 64 paged tokens is
    0 + min(64 + 8, 64) + 16 = 80 SWA tokens, which must be below free + evictable = pool - 96."""
    return scenario("full+swa", [_request("a", [("u", 300)], 2), _request("b", [("u", 300), ("v", 40)], 8)],
                    swa_tokens=swa_tokens)


LOCKED_WINDOW = {176: [(0, True), (0, False)], 192: [(0, True), (288, True)]}


def decode_check(swa_tokens: int) -> Scenario:
    """a (100 in, 200 out, eviction interval 16) holds [0, 96) in the tree, locked by its window, and its own
    decode pages from 96 on. In an 11-page pool the page for position 176 finds none free and nothing
    evictable: check_decode_mem fails before the step's out-of-window free (which would release [96, 112)),
    and SGLang aborts the lone request. With 12 pages it runs; b then reuses a's 96."""
    return scenario("full+swa", [_request("a", [("u", 100)], 200), _request("b", [("u", 100), ("w", 30)], 2)],
                    swa_tokens=swa_tokens, swa_eviction_interval=16)


DECODE_CHECK = {176: [(0, False), (96, True)], 192: [(0, True), (96, True)]}


def budget_before_states() -> Scenario:
    """Five MAMBA states; r1, r2, r3 (70 tokens, done at their prompt) leave a state at 64 each, two stay free.
    b (r3 + 500 tokens, one chunk of 8192) is refused by the SWA budget: its estimate
    (512 - 64) + 64 + 16 = 528 is below the 576-token pool but not below the 576 - 64 that r3's locked window
    leaves. PrefillAdder refuses before prepare_for_extend takes any slot, so no state is evicted and r1 is
    still reusable; r1' then takes three slots and evicts the least recent state, r2's."""
    short = [_request(name, [(name, 70)], 1) for name in ("r1", "r2", "r3")]
    again = [_request(name + "'", [(name, 70), (name + "x", 10)], 1) for name in ("r1", "r2")]
    b = _request("b", [("r3", 70), ("v", 500)], 8)
    return scenario("full+swa+mamba", short + [b] + again, swa_tokens=576, mamba_states=5, chunked_prefill_size=8192)


BUDGET_BEFORE_STATES = [(0, True), (0, True), (0, True), (0, False), (64, True), (0, True)]

# SGLang's answers on the pressure seeds whose disagreements this budget resolved (classes E and F of
# docs/notes/conformance-sglang-findings.md): seed -> (preset "sglang", preset "sglang-retain")
_NO, _OK = False, True
RESOLVED_SEEDS = {
    8: [[(0, _OK), (0, _OK), (0, _NO), (0, _NO), (0, _OK), (256, _OK), (384, _OK)]] * 2,
    17: [[(0, _NO), (0, _NO), (0, _OK), (0, _OK), (0, _NO), (0, _OK)]] * 2,
    52: [[(0, _OK), (0, _NO), (0, _NO), (0, _OK), (0, _NO), (0, _OK), (0, _NO), (0, _OK), (1760, _OK)]] * 2,
    64: [[(0, _OK), (0, _OK), (0, _NO), (0, _NO)]] * 2,
    87: [[(0, _OK), (0, _NO)]] * 2,
    97: [[(0, _OK), (512, _OK), (0, _NO), (640, _OK), (640, _OK)],
         [(0, _OK), (0, _NO), (0, _NO), (640, _OK), (640, _OK)]],
    165: [[(0, _OK), (0, _NO)]] * 2,
}
PRESETS = ("sglang", "sglang-retain")
