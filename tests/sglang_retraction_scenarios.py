"""A hand-made concurrent scenario where SGLang 0.5.23 re-admits a retracted request beside another one, with
what SGLang answered step by step (its own ``Scheduler.event_loop_overlap`` on CPU,
conformance/engines/sglang_steps.py; tests/conformance/test_sglang_hand_steps.py runs it again,
tests/test_sglang_retraction.py checks that simulate answers the same without SGLang installed). Found as
boundary seed 13 under pressure with ``--schedule-policy lpm``.

FULL + SWA, page 1, window 16, a FULL pool of 488 tokens, LPM. Six requests share a 145-token system prompt;
``r1`` (248 prompt tokens, 71 outputs) is retracted at step 371 after 50 outputs. At step 411 ``r4`` has
finished and the pass re-admits ``r1``, its 50 outputs prefilled again (extend 50): ``add_one_req``'s check
counts the 21 outputs still to come, but the pass is charged ``r1``'s whole ``max_new_tokens``, 71
(``_select_prefill_admission``: ``min(sampling_params.max_new_tokens, CLIP_MAX_NEW_TOKENS)``). The 118 tokens
left do not hold ``r5`` (1 + 132 + 1), which waits for step 412; charging 21 left 168, and ``r5`` went along.
"""

from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, trace_lines


def _request(request_id: str, own_len: int, output_len: int, arrival: int) -> dict:
    prompt = [{"ref": "sys", "len": 145}, {"ref": request_id, "len": own_len}]
    return {"id": request_id, "arrival": float(arrival), "prompt": prompt, "output_len": output_len}


def replayed_outputs() -> Scenario:
    config = EngineConfig("full+swa", 1, 16, 256, 64, 128, 128, full_tokens=488, swa_tokens=146,
                          mamba_states=0, schedule_policy="lpm")
    requests = [_request("r0", 48, 205, 0), _request("r2", 37, 305, 0), _request("r4", 13, 91, 0),
                _request("r1", 103, 71, 1), _request("r5", 1, 132, 1), _request("r3", 15, 141, 2)]
    name = "sglang-replayed-outputs"
    return Scenario(name, "sglang", 0, "concurrent-hand", True, config, trace_lines(requests))


# what SGLang 0.5.23 answered: steps 410-413, each with its batch and the pools after it, ((FULL free, FULL in
# the tree), (SWA free, SWA in the tree)); the retractions; (cached tokens, served, finished at) per request
STEPS = [
    (410, (("r4", 1, False),), ((89, 309), (10, 46))),
    (411, (("r1", 50, True),), ((39, 399), (47, 49))),
    (412, (("r5", 1, True),), ((38, 449), (79, 66))),
    (413, (("r1", 1, False), ("r5", 1, False)), ((36, 450), (77, 67))),
]
RETRACTED = [(371, ("r1",)), (481, ("r3",))]
NUM_STEPS = 637
OUTCOMES = {"r0": (0, True, 206), "r2": (0, False, None), "r4": (145, True, 411), "r1": (145, True, 433),
            "r5": (0, False, None), "r3": (145, True, 637)}
