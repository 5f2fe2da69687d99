"""A chunk's key cut from the run holding it (``marconi_vllm_direct.chunk_key``) is ``TokenSeq.slice``'s:
the same runs, the same length, and the sequence itself for the whole of it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache.engines.marconi_vllm_direct import chunk_key
from sim.tokens import TokenSeq

runs = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 50), st.integers(1, 70)), min_size=1, max_size=6)


@st.composite
def cuts(draw):
    tokens = TokenSeq(draw(runs))
    page = draw(st.sampled_from([1, 2, 16, 32, 64]))
    start = draw(st.integers(0, len(tokens) - 1))
    if draw(st.booleans()):  # page-aligned chunks, as vLLM+ takes them
        start -= start % page
        end = min(start + page, len(tokens))
    else:
        end = draw(st.integers(start + 1, len(tokens)))
    return tokens, start, end


@settings(max_examples=600, deadline=None, derandomize=True)
@given(cuts())
def test_chunk_key_is_the_slice(cut):
    tokens, start, end = cut
    key, sliced = chunk_key(tokens, start, end), tokens.slice(start, end)
    assert key.runs == sliced.runs and key.length == sliced.length == end - start
    assert (key is tokens) == (sliced is tokens)
