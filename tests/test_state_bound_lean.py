"""``state_bound.LeanDual`` (``LEAN_DUAL``) evaluates the state bound's dual to the same floats and choices as
``DualBound``, the reference: as a property over generated options (groups of options per request, intervals
over the lookups, weights that tie inside a group and across, capacities from 0 up), every evaluation's value,
the options taken and the subgradient, the objective alone, and the bound itself equal the reference's. Fixed
cases pin a tie inside a group (the first option wins), a point where no option is worth taking, one option."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.bounds import state_bound as state_bound_module
from sim.bounds.state_bound import DualBound, LeanDual, Options, state_bound


def make_options(groups: list[list[tuple[int, int, int]]], num_points: int) -> Options:
    """Options from each request's ``(weight, first, length)`` triples, intervals clipped to the points."""
    owners, weights, first, last = [], [], [], []
    for owner, group in enumerate(groups):
        for weight, start, length in group:
            start = min(start, num_points - 1)
            owners.append(owner)
            weights.append(weight)
            first.append(start)
            last.append(min(start + length, num_points - 1))
    return Options(owners, weights, first, last, num_points, [f"r{i}" for i in range(len(groups))])


options_cases = st.integers(1, 40).flatmap(
    lambda num_points: st.tuples(
        st.lists(
            st.lists(
                st.tuples(
                    st.sampled_from([16, 32, 48, 64, 1000]),
                    st.integers(0, num_points - 1),
                    st.integers(0, num_points),
                ),
                min_size=1,
                max_size=5,
            ),
            min_size=1,
            max_size=25,
        ),
        st.just(num_points),
        st.integers(0, 12),
        st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 16.0, 0.1]), min_size=num_points, max_size=num_points),
    )
)

TIE_IN_GROUP = ([[(32, 0, 2), (32, 0, 2), (16, 1, 0)], [(48, 2, 1)]], 4, 1, [0.0, 8.0, 0.0, 8.0])
NONE_WORTH = ([[(16, 0, 3)], [(16, 1, 2), (32, 0, 3)]], 4, 2, [16.0, 16.0, 16.0, 16.0])
ONE_OPTION = ([[(64, 0, 0)]], 1, 1, [0.5])


def assert_lean_equals_reference(case) -> None:
    groups, num_points, capacity, y = case
    options = make_options(groups, num_points)
    lean, reference = LeanDual(options, capacity), DualBound(options, capacity)
    point = np.asarray(y, dtype=np.float64)
    for scale in (0.0, 1.0, 7.0):
        value, taken = lean.value(point * scale)
        expected_value, expected_taken = reference.value(point * scale)
        assert value == expected_value and lean.objective(point * scale) == expected_value
        assert np.array_equal(taken, expected_taken)
        assert np.array_equal(lean.subgradient(taken), reference.subgradient(expected_taken))
    bounds = []
    for lean_on in (True, False):
        state_bound_module.LEAN_DUAL = lean_on
        bounds.append(state_bound(options, capacity, iterations=60))
    state_bound_module.LEAN_DUAL = True
    assert bounds[0] == bounds[1]


@settings(max_examples=200, deadline=None)
@given(case=options_cases)
@example(case=TIE_IN_GROUP)
@example(case=NONE_WORTH)
@example(case=ONE_OPTION)
def test_the_lean_dual_equals_the_reference(case):
    assert_lean_equals_reference(case)


def test_the_fixed_cases_hold_what_they_pin():
    """The tie: both first options of request 0 are best at y = 0, the first is taken; none worth: every slack
    is below 0 at y = 16, nothing is taken; one option: taken."""
    options = make_options(TIE_IN_GROUP[0], 4)
    assert LeanDual(options, 1).value(np.zeros(4))[1].tolist() == [0, 3]
    options = make_options(NONE_WORTH[0], 4)
    assert LeanDual(options, 2).value(np.full(4, 16.0))[1].tolist() == [-1, -1]
    assert LeanDual(make_options(ONE_OPTION[0], 1), 1).value(np.zeros(1))[1].tolist() == [0]
