"""Two runs of the same trace and config told apart by a switch decide alike: their request and step tables and
their summary are equal (the properties that hold a fast path to its reference)."""

from __future__ import annotations


def assert_same_run(result, reference) -> None:
    assert result.requests.equals(reference.requests)
    assert result.steps.equals(reference.steps)
    assert result.summary == reference.summary
