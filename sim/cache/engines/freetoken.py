"""FreeToken 0.2.1 (``scheduler/cache.py: CacheManager``, ``kvcache/swa_radix_cache.py``,
``kvcache/hybrid_radix_cache.py``, ``scheduler/prefill.py: PrefillAdder``), exact by the conformance suite.

FreeToken runs one of two caches: an SWA cache (``freetoken_swa``) or a GDN cache for FULL + MAMBA models
(``freetoken_gdn``); what they share is ``freetoken_common``. This is the engine's entry in ``ENGINES``: the
configurations FreeToken refuses, and the cache it runs.
"""

from __future__ import annotations

from sim.cache.engines.base import EngineRules
from sim.cache.engines.freetoken_common import FreeTokenCommon
from sim.cache.engines.freetoken_gdn import GdnRules, SwaGdnRules
from sim.cache.engines.freetoken_swa import SwaRules
from sim.cache.resolve import Resolved
from sim.compiled_core import mypyc_attr


@mypyc_attr(allow_interpreted_subclasses=True)
class FreeTokenRules(FreeTokenCommon):
    @classmethod
    def check(cls, resolved: Resolved) -> None:
        page = resolved.page_size
        if resolved.policy.chunked_prefill_size < page:
            raise ValueError(
                f"chunked_prefill_size {resolved.policy.chunked_prefill_size} is below page_size "
                f"{page}: FreeToken aligns a non-final chunk's end down to a page, so no chunk "
                f"could ever be scheduled"
            )
        if resolved.has_mamba and resolved.mamba_chunk % page:
            raise ValueError(
                f"FreeToken's GDN cache needs the scan chunk ({resolved.mamba_chunk}) to be a "
                f"multiple of page_size ({page})"
            )

    @classmethod
    def build(cls, resolved: Resolved) -> EngineRules:
        if resolved.has_mamba:
            return SwaGdnRules(resolved) if resolved.has_swa else GdnRules(resolved)
        return SwaRules(resolved)
