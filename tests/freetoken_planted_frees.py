"""FreeToken runs with a free planted into them, for tests/conformance/test_freetoken_first_free.py: each function
runs in the process that runs FreeToken (``conformance.isolated.call_beside``) and returns how the run broke,
``(message, step clock, steps before)``, or None if it did not."""

from __future__ import annotations

from conformance.engines import freetoken
from conformance.engines.freetoken_audit import PageAudit, _nodes
from conformance.engines.freetoken_steps import _StepLoop
from conformance.trajectory import EngineCorrupt
from tests import freetoken_concurrent_scenarios as hand


def without_audit(lead: int):
    """``double_free(lead)`` with only the free list's duplicates checked (the second free)."""
    check = PageAudit.check
    PageAudit.check = lambda self: None
    try:
        return _broken(hand.double_free(lead))
    finally:
        PageAudit.check = check


def planted(kind: str, after_steps: int):
    """A run FreeToken gets right with one wrong free planted right after its ``after_steps``-th step: ``page``
    (a live request's first KV page, ``siblings``), ``swa`` (the SWA slot of a live request's last token,
    ``double_free(lead=3)``), ``tree`` (a page of a tree node no live request names, ``siblings``) or ``none``."""
    free = {"page": _page_free, "swa": _swa_free, "tree": _tree_free, "none": lambda loop: None}[kind]
    process = _StepLoop._process

    def processed(loop, data) -> None:
        process(loop, data)
        if len(loop.steps) == after_steps and not getattr(loop, "planted", False):
            loop.planted = True
            free(loop)

    _StepLoop._process = processed
    try:
        return _broken(hand.double_free(3) if kind == "swa" else hand.siblings(False))
    finally:
        _StepLoop._process = process


def _broken(scenario):
    try:
        freetoken.run_steps(scenario, "freetoken")
    except EngineCorrupt as error:
        return str(error), error.at, len(error.steps)
    return None


def _live(loop):
    return next(req for _, req in sorted(loop.audit.live.items()) if req.table_idx != -1)


def _page_free(loop) -> None:
    cm = loop.engine.cache_manager
    cm._free(cm.page_table[_live(loop).table_idx, : cm.page_size])


def _swa_free(loop) -> None:
    cm, req = loop.engine.cache_manager, _live(loop)
    cm.swa_pool.free_swa(cm.page_table[req.table_idx, req.cached_len - 1 : req.cached_len])


def _tree_free(loop) -> None:
    cm = loop.engine.cache_manager
    held = {
        int(slot)
        for req in loop.audit.live.values()
        if req.table_idx != -1
        for slot in cm.page_table[req.table_idx, : req.cached_len]
    }
    node = next(node for _, node in _nodes(cm.prefix_cache.root) if int(node.value[0]) not in held)
    cm._free(node.value[: cm.page_size])
