"""A toy engine, to prove that an engine is one module and one registry line: a FULL-attention radix cache
(SGLang's rules with SWA and MAMBA ignored) whose eviction is first in, first out: the oldest node goes first,
however recently a hit used it. It has one knob of its own, to show the schema, the CLI and the grid pick it up.

Registered in a test with ``register(ENGINE)``, or for every process of a command with
``HYBRIDCACHE_ENGINES=tests.toy_engine`` (grid's worker processes included)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from sim.cache.components import Component
from sim.cache.engines.sglang import SGLangRules
from sim.cache.knobs import knob
from sim.cache.node import Node
from sim.cache.policy import EngineKnobs, Policy, own_knobs
from sim.engines.entry import Engine
from sim.engines.pool_sizing import separate_pool_sizes
from sim.engines.radix import capped_scheduler, decode_interval_on_pages, radix_manager


@dataclass(frozen=True)
class FifoKnobs(EngineKnobs):
    fifo_spare_nodes: int = knob(0, "the newest nodes FIFO never evicts", minimum=0, maximum=1 << 20)


class FifoEviction:
    """Oldest node first (node ids grow with creation), whatever its stamps; ``spare`` newest nodes kept."""

    name = "fifo"

    def __init__(self, spare: int) -> None:
        self.spare = spare
        self.heaps: dict[Component, list[tuple[int, Node]]] = {comp: [] for comp in Component}
        self.newest = 0

    def push(self, comp: Component, node: Node, stamp: int) -> None:
        self.newest = max(self.newest, node.id)
        heapq.heappush(self.heaps[comp], (node.id, node))

    def release(self, node: Node) -> None:
        for comp in Component:
            self.push(comp, node, 0)

    def pop(self, comp: Component, eligible: Callable[[Node], bool]) -> Node | None:
        heap, skipped, found = self.heaps[comp], [], None
        while heap:
            node_id, node = heapq.heappop(heap)
            if node.alive and eligible(node):
                if node_id > self.newest - self.spare:
                    skipped.append((node_id, node))
                    continue
                found = node
                break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found


class FifoRules(SGLangRules):
    name = "fifo"

    def eviction(self) -> FifoEviction:
        return FifoEviction(own_knobs(self.policy, FifoKnobs).fifo_spare_nodes)


ENGINE = Engine(
    name="fifo",
    about="a FULL radix cache evicting first in, first out (a test's toy engine)",
    knobs=FifoKnobs,
    presets=(
        Policy(
            name="radix-fifo",
            engine="fifo",
            about="the radix preset with FIFO eviction",
            full_only=True,
            own=FifoKnobs(),
        ),
    ),
    manager=radix_manager(FifoRules),
    scheduler=capped_scheduler,
    pool_sizes=separate_pool_sizes,
    rules=FifoRules,
    check=decode_interval_on_pages,
)
