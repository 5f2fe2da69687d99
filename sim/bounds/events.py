"""What a run did, as the bounds see it: each request's lookup, and the pages each request computed.

A ``Lookup`` is a request's admission: its match may cover the first ``key_pages`` pages of its prompt (the
key ``page_floor(prompt_len - 1)``: the last prompt token is always recomputed); ``counted`` marks the
lookup whose match the request's row reports (its last admission). A ``Produce`` is a request computing
pages ``[first_page, end_page)`` of its prompt + output: from then on a cache could keep them (a page counts
as produced when it is first allocated, and only if the request will fill it).

Replay mode: each request's lookup, then every page it computes. Timed mode: recorded step by step by
``recorder.EventRecorder`` (a request's decode pages between two lookups as one run).
"""

from __future__ import annotations

from typing import NamedTuple

from sim.trace import Trace


class Lookup(NamedTuple):
    request_id: str
    key_pages: int
    counted: bool


class Produce(NamedTuple):
    request_id: str
    first_page: int
    end_page: int


def key_pages(prompt_len: int, page_size: int) -> int:
    return max(prompt_len - 1, 0) // page_size


def computed_pages(trace: Trace, request_id: str, page_size: int) -> int:
    """Whole pages of what the request computes: its prompt and all its output but the last token."""
    return (trace.prompt_len(request_id) + trace.request(request_id).output_len - 1) // page_size


def replay_events(
    trace: Trace, order: list[str], served: set[str], admitted: set[str], page_size: int
) -> list:
    """Replay mode: requests one after another in ``order``; an admitted request that was not served (the
    pools refused it part-way) still counts as having computed its pages (a superset of what it did)."""
    events: list = []
    for request_id in order:
        if request_id not in admitted:
            continue
        events.append(
            Lookup(request_id, key_pages(trace.prompt_len(request_id), page_size), request_id in served)
        )
        events.append(Produce(request_id, 0, computed_pages(trace, request_id, page_size)))
    return events
