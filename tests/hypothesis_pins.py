"""Generated examples that depend only on the test that draws them.

Hypothesis (6.13x on) also draws constants it finds in every loaded local module (``sim``, ``conformance``, ...),
so under ``derandomize=True`` a property's examples still changed with what else the process had imported: one
test's walk reached past its first candidate 198 times alone, 112 times beside the whole suite (as xdist's
workers import it) and 52 beside ``conformance.generate``, and a floor on that count failed in CI only. Drawing
from no local constants makes a test's examples the same alone, in the suite, on any worker and under the
compiled core (whose modules have no source to read constants from)."""

from __future__ import annotations

from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants


def draw_no_local_constants() -> None:
    """Replace Hypothesis's reader of the loaded modules' constants by an empty set. A Hypothesis without that
    reader fails here, loudly, instead of letting the examples drift again (tests/test_hypothesis_pins.py)."""
    if not callable(getattr(providers, "_get_local_constants", None)):
        raise RuntimeError(
            "hypothesis.internal.conjecture.providers._get_local_constants is gone: this Hypothesis reads the "
            "loaded modules' constants some other way; pin the version in constraints-cpu.txt or mend "
            "tests/hypothesis_pins.py"
        )
    none = Constants()
    providers._get_local_constants = lambda: none
