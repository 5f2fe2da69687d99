"""A freeing stretch's steps grouped into full steps (``freeing_runs.step_runs``), read directly: over generated
stretches (steps that start pages, steps that break a run, SWA frees at some of those), the full steps are the
plain reading of the rule, step by step: a step goes on the step before it where it directly follows it, is no
break, starts as many pages (some) as it does, and the step before is no break unless breaks may be extended
(``extends_break``: the loop's own stretches, broken at each SWA free; off where the bounds read the batches,
each due free or checkpoint alone). The fixed stretches pin both callers' readings.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.sched.batch import FullStep
from sim.sched.freeing_runs import step_runs


def plain_runs(stretch: tuple, extends: bool) -> list[FullStep]:
    """The rule read step by step: each step joins the one before it or begins a full step. ``stretch``:
    ``stretches``' page steps, frees, run offset before it and breaks."""
    page_steps, freed, done, breaks_at = stretch
    pages_at, freed_at = dict(page_steps), dict(freed)
    offsets = sorted(set(pages_at) | breaks_at)
    runs: list[FullStep] = []
    # each step and the one before it (none: -2)
    for before, offset in zip([-2, *offsets], offsets, strict=False):
        pages = pages_at.get(offset, 0)
        joins = (
            before == offset - 1
            and offset not in breaks_at
            and pages > 0
            and pages_at.get(before, 0) == pages
            and (extends or before not in breaks_at)
        )
        if joins:
            runs[-1] = runs[-1]._replace(num_steps=runs[-1].num_steps + 1)
        else:
            runs.append(FullStep(done + offset, pages, None, None, 1, (), freed_at.get(offset, 0)))
    return runs


@st.composite
def stretches(draw):
    """Page-starting steps (few page counts, so neighbours often match), breaks among and beside them, SWA
    frees at some breaks (every freeing step is a break), the run offset before the stretch."""
    num_steps = draw(st.integers(0, 24))
    kinds = draw(st.lists(st.sampled_from("ppppb.f"), min_size=num_steps, max_size=num_steps))
    page_steps = [(at, draw(st.integers(1, 2))) for at, kind in enumerate(kinds) if kind in "pf"]
    breaks_at = {at for at, kind in enumerate(kinds) if kind in "bf"}
    freed = [(at, draw(st.integers(1, 9))) for at in sorted(breaks_at) if draw(st.booleans())]
    return page_steps, freed, draw(st.integers(0, 50)), breaks_at


@settings(max_examples=300, deadline=None, derandomize=True)
@given(stretch=stretches(), extends=st.booleans())
def test_step_runs_are_the_rule_read_step_by_step(stretch, extends):
    page_steps, freed, done, breaks_at = stretch
    runs = step_runs(page_steps, freed, done, breaks_at, extends)
    assert runs == plain_runs(stretch, extends)
    assert sum(run.num_steps for run in runs) == len(set(dict(page_steps)) | breaks_at)


def test_the_loop_goes_on_from_a_free_and_the_bounds_take_each_due_step_alone():
    page_steps = [(at, 1) for at in range(6)] + [(7, 1), (8, 2)]
    freed = [(2, 3)]

    def runs(breaks_at: set[int], extends: bool) -> list[tuple[int, int, int, int]]:
        found = step_runs(page_steps, freed, 10, breaks_at, extends)
        return [(run.offset, run.pages, run.num_steps, run.swa_freed) for run in found]

    # the loop's own stretch: the free at 2 begins a run that the next steps go on
    assert runs({2}, True) == [(10, 1, 2, 0), (12, 1, 4, 3), (17, 1, 1, 0), (18, 2, 1, 0)]
    # the bounds: the due steps 2 and 6 (a checkpoint, no pages) alone, the page run after each begun anew
    due_alone = [(10, 1, 2, 0), (12, 1, 1, 3), (13, 1, 3, 0), (16, 0, 1, 0), (17, 1, 1, 0), (18, 2, 1, 0)]
    assert runs({2, 6}, False) == due_alone
