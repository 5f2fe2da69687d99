"""Scheduling passes and processed steps, as the radix manager sees them (mixed into ``CacheManager``).

A scheduling pass is one engine step's admissions and chunks: an engine whose admission reserves per pass
(SGLang's and FreeToken's ``PrefillAdder``) resets its accounts when a pass begins. A caller that drives the
lifecycle by hand gets a pass begun for it at its first admission or chunk after a step completed. An overlap
loop processes a step after it launched the next: ``settle`` commits what the rules held back until then.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from sim.cache.page_chunks import PageChunks


class SchedulingPasses(PageChunks):
    """The last of ``CacheManager``'s bases (one line of classes, as the compiled core takes single
    inheritance only): uses its ``rules`` (whose begin_pass() and settle() take the manager itself) and
    ``requests``."""

    def begin_pass(self, in_flight: AbstractSet[str] = frozenset()) -> None:
        """A scheduling pass starts (``in_flight``: requests whose last step an overlap loop launched but has
        not processed)."""
        self.rules.begin_pass(self, in_flight)
        self._pass_open = True

    def settle(self, request_id: str, in_flight: int) -> None:
        """An overlap loop processed a step of this request after it launched the next one: commit what the
        rules held back until then (``in_flight``: the request's tokens that next step computes)."""
        req = self.requests[request_id]
        if req.commit_pending:
            req.commit_pending = False
            self.rules.settle(self, req, in_flight)

    def _ensure_pass(self) -> None:
        if not self._pass_open:
            self.begin_pass()
