"""Decode runs drawn for the settled steps' properties (``sim/cost/decode_run_settled.py``): every model,
contexts below, around and past its window (so runs settle anywhere, or never within the run), horizons that
cut the run before, at or after it settles; and the floats compared bit for bit."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from sim.models import get_model

MODELS = ["inkling", "gemma-4-26b-a4b", "qwen3-next", "gpt-oss-20b", "tiny"]


def float_bits(values: list[float]) -> list[bytes]:
    return [struct.pack("<d", value) for value in values]


@st.composite
def settled_runs(draw, now_at_zero: bool = False):
    """(model name, contexts, now, horizon, max steps); ``now_at_zero``: the clock's start drawn too."""
    model = get_model(draw(st.sampled_from(MODELS)))
    near = max(model.window, 1)
    context = st.one_of(
        st.integers(0, 3 * near), st.integers(max(near - 60, 0), near + 60), st.integers(0, 20)
    )
    contexts = tuple(draw(st.lists(context, min_size=1, max_size=10)))
    later = st.floats(0, 1e4, allow_nan=False)
    now = draw(st.one_of(st.just(0), later) if now_at_zero else later)
    horizon = draw(st.one_of(st.just(float("inf")), st.floats(0, 3.0).map(lambda span: now + span)))
    return model.name, contexts, now, horizon, draw(st.integers(0, 900))
