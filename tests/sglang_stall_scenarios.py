"""A hand-made concurrent scenario where a chunked prefill stalls on SGLang 0.5.23 and the client gives up on
it, with what SGLang answered step by step (its own ``Scheduler.event_loop_overlap`` on CPU, driven by
conformance/engines/sglang_steps.py; tests/conformance/test_sglang_hand_steps.py runs it again,
tests/test_sglang_stall.py checks that simulate answers the same without SGLang installed).

FULL + SWA + MAMBA, page 1, window 511, chunks of 64, an SWA pool of 576 tokens. ``e0`` (638 tokens) prefills
nine chunks, 575 tokens, and its next chunk never fits the SWA left: SGLang would wait forever, so the client
aborts it (``_pending_chunked_abort_req``) as soon as one pass with nothing running or in flight admitted
nothing. Its first 512 tokens stay in the tree. ``e0d0`` shares 4 of them and ``e0d1`` 511; ``e0d0``'s second
chunk (step 10) evicts 60 SWA tokens of that abandoned path.

The give-up's timing is the point: every pass of SGLang's idle loop counts towards the waiting-prefix refresh
(``SchedulePolicy._touch_waiting_prefixes``, every 32nd pass), whose match of ``e0d1``'s prefix splits
``e0``'s last node at 511 and re-stamps the path. A client that let the idle loop spin 64 passes (the driver
did) got two refreshes, and step 10 evicted the 63-token node [448, 511) instead: 3 SWA tokens free, 509 in
the tree.
"""

from __future__ import annotations

from conformance.scenario import EngineConfig, Scenario, trace_lines


def stalled_chunk() -> Scenario:
    config = EngineConfig(
        "full+swa+mamba", 1, 511, 128, 64, 64, 128, full_tokens=1925, swa_tokens=576, mamba_states=6
    )
    requests = [
        {"id": "e0", "arrival": 0.0, "prompt": [{"ref": "x0", "len": 638}], "output_len": 102},
        {
            "id": "e0d0",
            "arrival": 1.0,
            "prompt": [{"ref": "x0", "len": 4}, {"ref": "e0d0", "len": 193}],
            "output_len": 9,
        },
        {
            "id": "e0d1",
            "arrival": 1.0,
            "prompt": [{"ref": "x0", "len": 511}, {"ref": "e0d1", "len": 1}],
            "output_len": 52,
        },
    ]
    return Scenario(
        "sglang-stalled-chunk", "sglang", 0, "concurrent-hand", True, config, trace_lines(requests)
    )


# what SGLang 0.5.23 answered: steps 8-12, each with its batch and the pools after it, ((FULL free, FULL in
# the tree), (SWA free, SWA in the tree), (MAMBA free, MAMBA in the tree)): e0's last chunk at step 8, nothing
# at the idle pass, e0d0 from step 9 on
STEPS = [
    (8, (("e0", 63, True),), ((1350, 512), (1, 512), (0, 3))),
    (9, (("e0d0", 64, True),), ((1349, 512), (0, 512), (0, 3))),
    (10, (("e0d0", 64, True),), ((1289, 572), (0, 512), (0, 3))),
    (11, (("e0d0", 64, True),), ((1225, 636), (0, 512), (0, 3))),
    (12, (("e0d0", 5, True),), ((1284, 636), (59, 512), (0, 3))),
]
NUM_STEPS = 80
# (cached tokens, served, finished at) per request: e0 given up on
OUTCOMES = {"e0": (0, False, None), "e0d0": (0, True, 21), "e0d1": (0, True, 80)}
