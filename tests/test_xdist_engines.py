"""The suite's pytest-xdist scheduling (tests/xdist_engines.py): an engine's conformance tests share one unit of
work, so one worker imports that engine; every other test is a unit of its own."""

from __future__ import annotations

import pytest

pytest.importorskip("xdist")

from tests.xdist_engines import engine_scope  # noqa: E402


def test_each_engines_conformance_tests_share_one_scope():
    assert engine_scope("tests/conformance/test_sglang_engine.py::test_a") == "sglang"
    assert engine_scope("tests/conformance/test_suite_agrees.py::test_every_request[vllm-pressure]") == "vllm"
    assert engine_scope("tests/conformance/test_freetoken_first_free.py::test_b[sglang]") == "freetoken"
    assert engine_scope("tests/conformance/test_engine_runs.py::test_c[sglang-spaced]") == "sglang"


def test_other_tests_are_each_their_own_scope():
    assert engine_scope("tests/test_sglang_admission.py::test_a") == "tests/test_sglang_admission.py::test_a"
    plain = "tests/conformance/test_engine_runs.py::test_the_runner_runs_each_distinct_run_once"
    assert engine_scope(plain) == plain
