"""FreeToken 0.2.1's pages audited after a step: the first wrong free, where it happens.

FreeToken frees KV pages twice under concurrent load (docs/notes/conformance-concurrent-findings.md). The
second free only shows the damage: the first one returned pages to the free list while a live request's
page table still named them, and from then on the pools count pages that are in use as free. ``PageAudit``
checks, after every loop iteration that freed anything, that no page on the free list is named by a live
request's page table (its computed tokens, ``[0, cached_len)``) or by a prefix-tree node, and (FULL+SWA)
that every live request's last window of tokens still maps to a live SWA slot (``free_swa`` resets the map
of the pages it frees). A break names the pages, who still holds them and the engine function that freed
them (the audit records each ``CacheManager._free`` and ``free_swa`` with its caller).
"""

from __future__ import annotations

import sys
from typing import Any

_PLUMBING = {"_free", "_free_swa"}  # CacheManager's own free helpers: the caller above them decided the free


class PageAudit:
    """Installed on one engine's ``CacheManager``: records frees, audits live requests and the tree."""

    def __init__(self, cache_manager, names: dict[int, str]):
        self.cm, self.names = cache_manager, names  # names: uid -> the scenario's request id
        self.freed_by: list[tuple[str, str, Any]] = []  # (engine function, "KV" or "SWA", full-pool slots)
        self.live: dict[int, Any] = {}  # uid -> the request's latest Req (one per chunk, then decode)
        self._install()

    def _install(self) -> None:
        cm, audit = self.cm, self
        class_free, region = cm._free, cm.lazy_free_region

        def recording(free):
            def record(indices) -> None:
                audit._record("KV", indices)
                free(indices)

            return record

        def recording_swa(free_swa):
            def record(indices) -> None:  # only the slots that still map to a live SWA slot are freed
                audit._record("SWA", indices[cm.swa_pool.full_to_swa_index_mapping[indices.long()] > 0])
                free_swa(indices)

            return record

        cm._free = recording(class_free)
        cm.lazy_free_region = _RecordedRegion(cm, region, recording)
        if cm.swa_pool is not None:
            cm.swa_pool.free_swa = recording_swa(cm.swa_pool.free_swa)

    def _record(self, kind: str, indices) -> None:
        if len(indices):
            frame = sys._getframe(2)
            while frame.f_back is not None and frame.f_code.co_name in _PLUMBING:
                frame = frame.f_back
            self.freed_by.append((frame.f_code.co_qualname, kind, indices.clone()))

    def launched(self, reqs) -> None:
        for req in reqs:
            self.live[req.uid] = req

    def check(self) -> str | None:
        """Why the engine's pages are broken now, or None; cheap when nothing was freed since the last call."""
        if not self.freed_by:
            return None
        self.live = {uid: req for uid, req in self.live.items() if req.table_idx != -1}
        why = self._free_but_held() or self._swa_unmapped()
        self.freed_by.clear()
        return why

    def _free_but_held(self) -> str | None:
        """One lookup of every held page in the free list's mask; the holder is looked for only on a hit."""
        import torch

        cm, size = self.cm, self.cm.page_size
        free = torch.zeros(cm.num_pages, dtype=torch.bool)
        free[(cm.free_slots // size).long()] = True
        requests = [
            (uid, req, cm.page_table[req.table_idx, : req.cached_len : size])
            for uid, req in self.live.items()
        ]
        nodes = list(_nodes(cm.prefix_cache.root))
        held = [slots for _, _, slots in requests] + [node.value[::size] for _, node in nodes]
        if not held or not free[(torch.cat(held) // size).long()].any():
            return None
        for uid, req, slots in sorted(requests, key=lambda entry: entry[0]):
            wrong = slots[free[(slots // size).long()]] // size
            if len(wrong):
                where = f"request {self.names[uid]}'s page table (its tokens [0, {req.cached_len}))"
                return self._report(wrong, where)
        for start, node in nodes:
            wrong = node.value[::size][free[(node.value[::size] // size).long()]] // size
            if len(wrong):
                return self._report(wrong, f"the tree's node [{start}, {start + node.length})")
        return None

    def _swa_unmapped(self) -> str | None:
        cm = self.cm
        if not cm.is_swa:
            return None
        mapping, window = cm.swa_pool.full_to_swa_index_mapping, cm.sliding_window_size
        for uid, req in sorted(self.live.items()):
            start = max(0, req.cached_len - window)
            slots = cm.page_table[req.table_idx, start : req.cached_len]
            dead = slots[mapping[slots.long()] == 0]
            if len(dead):
                where = f"request {self.names[uid]}'s window [{start}, {req.cached_len})"
                return self._report(dead // cm.page_size, where, "SWA")
        return None

    def _report(self, pages, holder: str, kind: str = "KV") -> str:
        size, what = self.cm.page_size, "KV page(s)" if kind == "KV" else "page(s)' SWA slots"
        wanted = set(pages.tolist())
        callers = sorted(
            {
                name
                for name, freed, slots in self.freed_by
                if freed == kind and wanted & set((slots // size).tolist())
            }
        )
        shown = ", ".join(map(str, sorted(wanted)[:5])) + (", ..." if len(wanted) > 5 else "")
        return (
            f"FreeToken freed {len(wanted)} {what} still in use (pages {shown}), named by {holder}; freed by "
            f"{', '.join(callers) or 'an engine function the audit did not see'}"
        )


class _RecordedRegion:
    """``CacheManager.lazy_free_region`` with its deferred free recorded (a plain context manager: it is
    entered once per processed step)."""

    def __init__(self, cm, region, recording):
        self.cm, self.region, self.recording = cm, region, recording
        self.recorded_free = cm._free  # the recorded class free, put back when the region ends
        self.inner: Any = None

    def __call__(self) -> _RecordedRegion:
        return self

    def __enter__(self) -> None:
        self.inner = self.region()
        self.inner.__enter__()
        self.cm._free = self.recording(self.cm._free)  # the region's own deferred free, recorded

    def __exit__(self, *raised) -> None:
        try:
            self.inner.__exit__(*raised)
        finally:
            self.cm._free = self.recorded_free  # the region's exit deleted the instance attribute


def _nodes(root):
    """Every node below ``root`` with the token position it starts at."""
    stack = [(0, child) for child in root.children.values()]
    while stack:
        start, node = stack.pop()
        yield start, node
        stack.extend((start + node.length, child) for child in node.children.values())
