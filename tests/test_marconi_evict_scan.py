"""Marconi's eviction lists its candidates and each one's ``parent_end`` in one walk (``scan``); the rule's
own reading, ``candidates`` then ``parent_end`` climbed per candidate, is kept as the reference
(``MarconiEvictor.pick_by_scan``). Caches of a few dozen pages run generated requests alone (prefixes shared,
leaves and states evicted, requests refused); after every request both readings must list the same nodes
with the same ends, for leaves only and for leaves and single-child states, and pick the same victim for
every component.
"""

from __future__ import annotations

from hypothesis import given, settings
from test_anonymous_pages import cache_pair, request_lists, run_request, tight_marconi_caches

from sim.cache.byte_budget import BYTES
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_evict import candidates, parent_end, scan


def _reference_scan(root, leaves_only: bool, has_mamba: bool) -> tuple[list, list[int]]:
    found = candidates(root, leaves_only)
    return found, [parent_end(node, has_mamba) for node in found]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tight_marconi_caches(), request_lists(10))
def test_one_walk_lists_the_candidates_and_ends_the_rule_does(configuration, requests):
    model, knobs, sizes = configuration
    cache, _ = cache_pair(model, knobs, sizes)
    evictor = cache.rules.evictor(cache)
    root, has_mamba = cache.tree.root, evictor.has_mamba
    for index, request in enumerate(requests):
        run_request(cache, index, request, knobs["chunked_prefill_size"])
        for leaves_only in (True, False):
            assert scan(root, leaves_only, has_mamba) == _reference_scan(root, leaves_only, has_mamba)
        for comp in (FULL, SWA, MAMBA, BYTES):
            assert evictor.pick(cache.tree, comp) == evictor.pick_by_scan(cache.tree, comp), (
                f"r{index} {comp}"
            )
