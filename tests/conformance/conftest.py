"""The engines run in processes of their own: importing SGLang, FreeToken or vLLM sets Triton up in ways that
break the executor's interpreted kernels later in the same test session."""
from __future__ import annotations

import importlib

import pytest

from conformance import isolated


@pytest.fixture(scope="session", autouse=True)
def engines_in_their_own_processes():
    for name in ("sglang", "freetoken", "vllm"):
        isolated.isolate(importlib.import_module(f"conformance.engines.{name}"))
    yield
    isolated.close()
