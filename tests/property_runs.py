"""A property's examples run once per process where they can: a test asserting what the examples reach (the
paths they take, counted as they run) reads the counts of the property's passing run in this process, and runs
the property itself only where that run is not here (another pytest-xdist worker, a test selected alone, or a
run that failed, so that this test fails as it would have). The property's settings are the same in either run,
so the counts it asserts floors on come from the same examples."""

from __future__ import annotations

from collections.abc import Callable

import pytest

# (module, test name) of each test that passed in this process; tests/conftest.py adds them
PASSED: set[tuple[str, str]] = set()


def record_outcome(item: pytest.Item, report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed and isinstance(item, pytest.Function):
        PASSED.add((item.module.__name__, item.originalname))


def run_unless_passed(property_test: Callable[[], None], reset: Callable[[], None]) -> None:
    """Run ``property_test`` (its counts cleared by ``reset`` first) unless it passed in this process."""
    if (property_test.__module__, property_test.__name__) in PASSED:
        return
    reset()
    property_test()
