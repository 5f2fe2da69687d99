"""Marconi's eviction: which node goes, and what evicting it frees.

Candidates, in the tree's depth-first preorder (as ``_collect_leaf_and_single_child_nodes`` lists them):
unlocked leaves, which go whole (with the stateless ancestors their deletion leaves as leaves: in Marconi's
tree those tokens are part of the leaf's edge), and nodes with one child and an unlocked state, which lose
the state (their KV merges into the child's edge). ``flop-aware`` picks the lowest
``norm(1 / (now - last access)) + alpha * norm(FLOP efficiency)`` (min-max normalised over the candidates,
ties to the first); ``lru`` picks the least recently accessed leaf (SGLang+ and vLLM+: leaves only).
A FULL or SWA shortfall (pools apart) can only be met by a leaf.
"""

from __future__ import annotations

from sim.cache.byte_budget import BYTES, ByteBudget
from sim.cache.components import FULL, MAMBA, SWA
from sim.cache.engines.marconi_flops import NodeCost
from sim.cache.engines.marconi_recency import Recency
from sim.cache.engines.marconi_scored import KeptCandidates, first_lowest, parent_end, scored_victim
from sim.cache.node import Node
from sim.cache.ops import RadixOps
from sim.cache.results import Refusal, new_refusal

# alpha 0 (plain recency, and the alpha tuned on every Mooncake window so far): the victim is the first of
# the lowest raw recencies, no efficiency read and nothing normalised (``MarconiEvictor._best``), found in
# the walk itself where no stale count needs the candidates (``first_oldest``); off: the whole score, the
# reference (tests/test_marconi_zero_alpha_property.py)
ZERO_ALPHA_BY_RECENCY = True
# alpha != 0: the candidates scored as the walk finds them (``marconi_scored.py``); off: ``scan`` then ``_best``
SCORED_WALK = True
# a reserve's later picks at alpha != 0 read its last pick's candidates less the victim (``marconi_scored.KeptCandidates``); off:
# every pick walks the tree, the reference
KEEP_CANDIDATES = True


def candidates(root: Node, leaves_only: bool) -> list[Node]:
    out, stack = [], list(reversed(root.children.values()))
    while stack:
        node = stack.pop()
        if _is_candidate(node, leaves_only):
            out.append(node)
        stack.extend(reversed(node.children.values()))
    return out


def scan(root: Node, leaves_only: bool, has_mamba: bool) -> tuple[list[Node], list[int]]:
    """``candidates`` and each one's ``parent_end`` in one walk (every eviction scans the whole tree): the end
    a hit would resume from is carried down the walk instead of climbed to per candidate."""
    found: list[Node] = []
    ends: list[int] = []
    stack = [(child, root.end) for child in reversed(root.children.values())]
    while stack:
        node, end_above = stack.pop()
        children = node.children
        if not children:
            if not node.is_locked:
                found.append(node)
                ends.append(end_above)
            continue
        if not leaves_only and len(children) == 1 and node.state is not None and node.state_lock == 0:
            found.append(node)
            ends.append(end_above)
        below = node.end if node.state is not None or not has_mamba else end_above
        stack.extend([(child, below) for child in reversed(children.values())])
    return found, ends


def first_oldest(root: Node, leaves_only: bool, now: int, stamps: dict[int, int]) -> Node | None:
    """``scan``'s walk keeping only the first candidate of the lowest recency (``1 / max(now - stamp, 1)``)."""
    best, lowest = None, 2.0  # every recency is at most 1
    stack = list(reversed(root.children.values()))
    while stack:
        node = stack.pop()
        children = node.children
        if children:
            stack.extend(reversed(children.values()))
            if leaves_only or len(children) != 1 or node.state is None or node.state_lock != 0:
                continue
        elif node.is_locked:
            continue
        recency = 1 / max(now - stamps.get(node.id, 0), 1)
        if recency < lowest:
            best, lowest = node, recency
    return best


def _is_candidate(node: Node, leaves_only: bool) -> bool:
    if not node.children:
        return not node.is_locked
    return not leaves_only and len(node.children) == 1 and node.state is not None and node.state_lock == 0


class MarconiEvictor:
    def __init__(
        self, cost: NodeCost, recency: Recency, flop_aware: bool, code_counting: bool, has_mamba: bool = True
    ):
        self.cost, self.recency, self.has_mamba = cost, recency, has_mamba
        self.flop_aware, self.code_counting = flop_aware, code_counting
        self.alpha = 0.0

    def reserve(self, manager: RadixOps, full_pages: int, swa_pages: int, states: int) -> Refusal | None:
        """Evict until the allocation fits; None, or the refusal of the pool that cannot."""
        short = _short(manager.topology, full_pages, swa_pages, states)
        if short is None:
            return None
        self.recency.tick()
        # the reference code stops when its own count of evicted bytes covers the shortfall
        counting = self.code_counting and short == BYTES
        target = _budget(manager).shortfall(full_pages, swa_pages, states) if counting else 0
        counted, kept = 0, KeptCandidates() if KEEP_CANDIDATES and self.alpha != 0.0 else None
        while short is not None or counted < target:
            victim, counts = self.pick(manager.tree, short or BYTES, kept)
            if victim is None:
                return _refusal(manager.topology, full_pages, swa_pages, states) if short else None
            counted += self.evict(manager.tree, victim, counts)
            if kept is not None and kept.current:  # the next pick reads them (``KeptCandidates``)
                kept.evicted(victim, self.has_mamba, self.cost)
            short = _short(manager.topology, full_pages, swa_pages, states)
        return None

    def pick(self, tree, comp: str, kept: KeptCandidates | None = None) -> tuple[Node | None, int | None]:
        """The victim for ``comp`` (a component, or ``BYTES``) and what the evicted-bytes count adds if it is a leaf (the code's stale variable:
        the edge of the last candidate scored). ``kept``: the reserve's candidates, read or filled here."""
        if self.recency.leaves is not None and not self.flop_aware and not self.code_counting:
            return self.recency.leaves.pick(tree.root, self.recency.of), None
        leaves_only = not self.flop_aware or comp in (FULL, SWA)
        if self.alpha == 0.0 and self.flop_aware and not self.code_counting and ZERO_ALPHA_BY_RECENCY:
            victim = first_oldest(tree.root, leaves_only, self.recency.now, self.recency.stamps)
            return (victim, None) if victim is not None else (None, 0)
        if self.flop_aware and not self.code_counting and SCORED_WALK:
            recency, keeps = self.recency, kept if leaves_only else None
            if keeps is not None and keeps.current:
                victim = keeps.victim(recency.now, recency.stamps, self.alpha)
            else:
                victim = scored_victim(
                    tree.root,
                    leaves_only,
                    self.has_mamba,
                    recency.now,
                    recency.stamps,
                    self.cost,
                    self.alpha,
                    keeps,
                )
            if kept is not None and not leaves_only:  # its eviction may drop a state: the ends below it move
                kept.current = False
            return (victim, None) if victim is not None else (None, 0)
        found, ends = scan(tree.root, leaves_only, self.has_mamba)
        if not found:
            return None, 0
        return self._best(found, ends)

    def _best(self, found: list[Node], ends: list[int]) -> tuple[Node, int | None]:
        """The lowest score among ``found`` (ends: each one's ``parent_end``), first of equals."""
        stale = self.cost.leaf_bytes_counted(found[-1].end - ends[-1]) if self.code_counting else None
        stamp_of = self.recency.stamps.get
        if not self.flop_aware:
            stamps = [stamp_of(node.id, 0) for node in found]
            return found[stamps.index(min(stamps))], stale
        now, efficiency_of, has_mamba = self.recency.now, self.cost.efficiency, self.has_mamba
        recency = [1 / max(now - stamp_of(node.id, 0), 1) for node in found]
        if self.alpha == 0.0 and ZERO_ALPHA_BY_RECENCY:
            # the score is the normalised recency alone (0 x a finite efficiency adds 0.0), and min-max
            # normalising maps exactly the lowest values to 0.0 and keeps the order: the same first lowest
            return found[recency.index(min(recency))], stale
        efficiency = [
            efficiency_of(p, n.end) if n.state is not None or not has_mamba else 0.0
            for n, p in zip(found, ends, strict=True)
        ]
        return found[first_lowest(recency, efficiency, self.alpha)], stale

    def pick_by_scan(self, tree, comp: str) -> tuple[Node | None, int | None]:
        """``pick`` as the rule reads (``candidates``, then each one's ``parent_end``): the reference the
        one-walk ``scan`` is held to (tests/test_marconi_evict_scan.py)."""
        found = candidates(tree.root, leaves_only=not self.flop_aware or comp in (FULL, SWA))
        if not found:
            return None, 0
        return self._best(found, [parent_end(node, self.has_mamba) for node in found])

    def evict(self, tree, victim: Node, stale: int | None) -> int:
        """Evict ``victim``; returns the bytes the eviction counts (the code's count, or what it freed)."""
        if victim.children:
            tree.count_eviction(MAMBA, victim)
            self._merge_stamp(victim)
            tree.drop_state(victim)
            return self.cost.state_bytes
        tree.count_eviction(FULL, victim)
        freed = self._delete_with_exposed(tree, victim)
        return stale if stale is not None else freed

    def _merge_stamp(self, victim: Node) -> None:
        """The merged node is as recent as the later of the two (``_evict_intermediate_node``)."""
        below = next(iter(victim.children.values()))
        while below.state is None and len(below.children) == 1:
            below = next(iter(below.children.values()))
        self.recency.set(below, max(self.recency.of(below), self.recency.of(victim)))

    def _delete_with_exposed(self, tree, leaf: Node) -> int:
        """Delete ``leaf`` and the unlocked stateless ancestors left as leaves; returns the bytes freed."""
        freed, parent = 0, leaf
        while True:
            node, parent = parent, parent.parent
            freed += self.cost.kv_bytes * (node.end - node.start) + (
                self.cost.state_bytes if node.state is not None else 0
            )
            self.recency.forget(node)
            tree.delete_leaf(node)
            if self.recency.leaves is not None and parent.parent is not None and not parent.children:
                self.recency.leaves.push(
                    parent, self.recency.of(parent)
                )  # a leaf now (forget moves a stamp up only if the child had one)
            if (
                parent.parent is None
                or parent.children
                or parent.state is not None
                or parent.is_locked
                or not self.has_mamba
            ):
                return freed


def _short(topology, full_pages: int, swa_pages: int, states: int) -> str | None:
    """What is short for the allocation: ``bytes`` (one budget), or the first pool (pools apart)."""
    if hasattr(topology, "shortfall"):
        return BYTES if topology.shortfall(full_pages, swa_pages, states) else None
    for comp, needed in ((FULL, full_pages), (SWA, swa_pages), (MAMBA, states)):
        if needed > topology.pools[comp].num_free:
            return comp
    return None


def _refusal(topology, full_pages: int, swa_pages: int, states: int) -> Refusal:
    if hasattr(topology, "refusal"):
        return topology.refusal(full_pages, swa_pages, states)
    for comp, needed in ((FULL, full_pages), (SWA, swa_pages), (MAMBA, states)):
        pool = topology.pools[comp]
        if needed > pool.num_free:
            return new_refusal(pool.name, needed, pool.num_free)
    raise AssertionError("no pool is short")


def _budget(manager: RadixOps) -> ByteBudget:
    """The one byte budget, where a shortfall is counted in bytes (no other layout reports one)."""
    budget = manager.topology
    assert isinstance(budget, ByteBudget), "a byte shortfall comes from a byte budget"
    return budget
