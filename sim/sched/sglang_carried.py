"""A batch run's silent steps carried (SGLang's rules): each running request's ``plain_decode_steps`` read once
and carried as the run's step at which it reaches 0 (its *due* step), not asked of the rules again at every quiet
stretch, idle fold and event step.

The run asks, of every request, how many of its next steps are plain (no checkpoint, no SWA free fires): at each
quiet stretch (``batch_decode_stretch``: the least answer), each idle fold (``idle_event_steps``) and each event
step (``event_step_needs``: which are 0). Under SGLang's rules the answer is the least of two closed forms, each one
less a step while it is positive and the request's SWA frontier holds: the track grid's ``-(kv_len + 1) % grid``,
and the trigger's silence, ``iterations``: ``-iteration % interval``; ``tokens``: ``max(first, frontier + interval
+ window - kv_len)``, ``first`` 1 before the request's first decode step and 0 after (``max(1, x) - 1 == max(0, x -
1)`` for ``x <= 1``). A request whose answer is positive at a step is no event there: only the events' frontiers
move (their out-of-window free). So a quiet stretch moves no due step (every answer was at least its length), and
after an event step the events' due steps are read again. Without SWA and Mamba the answer is the rules' "never" at
every step, kept as it is. What else may move a request drops the due steps (read again at their next use): the
step in flight processed by a run's first step (commits, ends), an idle fold.
"""

from __future__ import annotations

from sim.cache.components import MAMBA
from sim.cache.engines.sglang import SGLangRules
from sim.cache.manager import CacheManager
from sim.cache.request import RequestCache
from sim.sched import sglang_carried_starts as carried_starts
from sim.sched.batch import FullStep, take_stretch
from sim.sched.sglang_event_plans import StepNeeds
from sim.sched.sglang_folds import carried_idle_steps

# True: an SGLang batch run carries its requests' silent steps (``CarriedSilence``); False: the rules asked at
# every stretch and event step (the reference; tests/test_sglang_carried_property.py holds both equal)
CARRY_SILENT_STEPS = True


class CarriedSilence:
    """Each running request's *due* step, in batch order (None: to be read): the run's step (``iteration + done``)
    at which its ``plain_decode_steps`` reaches 0, its answer at step ``t`` being the due step less ``t``; without
    SWA and Mamba the answer itself ("never"), kept as it is."""

    __slots__ = ("rules", "reqs", "dues", "moves", "phase", "starts")

    def __init__(self, manager: CacheManager, rules: SGLangRules, reqs: list[RequestCache]):
        self.rules, self.reqs = rules, reqs
        self.dues: list[int] | None = None
        self.moves = rules.resolved.has_mamba or rules.resolved.has_swa  # else "never" at every step
        self.phase = manager.policy.iteration_phase  # the rules' iteration is the run's and this
        starts = carried_starts.CARRY_PAGE_STARTS
        self.starts = carried_starts.PageDues(reqs, manager.page_size) if starts else None

    def dues_at(self, iteration: int) -> list[int]:
        """The due steps at the run's step ``iteration``: carried, or read off the rules' answers where dropped."""
        dues = self.dues
        if dues is None:
            plain, phase = self.rules.plain_decode_steps, iteration + self.phase
            base = iteration if self.moves else 0
            dues = self.dues = [base + plain(req, phase) for req in self.reqs]
        return dues

    def quiet_stretch(
        self, manager: CacheManager, iteration: int, done: int, max_steps: int, announced: bool
    ) -> tuple[int, list[FullStep]]:
        """``take_quiet_stretch`` with the rules' least answer carried (a stretch moves no due step)."""
        at = iteration + done
        dues = self.dues_at(at)
        steps = min(iteration + max_steps, min(dues)) - at if self.moves else max_steps - done
        if steps <= 0:
            return 0, []
        reqs = self.reqs
        for req in reqs:
            if req.commit_pending:  # a commit waits for the next step's processing
                return 0, []
        if self.starts is not None:
            return self.starts.stretch(manager, iteration, done, steps, announced)
        stretch, starts = manager.stretch_within(reqs, steps)
        return take_stretch(manager, reqs, iteration, done, stretch, starts, announced)

    def idle_steps(self, manager: CacheManager, iteration: int, max_steps: int) -> int:
        """``idle_event_steps`` at the run's step ``iteration`` read off the carried due steps; where there are
        some, the run takes them next (``take_idle_event_steps``), and the due steps are dropped."""
        if not self.moves:  # no SWA: no trigger to be stuck
            return 0
        dues, phase = self.dues_at(iteration), iteration + self.phase
        steps = carried_idle_steps(manager, self.rules, self.reqs, dues, iteration, phase, max_steps)
        if steps:
            self.drop()
        return steps

    def fits_and_needs(self, manager: CacheManager, iteration: int) -> tuple[bool, StepNeeds | None]:
        """``step_fits_and_needs`` (``event_step_needs``, one pass) with each request's event carried."""
        dues = self.dues_at(iteration)
        events = [due <= iteration for due in dues] if self.moves else [False] * len(dues)
        if self.starts is not None:
            return self._fits_with(manager, events, self.starts.pages_needed(iteration))
        rules, pages, num_pages, num_states = self.rules, [], 0, 0
        for req, event in zip(self.reqs, events, strict=True):
            if req.commit_pending:
                return False, None
            page = req.page_size  # ``pages_needed(kv_len + 1)``: the page of position kv_len, if not held
            needed = max(0, req.kv_len // page + 1 - req.prefix_len // page - len(req.own_full))
            if event and not req.spare_states and rules.decode_checkpoint(req) is not None:
                num_states += 1  # a non-event takes no checkpoint
            pages.append(needed)
            num_pages += needed
        if not self._room_holds(manager, num_pages, num_states):
            return False, None
        return True, StepNeeds(events, pages)

    def _fits_with(
        self, manager: CacheManager, events: list[bool], pages: list[int]
    ) -> tuple[bool, StepNeeds | None]:
        """``fits_and_needs`` with each request's pages read off its carried page start (``PageDues``)."""
        rules, num_states = self.rules, 0
        for req, event in zip(self.reqs, events, strict=True):
            if req.commit_pending:
                return False, None
            if event and not req.spare_states and rules.decode_checkpoint(req) is not None:
                num_states += 1  # a non-event takes no checkpoint
        if not self._room_holds(manager, sum(pages), num_states):
            return False, None
        return True, StepNeeds(events, pages)

    def _room_holds(self, manager: CacheManager, num_pages: int, num_states: int) -> bool:
        """Whether an event step's pages and new checkpoint states fit without evicting (``step_fits_room``)."""
        room = manager.topology.kv_room(manager.has_swa) - self.rules.alloc_slack_pages - len(self.reqs)
        if room < num_pages:
            return False
        return not num_states or (
            manager.topology.name == "separate" and manager.pools[MAMBA].num_free >= num_states
        )

    def stepped(self, needs: StepNeeds | None, processed: bool, iteration: int) -> None:
        """After an event step (``needs``: its requests' events), at the run's next step ``iteration``: the events'
        due steps read again (their frontiers may have moved), the others' kept (their answers one less); all
        dropped where the step processed the step in flight (``processed``: its commits and ends move requests)."""
        dues = self.dues
        if processed or needs is None:
            self.drop()
            return
        if self.starts is not None:  # the page takers' page starts read again with the events' answers
            self.starts.stepped(needs, iteration, dues if self.moves else None, self.rules, self.phase)
        elif dues is not None and self.moves:
            plain, phase = self.rules.plain_decode_steps, iteration + self.phase
            for index, event in enumerate(needs.events):
                if event:
                    dues[index] = iteration + plain(self.reqs[index], phase)

    def drop(self) -> None:
        """The due steps and page starts to be read again at their next use (something else moved requests)."""
        self.dues = None
        if self.starts is not None:
            self.starts.dues = None


def carried_silence(
    manager: CacheManager, rules: object, reqs: list[RequestCache], one_pass: bool
) -> CarriedSilence | None:
    """A run's carried answers, under SGLang's rules exactly where its event steps are read in one pass
    (``one_pass``: ``step_fits_and_needs`` answers their needs); None: the rules asked each time."""
    if not CARRY_SILENT_STEPS or type(rules) is not SGLangRules or not one_pass or not reqs:
        return None
    return CarriedSilence(manager, rules, reqs)
