"""A property's generated examples depend on the test alone, not on what else the process imported
(tests/hypothesis_pins.py): the same draws with and without the project's modules loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# the draws a derandomized property makes, printed as a digest; argv: "pin" applies the conftest's pin, any other
# word names a module to import first (one with many integer constants in range)
_DRAWS = """
import hashlib, importlib, sys
from hypothesis import given, settings, strategies as st
if "pin" in sys.argv[1:]:
    from tests.hypothesis_pins import draw_no_local_constants
    draw_no_local_constants()
for name in sys.argv[1:]:
    if name != "pin":
        importlib.import_module(name)
seen = []
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 5000), max_size=8))
def draws(values):
    seen.append(values)
draws()
print(hashlib.sha1(repr(seen).encode()).hexdigest())
"""


def _digest(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _DRAWS, *args], cwd=REPO, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_pinned_draws_do_not_depend_on_the_imported_modules():
    assert _digest("pin") == _digest("pin", "conformance.generate", "sim.cache.engines.marconi_tuner")


def test_unpinned_draws_do_in_this_hypothesis():
    """The drift the pin removes, shown in this Hypothesis: if this fails, Hypothesis no longer reads the loaded
    modules' constants and the pin can go."""
    assert _digest() != _digest("conformance.generate", "sim.cache.engines.marconi_tuner")
