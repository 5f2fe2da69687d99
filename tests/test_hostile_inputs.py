"""Every case of the hostile-input corpus that tests/test_bad_inputs.py does not run already: exit 2 with
its place named (or, for a hostile but legal input, a run), never a traceback, a hang or a file left."""
from __future__ import annotations

import pytest

from tests.hostile_inputs import all_cases, judge, lay_out

CASES = [case for case in all_cases() if case.origin == "corpus"]
# the executor's pools are sized (and refused) by the executor itself: without torch it never gets there
NEEDS_TORCH = {"execute/pools-past-memory", "calibrate/pools-past-memory"}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("scratch")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_hostile_input_fails_cleanly(case, tmp_path, scratch):
    if case.name in NEEDS_TORCH:
        pytest.importorskip("torch")
    lay_out(case, tmp_path, scratch)
    assert judge(case, tmp_path, seconds=60) is None


def test_the_corpus_covers_every_command():
    commands = {" ".join(a for a in case.args[:2] if not a.startswith("-") and "{d}" not in a)
                for case in all_cases()}
    assert {"simulate", "grid", "report", "execute", "calibrate", "trace stats", "trace import", "trace gen"} <= commands
