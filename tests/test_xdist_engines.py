"""The suite's pytest-xdist scheduling (tests/xdist_engines.py): an engine's conformance tests share one unit of
work, so one worker imports that engine; a file with a costly module-scoped fixture is one unit; every other
test is a unit of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("xdist")

from tests.xdist_engines import WHOLE_FILES, engine_scope  # noqa: E402


def test_each_engines_conformance_tests_share_one_scope():
    assert engine_scope("tests/conformance/test_sglang_engine.py::test_a") == "sglang"
    assert engine_scope("tests/conformance/test_suite_agrees.py::test_every_request[vllm-pressure]") == "vllm"
    assert engine_scope("tests/conformance/test_freetoken_first_free.py::test_b[sglang]") == "freetoken"
    assert engine_scope("tests/conformance/test_engine_runs.py::test_c[sglang-spaced]") == "sglang"


def test_other_tests_are_each_their_own_scope():
    assert engine_scope("tests/test_sglang_admission.py::test_a") == "tests/test_sglang_admission.py::test_a"
    plain = "tests/conformance/test_engine_runs.py::test_the_runner_runs_each_distinct_run_once"
    assert engine_scope(plain) == plain


def test_a_file_with_a_costly_module_fixture_is_one_scope():
    flows = "tests/test_report_reviewer_flows.py"
    assert engine_scope(f"{flows}::test_a") == engine_scope(f"{flows}::test_b[x]") == flows
    assert engine_scope("tests/executor/test_executor_model_exact.py::test_c[triton]") == (
        "tests/executor/test_executor_model_exact.py"
    )
    root = Path(__file__).resolve().parents[1]
    assert all((root / path).is_file() for path in WHOLE_FILES)  # a renamed file would fall back to one per test
