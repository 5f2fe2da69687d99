"""The ``no-cache`` preset as it ran before Round 41: the null rules on the default loop (``capped_scheduler``,
``DefaultScheduler``) with SGLang's ``add_one_req``. Since Round 41 ``no-cache`` runs SGLang's own loop, as
SGLang's ``--disable-radix-cache`` does (``cli.py conformance sglang --concurrent --no-cache``); the tests of the
default loop's fast paths were written on the old ``no-cache`` (its first chunks stall under SGLang's cap, its
last outputs end in batch runs), so they swap this entry in for the ``none`` engine while they run
(``default_loop_no_cache``: module-wide, ``ENGINES["none"]`` replaced and put back), to keep testing that loop."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sim.cache.engines.sglang import SGLangRules
from sim.cache.ops import RadixOps
from sim.cache.policy import EngineKnobs
from sim.cache.results import MatchResult, new_match_result
from sim.engines import registry
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import capped_scheduler, decode_interval_on_pages, radix_manager


class DefaultLoopNoCacheRules(SGLangRules):
    """The pre-Round-41 null rules: SGLang's, with nothing matched, committed or kept."""

    name = "none"
    keeps_cache = False

    def match(self, tree, tokens, prompt_len) -> MatchResult:
        return new_match_result(0, 0, tree.root)

    def after_prefill_chunk(self, manager: RadixOps, req, is_last: bool) -> None:
        pass

    def finish(self, manager: RadixOps, req) -> None:
        pass


DEFAULT_LOOP_NONE = Engine(
    name="none",
    about="the pre-Round-41 no-cache: the null rules on the default loop",
    knobs=EngineKnobs,
    presets=(),
    manager=radix_manager(DefaultLoopNoCacheRules),
    scheduler=capped_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=DefaultLoopNoCacheRules,
    check=decode_interval_on_pages,
)


@contextmanager
def default_loop_no_cache() -> Iterator[None]:
    """``no-cache`` runs the default loop inside the block."""
    shipped = registry.ENGINES["none"]
    registry.ENGINES["none"] = DEFAULT_LOOP_NONE
    try:
        yield
    finally:
        registry.ENGINES["none"] = shipped
