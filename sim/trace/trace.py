"""A ``Trace``: the checked, indexed set of a file's requests (docs/trace-format.md). A ``Trace`` is always valid:
its constructor checks every rule, so a loaded, generated or imported trace can be used without further
checks, and a bad one is never half-built."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import cast

from sim.compiled_core import mypyc_attr
from sim.tokens import Run, TokenSeq, output_source, ref_source
from sim.trace.checks import check_requests
from sim.trace.records import Request, Segment


# compiled, it stays a plain Python class: the ideal's cache holds traces by weak reference, and grids pickle them
@mypyc_attr(native_class=False)
class Trace:
    """Requests in file order, looked up by id. Every `after`/`output_of` target comes earlier."""

    def __init__(
        self, requests: Iterable[Request], *, path: str = "<trace>", line_numbers: Sequence[int] | None = None
    ):
        self.requests: tuple[Request, ...] = tuple(requests)
        lines = list(line_numbers) if line_numbers is not None else range(1, len(self.requests) + 1)
        self._by_id, self._prompt_len = check_requests(self.requests, path, lines)

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self) -> Iterator[Request]:
        return iter(self.requests)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._by_id

    def request(self, request_id: str) -> Request:
        return self._by_id[request_id]

    def prompt_len(self, request_id: str) -> int:
        return self._prompt_len[request_id]

    def open_loop(self) -> list[Request]:
        """Requests with an arrival time, in arrival order (the checker requires the file to be so)."""
        return [r for r in self.requests if r.after is None]

    def followers(self) -> dict[str, list[str]]:
        """Request id -> the closed-loop requests sent after it finishes, in file order."""
        out: dict[str, list[str]] = {}
        for request in self.requests:
            if request.after is not None:
                out.setdefault(request.after, []).append(request.id)
        return out

    def segment_run(self, segment: Segment) -> Run:
        return _segment_run(self._by_id, segment)

    def prompt_seq(self, request_id: str) -> TokenSeq:
        return TokenSeq([self.segment_run(s) for s in self._by_id[request_id].prompt])

    def output_seq(self, request_id: str) -> TokenSeq:
        return TokenSeq.of(output_source(request_id), self._by_id[request_id].output_len)

    def request_seq(self, request_id: str) -> TokenSeq:
        """The prompt followed by the request's own output: what its KV will hold."""
        by_id = self._by_id
        request = by_id[request_id]
        runs: list[Run] = []
        all_refs = True
        for segment in request.prompt:  # a loop over a module function: compiled, no Python call per segment
            runs.append(_segment_run(by_id, segment))
            all_refs = all_refs and segment[0] is not None  # ``segment.ref``, read natively
        runs.append((output_source(request_id), 0, request.output_len))
        if all_refs:
            # ref runs start at offset 0 with len > 0 (checked), so no two of them, and not the
            # request's own output after them, can merge: the runs are normal already
            return TokenSeq._trusted(tuple(runs), self._prompt_len[request_id] + request.output_len)
        return TokenSeq(runs)

    def shared_head_seq(self, request_id: str, shared_refs: set[str], quoted: set[str]) -> TokenSeq:
        """``request_seq`` without its tail of tokens no other request holds: runs of refs not in ``shared_refs``
        and the request's own output unless ``quoted`` (the ids some prompt quotes) holds it. An ``output_of``
        run is always shared: its request holds it too."""
        by_id = self._by_id
        request = by_id[request_id]
        prompt = request.prompt
        num_head = len(prompt)
        own_output = request_id in quoted
        if not own_output:
            while num_head:  # the tail's runs are never made
                ref = prompt[num_head - 1][0]
                if ref is None or ref in shared_refs:
                    break
                num_head -= 1
        runs: list[Run] = []
        length, all_refs = 0, True
        for index in range(num_head):  # as ``request_seq``: segments read natively when compiled
            segment = prompt[index]
            run = _segment_run(by_id, segment)
            runs.append(run)
            length += run[2]
            all_refs = all_refs and segment[0] is not None
        if own_output:
            runs.append((output_source(request_id), 0, request.output_len))
            length += request.output_len
        # all refs: normal already (see ``request_seq``); else merged again (outputs' runs may join)
        return TokenSeq._trusted(tuple(runs), length) if all_refs else TokenSeq(runs)


def _segment_run(by_id: dict[str, Request], segment: Segment) -> Run:
    # unpacked, not read by name: the compiled core reads a tuple's items natively, a NamedTuple's names not
    ref, length, output_of, skip = segment
    # casts: the checker (checks.py) let in only ref segments with a len and, else, an output_of segment
    if ref is not None:
        return (ref_source(ref), 0, cast(int, length))
    target = cast(str, output_of)
    target_len = by_id[target].output_len
    return (output_source(target), skip, target_len - skip if length is None else length)
