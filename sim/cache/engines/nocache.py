"""The null strategy: no prefix cache (SGLang ``--disable-radix-cache``, its chunk cache). Nothing is
matched, committed or kept; running requests still free out-of-window SWA and take checkpoints as SGLang's
do, so pool occupancy is what the engine without a cache holds."""

from __future__ import annotations

from sim.cache.engines.sglang import SGLangRules
from sim.cache.ops import RadixOps
from sim.cache.results import MatchResult, new_match_result
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class NoCacheRules(SGLangRules):
    name = "none"
    keeps_cache = False

    def match(self, tree, tokens, prompt_len) -> MatchResult:
        return new_match_result(0, 0, tree.root)

    def after_prefill_chunk(self, manager: RadixOps, req, is_last: bool) -> None:
        pass

    def finish(self, manager: RadixOps, req) -> None:
        pass
