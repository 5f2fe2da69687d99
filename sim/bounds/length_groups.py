"""A batch run's consecutive decode steps on one lengths list read by the bounds' recorder as one group.

A freeing stretch (``sglang_free_stretch``, ``freeing_runs``) tells each of its page steps as a ``DecodeBatch`` of
the same requests and the same ``lengths`` list, a further ``offset`` each. Read step by step
(``EventRecorder._record_decode_step``) every request is looked at in every step, though in most steps its token
falls on a page its open run holds or extends that run by one page. A group reads each such request once: where
its run is open and holds the group's first token's page (``run[1] <= first <= run[2]``) and no two steps of the
group are more than a page apart (each step's page at most one past the step before's), every step only extends
the run to its token's page + 1, never past the request's last computed page, and no step logs an event: the run
ends at ``min(last token's page + 1, last)`` if that is further. Such a request touches only its own run, so the
others (no run open, a quoted output, a gap) are read step by step in step then batch order as the reference
reads them, and the log is the same. ``GROUPED`` off: every step read alone (the reference;
``tests/test_length_groups_property.py``).
"""

from __future__ import annotations

from sim.sched.batch import DecodeBatch

# True: a run's consecutive decode steps sharing one lengths list read as a group (``record_run``); False: each
# step alone (the reference)
GROUPED = True


def groups(full_steps) -> list[list]:
    """The full steps that carry a batch, consecutive ``DecodeBatch``es of one ``lengths`` list and one id list,
    each step after the one before, in one group; every other batch a group of its own."""
    found: list[list] = []
    group: list = []
    for full in full_steps:
        batch = full.batch
        if batch is None:
            continue
        if (
            group
            and type(batch) is DecodeBatch
            and type(group[-1].batch) is DecodeBatch
            and batch.lengths is group[-1].batch.lengths
            and batch.offset >= group[-1].batch.offset + group[-1].num_steps
            and batch.request_ids == group[-1].batch.request_ids
        ):
            group.append(full)
            continue
        group = [full]
        found.append(group)
    return found


def record_run(recorder, full_steps, manager, from_lengths: bool) -> None:
    """A batch run's full steps (``RunSteps``) read by ``recorder`` a group at a time. ``from_lengths``: the
    recorder reads a step of several tokens from its lengths (``RUN_FROM_LENGTHS``); off, only one-token
    steps are grouped."""
    for group in groups(full_steps):
        if len(group) == 1 or not (from_lengths or all(full.num_steps == 1 for full in group)):
            for full in group:
                recorder.record(full.batch, manager, full.num_steps)
        else:
            _record_group(recorder, group, manager)


def _record_group(recorder, group: list, manager) -> None:
    """The group's steps: each request whose run takes them all at once extended to its end; the rest read step
    by step (a step's ``DecodeBatch`` of only them)."""
    page, runs, last_page = recorder.reading_state()
    first_batch = group[0].batch
    ids, lengths = first_batch.request_ids, first_batch.lengths
    ends = [full.batch.offset + full.num_steps - 1 for full in group]  # each step's last token's offset
    far = [j for j in range(len(group) - 1) if group[j + 1].batch.offset - ends[j] > page]
    joined_from = far[-1] + 1 if far else 0  # from this step on no two steps are more than a page apart
    left = list(range(len(ids)))
    for j, full in enumerate(group):
        if j >= joined_from:
            offset, end_offset = full.batch.offset, ends[-1]
            left = [
                i
                for i in left
                if not _extended(runs, last_page, ids[i], lengths[i], offset, end_offset, page)
            ]
        if not left:
            return
        step = full.batch
        if len(left) < len(ids):
            states: list[int | None] = [None] * len(left)  # the recorder reads no state
            step = DecodeBatch(
                step.iteration, [ids[i] for i in left], states, [lengths[i] for i in left], step.offset
            )
        recorder.record(step, manager, full.num_steps)


def _extended(
    runs: dict[str, list[int]],
    last_page: dict[str, int],
    request_id: str,
    length: int,
    offset: int,
    end_offset: int,
    page: int,
) -> bool:
    """Whether the request's open run holds its token's page at ``offset`` (then extended through its token at
    ``end_offset``, at most to its last computed page); False: the request is left to be read step by step."""
    run = runs.get(request_id)
    if run is None or not run[1] <= (length + offset) // page <= run[2]:
        return False
    end = (length + end_offset) // page + 1
    if end > run[2]:
        last = last_page[request_id]
        run[2] = end if end < last else last
    return True
