"""pytest-xdist's scheduling for this suite (tests/conftest.py picks it under ``-n`` with the default ``--dist
load``): each engine's conformance tests go to one worker, so each engine is imported once per run, not once per
worker. tests/conformance/ runs every engine in a spawned process per worker (conformance/isolated.py), and its
first call imports the engine: SGLang about 20 CPU seconds, vLLM 18, FreeToken 12 (one run each, quiet), paid
by both workers where ``load`` spread an engine's tests over both. A file in WHOLE_FILES is one unit too: its
module-scoped fixture (a grid run and its report, the import graph, the executor's model) is built once, not once
per worker. Every other test is a unit of its own, handed out as a worker runs short, as ``load`` does."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

ENGINES = ("sglang", "freetoken", "vllm")
CONFORMANCE = "tests/conformance/"
# files whose module-scoped fixtures cost seconds (a whole-suite run built test_report_reviewer_flows.py's grid
# on both workers: 13 s each)
WHOLE_FILES = (
    "tests/test_report_reviewer_flows.py",
    "tests/test_report.py",
    "tests/test_report_figures.py",
    "tests/test_layering.py",
    "tests/executor/test_executor_model_exact.py",
)


def engine_scope(nodeid: str) -> str:
    """The engine a conformance test names first (its file or its parameters), the file of a test in
    WHOLE_FILES, else the test itself."""
    path = nodeid.split("::", 1)[0]
    if path in WHOLE_FILES:
        return path
    if not nodeid.startswith(CONFORMANCE):
        return nodeid
    named = [(nodeid.find(engine), engine) for engine in ENGINES if engine in nodeid]
    return min(named)[1] if named else nodeid


class EngineScheduling(LoadScopeScheduling):
    """``--dist loadscope`` with the scopes above: a scope runs whole on one worker."""

    def _split_scope(self, nodeid: str) -> str:
        return engine_scope(nodeid)
