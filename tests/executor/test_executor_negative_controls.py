"""Negative controls: each deliberately wrong policy is caught by the bitwise check on exactly the requests
its fault reaches, on a trace built so that it does reach them (the probe proves it before the check);
and a correct policy whose reuse sits exactly at the edge is not flagged.

The faults' KL is tiny (a state restored from an earlier checkpoint gave KL ~2e-5 on this model): only
the bitwise criterion, not a tolerance, separates them from a correct restore.
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from cache_probe import CacheProbe, Hit  # noqa: E402

from executor.execute import execute  # noqa: E402
from sim.run.simulate import SimConfig  # noqa: E402
from sim.trace import Request, Segment, Trace  # noqa: E402
from sim.trace.generate import s1, s3  # noqa: E402

SGLANG_KNOBS = dict(page_size=16, track_interval=32, swa_eviction_interval=16)
FREETOKEN_KNOBS = dict(page_size=1, track_interval=16, swa_eviction_interval=1)


def _s1(prompt_len: int = 150, output_len: int = 100):
    # 150 + 100: second turns hit the decode checkpoint at 224, and with retain SWA is live from
    # 224 - W = 160 exactly (the tiny model's W is 64). 50 + 20: they hit 64, a prefill checkpoint sits at 48
    return s1(num_prompts=2, prompt_len=prompt_len, output_len=output_len)


def _s3_append(system_len: int, output_len: int):
    # r2 = r1's prompt + its output + 10 tokens. 200 + 8: r2 hits r1's prefill checkpoint at 208.
    return s3(system_len=system_len, user_len=10, output_len=output_len, mode="append")


def _freetoken_cut(kept_outputs: int):
    # FreeToken on a FULL + SWA model (page 1, frees every step): r1 = 126-token prompt + 100 outputs; its
    # last free leaves SWA live from 224 - W - 1 = 159 (below: tombstone down to its commit at 127). r2 =
    # r1's prompt + the first `kept_outputs` outputs + 10 tokens: it hits at 126 + kept, with kept - 33
    # live tokens before it: 97 gives exactly W = 64, 96 one short
    prompt = [Segment(ref="sys", len=116), Segment(ref="user", len=10)]
    return Trace([Request(id="r1", arrival=0.0, prompt=prompt, output_len=100),
                  Request(id="r2", after="r1", prompt=prompt + [Segment(output_of="r1", len=kept_outputs),
                                                                Segment(ref="next", len=10)], output_len=8)])


def _run(trace, policy: str, knobs: dict, device: str):
    model = "tiny-swa" if policy.startswith(("freetoken", "broken-freetoken")) else "tiny"
    config = SimConfig(policy=policy, model=model, gpu="cpu", knobs=knobs, pool_tokens=20_000, mamba_states=64)
    return execute(trace, config, device=device, kernels="torch")


CONTROLS = {
    # policy: (trace, knobs, the hits the fault reaches: (request, matched length, state saved at, SWA margin))
    "broken-retain-short": (_s1, SGLANG_KNOBS, {("p0-t2", 224, 224, -16), ("p1-t2", 224, 224, -16)}),
    "broken-stale-state": (lambda: _s1(50, 20), SGLANG_KNOBS, {("p0-t2", 64, 48, 0), ("p1-t2", 64, 48, 0)}),
    "broken-early-checkpoint": (lambda: _s3_append(200, 8), SGLANG_KNOBS, {("r2", 208, 207, 16)}),
    "broken-freetoken-window-short": (lambda: _freetoken_cut(96), FREETOKEN_KNOBS, {("r2", 222, None, -1)}),
}


def _reached(hits: dict[str, Hit]) -> set[tuple]:
    return {(h.request_id, h.cached_len, h.state_saved_at, h.swa_margin) for h in hits.values() if h.cannot_be_exact}


@pytest.mark.interpreted  # its probe patches the manager, compiled under HYBRIDCACHE_COMPILED
@pytest.mark.parametrize("policy", list(CONTROLS))
def test_negative_control_is_caught_on_exactly_the_requests_its_fault_reaches(monkeypatch, device, policy):
    make_trace, knobs, reached = CONTROLS[policy]
    probe = CacheProbe(monkeypatch)
    result = _run(make_trace(), policy, knobs, device)
    assert _reached(probe.hits) == reached  # the trace exercises the fault, on these requests only
    flagged = {hit[0] for hit in reached}
    summary = result.summary
    assert set(summary["not_bit_exact_ids"]) == flagged
    assert summary["requests_not_bit_exact"] == len(flagged) < summary["requests_checked"]
    swa_fault = any(hit[3] < 0 for hit in reached)
    assert set(summary["relies_on_freed_window_ids"]) == (flagged if swa_fault else set())
    assert summary["logprob_max_abs_diff"] > 0


TIGHT = {
    # a correct policy, reuse exactly at the edge: W live SWA tokens, the state saved at the matched length
    "sglang-retain": (_s1, SGLANG_KNOBS, {"p0-t2", "p1-t2"}),
    "freetoken-lazy": (lambda: _freetoken_cut(97), FREETOKEN_KNOBS, {"r2"}),
}


@pytest.mark.interpreted  # its probe patches the manager, compiled under HYBRIDCACHE_COMPILED
@pytest.mark.parametrize("policy", list(TIGHT))
def test_a_correct_policy_at_the_edge_is_bit_exact(monkeypatch, device, policy):
    make_trace, knobs, at_edge = TIGHT[policy]
    probe = CacheProbe(monkeypatch)
    result = _run(make_trace(), policy, knobs, device)
    edge = {h.request_id for h in probe.hits.values()
            if h.swa_margin == 0 and h.swa_live_from > 0 and h.state_saved_at in (None, h.cached_len)}
    assert edge == at_edge and not probe.predicted_not_exact()
    summary = result.summary
    assert summary["requests_not_bit_exact"] == 0 and summary["not_bit_exact_ids"] == []
    assert summary["logprob_max_abs_diff"] == 0.0 and summary["kl_max"] == 0.0
    assert summary["requests_reusing"] == len(at_edge) and summary["requests_checked"] == summary["requests"]


def test_the_early_checkpoint_trace_is_bit_exact_under_the_correct_policy(device):
    """The control's twin: the same trace and hit under sglang-retain, so r2's flag is the fault's alone."""
    result = _run(_s3_append(200, 8), "sglang-retain", SGLANG_KNOBS, device)
    assert result.summary["requests_not_bit_exact"] == 0
    assert result.requests.set_index("id").loc["r2", "cached_tokens"] == 208
