"""``state_bound._descend`` with ``SKIP_SETTLED_STEPS``: a subgradient step that leaves ``y`` bit for bit where it was
is not evaluated again, nor taken again until ``theta`` halves. As a property over generated options (the lean
dual's test's: groups of options per request, intervals over the lookups, ties, capacities from 0 up) and over
starting points (the golden-section search's, the drawn ones), the best value found (the float) and the bound
equal the reference's, every step evaluated. Fixed cases pin the floors: a case whose ``y`` settles within a
few steps (the conversation trace's: after one) skips all but those, one whose ``y`` moves for a while before it
settles skips only the later ones, one whose ``y`` keeps moving skips none."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings

from sim.bounds import state_bound as state_bound_module
from sim.bounds.state_bound import LeanDual, _best_constant, _descend, state_bound
from tests.test_state_bound_lean import make_options, options_cases

SETTLES = ([[(64, 0, 3), (32, 1, 1)], [(48, 2, 1)], [(1000, 0, 0)]], 4, 1, [0.0, 0.0, 0.0, 0.0])
MOVES_THEN_SETTLES = ([[(16, 4, 8), (32, 6, 0)], [(16, 6, 2)]], 8, 1, [0.0] * 8)
# its steps move ``y`` by less than a thousandth at times: a compare that is not bit for bit skips them
SMALL_MOVES = (
    [[(48, 3, 7)], [(16, 1, 0), (1000, 6, 4)], [(1000, 1, 7), (48, 5, 4), (64, 1, 1), (16, 4, 6)], [(1000, 6, 7)], [(32, 4, 3)]],
    7,
    1,
    [0.0] * 7,
)  # fmt: skip
KEEPS_MOVING = ([[(64, 1, 2)], [(64, 1, 2)], [(16, 1, 0)], [(16, 0, 1)]], 2, 3, [0.0, 0.0])
ITERATIONS = 120  # theta halves up to six times


class CountingDual(LeanDual):
    """The lean dual counting its evaluations (``value``)."""

    num_values = 0

    def value(self, y: np.ndarray):
        self.num_values += 1
        return super().value(y)


def descend_both(options, capacity: int, start: np.ndarray) -> tuple[float, float, list[int]]:
    """``_descend`` from ``start`` with the switch on and off: (best on, best off, [evaluations on, off])."""
    found, counts = [], []
    for skip in (True, False):
        state_bound_module.SKIP_SETTLED_STEPS = skip
        dual = CountingDual(options, capacity)
        value, taken = dual.value(start)
        found.append(_descend(dual, start, value, taken, value, ITERATIONS))
        counts.append(dual.num_values)
    state_bound_module.SKIP_SETTLED_STEPS = True
    return found[0], found[1], counts


def assert_settled_steps_equal(case) -> int:
    """Both descents' best equal from the golden-section start and from the drawn point, and the bounds; how
    many evaluations were skipped."""
    groups, num_points, capacity, y = case
    options = make_options(groups, num_points)
    skipped = 0
    if capacity > 0:
        golden = _best_constant(LeanDual(options, capacity), options)[0]
        for start in (golden, np.asarray(y, dtype=np.float64)):
            on, off, (num_on, num_off) = descend_both(options, capacity, start)
            assert on == off
            skipped += num_off - num_on
    bounds = []
    for skip in (True, False):
        state_bound_module.SKIP_SETTLED_STEPS = skip
        bounds.append(state_bound(options, capacity, iterations=ITERATIONS))
    state_bound_module.SKIP_SETTLED_STEPS = True
    assert bounds[0] == bounds[1]
    return skipped


@settings(max_examples=200, deadline=None)
@given(case=options_cases)
@example(case=SETTLES)
@example(case=MOVES_THEN_SETTLES)
@example(case=SMALL_MOVES)
@example(case=KEEPS_MOVING)
def test_skipping_settled_steps_finds_the_same_bound(case):
    assert_settled_steps_equal(case)


def golden_start_counts(case) -> list[int]:
    """Evaluations from the golden-section start, the switch on and off."""
    groups, num_points, capacity, _ = case
    options = make_options(groups, num_points)
    start = _best_constant(LeanDual(options, capacity), options)[0]
    return descend_both(options, capacity, start)[2]


def test_the_fixed_cases_hold_what_they_pin():
    """From the golden-section start (the evaluation at the start counted too): settles within a few steps, so a
    few evaluations of the reference's 121; moves then settles, more than 20 evaluated and more than 20 skipped; keeps
    moving, every step evaluated, none skipped."""
    num_on, num_off = golden_start_counts(SETTLES)
    assert num_on < 10 and num_off == ITERATIONS + 1
    num_on, num_off = golden_start_counts(MOVES_THEN_SETTLES)
    assert num_on > 20 and num_off - num_on > 20
    assert golden_start_counts(KEEPS_MOVING) == [ITERATIONS + 1] * 2
