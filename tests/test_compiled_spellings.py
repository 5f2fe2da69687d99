"""The natively typed spellings the compiled core runs equal the plain rules they replace: a node's stamp read
and set by component (``getattr`` / ``setattr`` by the component's attribute name, as before) and a token
sequence's run starts (the running sum of its run lengths, as ``accumulate`` gave it)."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given
from hypothesis import strategies as st

from sim.cache.components import Component
from sim.cache.eviction import set_stamp, stamp_of
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq
from sim.trace.records import Segment

RUNS = st.lists(
    st.tuples(st.sampled_from(["r:a", "r:b", "o:x"]), st.integers(0, 50), st.integers(0, 40)), max_size=12
)


@given(RUNS, st.integers(0, 200), st.integers(0, 200))
def test_run_starts_are_the_running_sum_of_the_run_lengths(raw, start, end):
    for seq in (TokenSeq(raw), TokenSeq(raw).slice(start, end)):
        lengths = [run[2] for run in seq.runs]
        assert seq._run_starts() == (list(accumulate(lengths[:-1], initial=0)) if lengths else [])
        assert seq._run_starts() is seq._run_starts()  # kept on the sequence


@given(st.sampled_from(list(Component)), st.integers(0, 1 << 40))
def test_a_stamp_by_component_is_the_attribute_it_names(comp, stamp):
    root = RadixTree(4, Pool("full", 0), Pool("swa", 0), Pool("state", 0)).root
    node = Node(TokenSeq.of("r:a", 4), 0, root, [1], [2], 3)
    set_stamp(node, comp, stamp)
    assert getattr(node, comp.stamp) == stamp == stamp_of(node, comp)
    for other in Component:
        if other is not comp:
            assert getattr(node, other.stamp) == stamp_of(node, other) == 0


SEGMENTS = st.builds(
    Segment,
    ref=st.none() | st.sampled_from(["s", "t"]),
    len=st.none() | st.integers(1, 50),
    output_of=st.none() | st.just("a"),
    skip=st.integers(0, 20),
)


@given(SEGMENTS)
def test_a_segment_unpacked_is_its_fields_by_name(segment):
    # ``trace._segment_run`` unpacks a segment (a tuple's items are read natively when compiled): the order
    # must stay the fields' order
    ref, length, output_of, skip = segment
    assert (ref, length, output_of, skip) == (segment.ref, segment.len, segment.output_of, segment.skip)
