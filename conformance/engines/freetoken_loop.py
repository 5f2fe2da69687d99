"""The driver's copy of FreeToken's scheduler loop, around FreeToken's own scheduler methods.

Per iteration, as ``Scheduler.overlap_loop`` (the default) or ``Scheduler.normal_loop``
(``FREETOKEN_DISABLE_OVERLAP_SCHEDULING``): ``_schedule_next_batch`` (real: the prefill manager's
``PrefillAdder``, else the decode manager) -> the driver's ``_prepare_batch`` (the cache part of the real
one: ``_forward_iter += 1``; decode: ``maybe_free_swa_out_of_window`` then ``decode_batch_idx += 1``;
prefill: ``free_swa_out_of_window_extend``; then ``allocate_paged``; GDN prefill: ``build_fla_metadata``,
which picks the state snapshot) -> ``_restore_linear_states`` (real) -> the fake forward ->
``_process_last_data`` (real: the prefill commit ``cache_req(finished=False)``, the finish
``_free_req_resources`` -> ``cache_req(finished=True)``). The overlap loop launches the next batch
before it processes the previous one's result; the plain loop processes each batch right after it.
"""

from __future__ import annotations

import functools

from conformance.engines.freetoken_engine import FreeTokenEngine
from conformance.scenario import EngineOutcome, ServedRequest


class DriverError(Exception):
    """The driver itself went wrong (not FreeToken): never reported as an engine outcome."""


class _CopyDone:
    """The forward's device-to-host copy event: on CPU there is nothing to wait for."""

    def synchronize(self) -> None:
        pass


def serve_all(
    engine: FreeTokenEngine, requests: list[ServedRequest], overlap: bool
) -> dict[str, EngineOutcome]:
    """Serve the requests one after another, each to completion, on one engine."""
    scheduler = engine.scheduler
    outputs: dict[int, list[int]] = {}
    forward = functools.partial(_fake_forward, scheduler, outputs)
    scheduler._prepare_batch = functools.partial(_prepare_batch, scheduler)
    outcomes: dict[str, EngineOutcome] = {}
    crashed_on = None
    for uid, request in enumerate(requests, start=1):
        if crashed_on is not None:
            outcomes[request.request_id] = EngineOutcome(
                0, False, f"not run: FreeToken raised on {crashed_on}"
            )
            continue
        outputs[uid] = request.output
        try:
            outcomes[request.request_id] = _serve_one(engine, uid, request, overlap, forward)
        except (AssertionError, RuntimeError) as error:  # an engine that raises here is down
            outcomes[request.request_id] = EngineOutcome(
                0, False, f"FreeToken raised {type(error).__name__}: {error}"
            )
            crashed_on = request.request_id
    return outcomes


def _serve_one(
    engine: FreeTokenEngine, uid: int, request: ServedRequest, overlap: bool, forward
) -> EngineOutcome:
    import torch
    from freetoken.core import SamplingParams
    from freetoken.message import UserMsg

    scheduler = engine.scheduler
    scheduler.run_when_idle()  # what the idle scheduler does before it blocks on the next message
    engine.replies.clear()
    params = SamplingParams(max_tokens=len(request.output), ignore_eos=True)
    scheduler._process_one_msg(UserMsg(uid, torch.tensor(request.prompt, dtype=torch.int32), params))
    stalled = _run_until_idle(
        scheduler, overlap, forward, limit=4 * (len(request.prompt) + len(request.output))
    )
    if stalled:
        from freetoken.message import AbortBackendMsg

        note = _stall_note(engine, request)
        scheduler._process_one_msg(AbortBackendMsg(uid))  # the client gives up; FreeToken frees it
        scheduler._flush_abort_acks()
        return EngineOutcome(0, False, note)
    return _outcome(engine.replies, uid, request)


def _run_until_idle(scheduler, overlap: bool, forward, limit: int) -> bool:
    """Iterate the loop until nothing is pending, running or in flight; True if it stalls instead (a
    pending request that no pass admits, with nothing else that could change the pools)."""
    last_data = None
    for _ in range(limit + 8):
        in_flight = last_data is not None
        if not (in_flight or scheduler.prefill_manager.runnable or scheduler.decode_manager.runnable):
            return False
        if overlap:
            last_data = _overlap_iteration(scheduler, last_data, forward)
            launched = last_data is not None
        else:
            launched = _normal_iteration(scheduler, forward)
        if not launched and not in_flight and scheduler.prefill_manager.runnable:
            return True
    raise DriverError(f"the loop made no end after {limit + 8} iterations")


def _overlap_iteration(scheduler, last_data, forward):
    """``Scheduler.overlap_loop`` without streams and messages: launch the next batch, then drain the last."""
    scheduler._last_data = last_data
    forward_input = scheduler._schedule_next_batch()
    ongoing = None
    if forward_input is not None:
        scheduler._restore_linear_states(forward_input.batch)
        ongoing = (forward_input, forward(forward_input))
    scheduler._process_last_data(last_data)
    scheduler._flush_abort_acks()
    return ongoing


def _normal_iteration(scheduler, forward) -> bool:
    """``Scheduler.normal_loop``: launch a batch and process its result at once."""
    forward_input = scheduler._schedule_next_batch()
    ongoing = None
    if forward_input is not None:
        scheduler._restore_linear_states(forward_input.batch)
        ongoing = (forward_input, forward(forward_input))
    scheduler._process_last_data(ongoing)
    scheduler._flush_abort_acks()
    return ongoing is not None


def _prepare_batch(scheduler, batch):
    """The cache-policy steps of ``Scheduler._prepare_batch``, in its order (positions, input/output
    mappings, attention metadata and sampling arguments feed only the model forward)."""
    from freetoken.scheduler.scheduler import ForwardInput

    cache_manager = scheduler.cache_manager
    batch.padded_reqs = batch.reqs  # GraphRunner.pad_batch without CUDA graphs: no padding
    scheduler._forward_iter += 1
    if batch.is_decode:
        cache_manager.maybe_free_swa_out_of_window(batch.reqs, forward_iter=scheduler._forward_iter)
        for req in batch.reqs:
            req.decode_batch_idx += 1
    else:
        cache_manager.free_swa_out_of_window_extend(batch.reqs)
    cache_manager.allocate_paged(batch.reqs)
    if cache_manager.is_hybrid and batch.is_prefill:
        from freetoken.attention.linear import build_fla_metadata

        batch.fla_metadata = build_fla_metadata(batch, scheduler.device)  # marks each GDN snapshot
    return ForwardInput(batch=batch, sample_args=None, input_tuple=None, write_tuple=None)


def _fake_forward(scheduler, outputs: dict[int, list[int]], forward_input):
    """``Scheduler._forward`` with ``Engine.forward_batch``'s bookkeeping and no model: each request
    advances one step (``complete_one``) and "samples" the scenario's next output token."""
    import torch
    from freetoken.engine.engine import ForwardOutput

    batch = forward_input.batch
    for req in batch.reqs:
        req.complete_one()
    tokens = [_teacher_token(req, outputs) for req in batch.reqs]
    scheduler.decode_manager.filter_reqs(batch.reqs)
    return ForwardOutput(None, torch.tensor(tokens, dtype=torch.int32), _CopyDone())


def _teacher_token(req, outputs: dict[int, list[int]]) -> int:
    index = req.cached_len - req.prompt_len  # the sampled token's position, after the prompt
    if index < 0:
        return 0  # an intermediate prefill chunk: FreeToken drops its sample
    return outputs[req.uid][index]


def _outcome(replies: list, uid: int, request: ServedRequest) -> EngineOutcome:
    from freetoken.message import DetokenizeMsg, ErrorReplyMsg, PromptAdmittedMsg

    mine = [reply for reply in replies if getattr(reply, "uid", None) == uid]
    errors = [reply.error for reply in mine if isinstance(reply, ErrorReplyMsg)]
    if errors:
        return EngineOutcome(0, False, f"FreeToken refused it: {errors[0]}")
    admitted = [reply.cached_tokens for reply in mine if isinstance(reply, PromptAdmittedMsg)]
    tokens = [reply for reply in mine if isinstance(reply, DetokenizeMsg)]
    if len(admitted) != 1 or not tokens or not tokens[-1].finished:
        raise DriverError(f"{request.request_id} ended without one admission and a finish")
    note = "" if len(tokens) == len(request.output) else f"max_tokens cut to {len(tokens)}"
    return EngineOutcome(admitted[0], True, note)


def _stall_note(engine: FreeTokenEngine, request: ServedRequest) -> str:
    cache_manager = engine.cache_manager
    pending = engine.scheduler.prefill_manager.pending_list[0]
    where = "admitted, then no pass backs its next chunk" if pending.chunked_req else "no pass admits it"
    pools = [f"FULL {cache_manager.available_size} available"]
    if cache_manager.is_swa:
        pools.append(f"SWA {cache_manager.swa_available_size} available")
    if cache_manager.is_hybrid:
        pools.append(f"GDN states {cache_manager.mamba_available_size} available (3 needed)")
    return (
        f"never finished: {where} (prompt {len(request.prompt)} + output {len(request.output)} tokens; "
        f"{', '.join(pools)})"
    )
