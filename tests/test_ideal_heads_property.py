"""The ideal reuse from the sequences' shared heads (``stats.SHARED_HEADS``: a request's tail of tokens no other
request holds is never inserted) equals the reference that inserts every whole prompt + output, request by
request, on generated traces: fan-out groups, multi-turn chains quoting outputs (whole, skipped, cut), refs
named twice in one prompt or at other lengths, closed-loop requests and unrelated prompts. Fixed traces keep
floors on what the heads cut, so a head that cuts nothing would not pass for a correct one."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import sim.trace.stats as stats
from sim.trace import Request, Segment, Trace
from sim.trace.generate import fanout, multiturn


def _ideal(trace: Trace, heads: bool) -> list[int]:
    saved = stats.SHARED_HEADS
    stats.SHARED_HEADS = heads
    try:
        return stats.ideal_cached_tokens(trace)
    finally:
        stats.SHARED_HEADS = saved


def _num_nodes(node: stats._Node) -> int:
    return 1 + sum(_num_nodes(child) for child in node.children.values())


def _trie_nodes(trace: Trace, heads: bool) -> int:
    trie, (shared_refs, quoted) = stats.RunTrie(), stats.shared_refs_and_quoted(trace)
    for request in trace:
        if heads:
            trie.insert(trace.shared_head_seq(request.id, shared_refs, quoted))
        else:
            trie.insert(trace.request_seq(request.id))
    return _num_nodes(trie.root)


@st.composite
def segments(draw, index: int, earlier: list[Request]) -> Segment:
    if earlier and draw(st.integers(0, 3)) == 0:
        target = draw(st.sampled_from(earlier))
        skip = draw(st.integers(0, target.output_len - 1))
        length = draw(st.none() | st.integers(1, target.output_len - skip))
        return Segment(output_of=target.id, skip=skip, len=length)
    ref = draw(st.sampled_from(["sys", "doc", "a", "b", f"own{index}", f"own{index}"]))
    return Segment(ref=ref, len=draw(st.integers(1, 12)))


@st.composite
def traces(draw) -> Trace:
    requests: list[Request] = []
    for index in range(draw(st.integers(1, 12))):
        prompt = [draw(segments(index, requests)) for _ in range(draw(st.integers(1, 5)))]
        output_len = draw(st.integers(1, 8))
        if requests and draw(st.booleans()):
            after = draw(st.sampled_from(requests)).id
            requests.append(Request(id=f"r{index}", after=after, prompt=prompt, output_len=output_len))
        else:
            requests.append(Request(id=f"r{index}", arrival=0.0, prompt=prompt, output_len=output_len))
    return Trace(requests)


@settings(max_examples=400, deadline=None)
@given(traces())
def test_heads_reuse_what_whole_sequences_reuse(trace):
    counts = Counter(segment.ref for request in trace for segment in request.prompt)
    assert stats.shared_refs_and_quoted(trace)[0] == {r for r, n in counts.items() if n > 1 and r is not None}
    assert _ideal(trace, heads=True) == _ideal(trace, heads=False)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5),
    st.integers(1, 6),
    st.integers(1, 40),
    st.integers(1, 20),
    st.integers(1, 20),
    st.booleans(),
)
@example(3, 4, 30, 8, 10, True)
@example(2, 3, 9, 5, 7, False)
def test_generated_traces(num_groups, num_per, system_len, own_len, output_len, shared_system):
    for trace in (
        fanout(num_groups, num_per, system_len, own_len, output_len),
        multiturn(
            num_groups,
            num_per,
            system_len,
            own_len,
            output_len,
            drop_reasoning=output_len // 2,
            shared_system=shared_system,
        ),
    ):
        assert _ideal(trace, heads=True) == _ideal(trace, heads=False)


@pytest.mark.parametrize(
    ("trace", "nodes_whole", "nodes_heads"),
    [
        (fanout(num_groups=4, prompts_per_group=50), 1 + 4 * (1 + 50), 1 + 4),  # a node a group: its system
        # a session's turns extend one another; the last turn's own message and output are in no other request
        (multiturn(num_sessions=3, num_turns=3), 1 + 1 + 3 * 3, 1 + 1 + 3 * 2),
    ],
)
def test_floors_what_the_heads_cut(trace, nodes_whole, nodes_heads):
    assert _trie_nodes(trace, heads=False) == nodes_whole
    assert _trie_nodes(trace, heads=True) == nodes_heads
    assert _ideal(trace, heads=True) == _ideal(trace, heads=False)


def test_a_quoted_output_keeps_its_tail():
    trace = Trace(
        [
            Request(
                id="a",
                arrival=0.0,
                prompt=[Segment(ref="x", len=4), Segment(ref="once", len=3)],
                output_len=5,
            ),
            Request(
                id="b",
                arrival=1.0,
                prompt=[Segment(ref="x", len=4), Segment(ref="once2", len=2), Segment(output_of="a")],
                output_len=2,
            ),
        ]
    )
    shared_refs, quoted = stats.shared_refs_and_quoted(trace)
    assert (shared_refs, quoted) == ({"x"}, {"a"})
    assert len(trace.shared_head_seq("a", shared_refs, quoted)) == 4 + 3 + 5  # its output is quoted: all kept
    assert len(trace.shared_head_seq("b", shared_refs, quoted)) == 4 + 2 + 5  # an output_of run ends the tail
    assert _ideal(trace, heads=True) == _ideal(trace, heads=False) == [0, 4]
