"""An insert cuts its new nodes' keys from the request's tokens (``insert.KEYS_FROM_TOKENS``), not from a slice of
``[depth, end)`` cut first (the reference): a window-capped insert's two or three keys are the same runs either
way. Held: a cut of a cut against the one cut on generated sequences, and caches run request by request with
the switch on and off, every node's key, edge and pages compared after every request.
"""

from __future__ import annotations

from unittest import mock

import pytest
from cache_helpers import hybrid_model
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_anonymous_pages import decisions, request_lists, run_request

from sim.cache import insert as insert_module
from sim.cache.sizing import PoolSizes
from sim.engines.registry import make_manager, make_policy
from sim.tokens import TokenSeq


@st.composite
def sequences_and_cuts(draw):
    """A sequence of a few runs (some of one source, so that merges happen) and ``[a, b)`` then ``[c, d)`` in it."""
    runs = draw(
        st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 40), st.integers(1, 30)), max_size=8)
    )
    tokens = TokenSeq(runs)
    a = draw(st.integers(0, len(tokens)))
    b = draw(st.integers(a, len(tokens)))
    c = draw(st.integers(0, b - a))
    return tokens, a, b, c, draw(st.integers(c, b - a))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(sequences_and_cuts())
def test_a_cut_of_a_cut_is_the_one_cut(drawn):
    tokens, a, b, c, d = drawn
    twice, once = tokens.slice(a, b).slice(c, d), tokens.slice(a + c, a + d)
    assert twice.runs == once.runs and len(twice) == len(once) == d - c


@st.composite
def swa_caches(draw):
    """Marconi or SGLang caches with SWA (the window caps a new leaf) and pools a few requests deep."""
    page = draw(st.sampled_from([1, 1, 2, 16]))
    preset = draw(st.sampled_from(["marconi", "marconi-sglang", "sglang-retain"]))
    knobs = dict(page_size=page, chunked_prefill_size=page * draw(st.integers(1, 6)))
    model = hybrid_model(swa=True, mamba=draw(st.booleans()), window=draw(st.integers(17, 90)))
    tokens_per_pool = draw(st.integers(6, 60)) * 16
    sizes = PoolSizes(-(-tokens_per_pool // page), -(-tokens_per_pool // page), draw(st.integers(3, 12)))
    return preset, model, knobs, sizes


def keys(manager) -> tuple:
    return tuple((n.start, n.end, n.key.runs, n.edge) for n in manager.tree.nodes())


CAPPED: list[int] = []  # new keys longer than the window (cut in two or three) over the fixed examples


def _counting_add_new(real):
    def counted(tree, req, parent, tokens, at, key_len, full, swa, window, has_swa):
        CAPPED.append(has_swa and key_len > window)
        return real(tree, req, parent, tokens, at, key_len, full, swa, window, has_swa)

    return counted


FIXED = [  # SWA windows shorter than the requests' own parts: most new keys are capped
    (
        (
            "marconi",
            hybrid_model(window=20),
            dict(page_size=1, chunked_prefill_size=64),
            PoolSizes(400, 400, 8),
        ),
        [(0, 100, 150, 30), (0, 100, 120, 40), (1, 0, 200, 20), (0, 150, 90, 60), (1, 30, 180, 10)],
    ),
    (
        (
            "sglang-retain",
            hybrid_model(mamba=False, window=32),
            dict(page_size=16, chunked_prefill_size=32),
            PoolSizes(40, 40, 8),
        ),
        [(0, 96, 160, 40), (0, 96, 130, 20), (1, 0, 200, 50), (0, 120, 60, 30)],
    ),
]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(swa_caches(), request_lists(10))
@example(*FIXED[0])
@example(*FIXED[1])
def test_caches_insert_the_same_keys(configuration, requests):
    preset, model, knobs, sizes = configuration
    logs = []
    for on in (True, False):
        cache, log = make_manager(model, make_policy(preset, **knobs), sizes), []
        with mock.patch.object(insert_module, "KEYS_FROM_TOKENS", on):
            for index, request in enumerate(requests):
                hit = run_request(cache, index, request, knobs["chunked_prefill_size"])
                log.append((hit, keys(cache), decisions(cache) if preset.startswith("marconi") else ()))
        logs.append(log)
    assert logs[0] == logs[1]


@pytest.mark.interpreted  # counts the calls of a module function the compiled core calls natively
def test_the_fixed_examples_cut_capped_keys():
    """A floor on the fixed examples alone: new keys over the window, cut in two or three."""
    CAPPED.clear()
    with mock.patch.object(insert_module, "_add_new", _counting_add_new(insert_module._add_new)):
        for configuration, requests in FIXED:
            test_caches_insert_the_same_keys.hypothesis.inner_test(configuration, requests)
    assert sum(CAPPED) >= 8, CAPPED
