"""Small builders shared by the cache tests."""

from __future__ import annotations

from dataclasses import replace

from sim.cache.manager import CacheManager
from sim.cache.node import Node
from sim.cache.pools import Pool
from sim.cache.sizing import PoolSizes
from sim.cache.tree import RadixTree
from sim.engines.registry import make_manager, make_policy
from sim.models import get_model
from sim.tokens import TokenSeq

BIG = PoolSizes(100_000, 100_000, 1_000)


def hybrid_model(swa: bool = True, mamba: bool = True, window: int = 512, mamba_chunk: int = 128):
    kinds = tuple(k for k, on in (("swa", swa), ("mamba", mamba), ("full", True)) if on)
    return replace(get_model("tiny"), layer_kinds=kinds, window=window if swa else 0, mamba_chunk=mamba_chunk)


def manager(policy: str, model=None, sizes: PoolSizes = BIG, **knobs) -> CacheManager:
    return make_manager(model or hybrid_model(), make_policy(policy, **knobs), sizes)


def seq(*parts: tuple[str, int]) -> TokenSeq:
    return TokenSeq([("r:" + ref, 0, length) for ref, length in parts])


def workload_request(
    index: int, family: int, shared_len: int, own: int, own_len: int, output_len: int
) -> tuple:
    """Request ``index`` of a generated workload (``test_page_chunks_property.workloads``): its id, its tokens (the
    family's shared prefix, its own part, which ``own`` < 3 shares within the family, its output) and its run's
    arguments ``(id, tokens, prompt_len, output_len)``."""
    rid = f"r{index}"
    own_ref = rid if own == 3 else f"own{family}-{own}"
    tokens = seq((f"shared{family}", shared_len), (own_ref, own_len), (f"out-{rid}", output_len))
    return rid, tokens, (rid, tokens, shared_len + own_len, output_len)


def out(request_id: str, length: int) -> TokenSeq:
    return TokenSeq.of("o:" + request_id, length)


def parentless_node() -> Node:
    """A fresh root for a hand-built tree, made where the tree makes its own: the compiled ``Node`` refuses a
    ``None`` parent from Python, so ``Node(..., None, ...)`` in a test fails under ``HYBRIDCACHE_COMPILED``."""
    empty = Pool("unused", 0)
    return RadixTree(1, empty, empty, empty).root
