"""``check_integrity``: every page and state is owned exactly once, and the tree is well formed."""

from __future__ import annotations

from collections import Counter

from sim.cache.components import FULL, MAMBA, SWA, Component
from sim.cache.engines import marconi_vllm_chain_pass as chain_pass


class IntegrityError(AssertionError):
    pass


def check_integrity(manager) -> None:
    owned: dict[Component, list[int]] = {comp: [] for comp in Component}
    full_locks: Counter = Counter()
    _collect_tree(manager, owned)
    for req in manager.requests.values():
        owned[FULL] += req.own_full
        owned[SWA] += [page for page in req.own_swa if page is not None]
        owned[MAMBA] += [
            s for s in (req.state, req.checkpoint[1] if req.checkpoint else None) if s is not None
        ]
        owned[MAMBA] += [s for _, s in req.planned] + req.spare_states
        _check_request(manager, req)
        node = req.last_node
        while node is not manager.tree.root:
            full_locks[node.id] += 1
            node = node.parent
    for comp, pool in manager.pools.items():
        _check_pool(comp, pool, owned[comp])
    for node in manager.tree.nodes():
        _expect(
            node.full_lock == full_locks[node.id],
            f"{node}: full_lock {node.full_lock} != {full_locks[node.id]}",
        )
        _expect(node.swa_holders <= set(manager.requests), f"{node}: SWA held by finished requests")
    # vLLM+'s chain hands its dead victims one shared empty dict and set: a write into either would reach every run
    _expect(
        not chain_pass._GONE_CHILDREN and not chain_pass._GONE_HOLDERS,
        "a dead chain victim's children or window holders were written (marconi_vllm_chain_pass)",
    )
    unlocked = sum(node.end - node.start for node in manager.tree.nodes() if node.full_lock == 0)
    _expect(
        manager.tree.num_unlocked_tokens == unlocked,
        f"tree counts {manager.tree.num_unlocked_tokens} unlocked tokens, its nodes {unlocked}",
    )


def _collect_tree(manager, owned: dict[Component, list[int]]) -> None:
    tree, page = manager.tree, manager.page_size
    counts: Counter[Component] = Counter()
    for node in tree.nodes():
        _expect(node.alive and node.start == node.parent.end, f"{node}: bad start or dead node in tree")
        _expect(node.end == node.start + len(node.key), f"{node}: end is not start + key length")
        _expect(
            len(node.key) == len(node.full_pages) * page and len(node.key) > 0, f"{node}: key/page mismatch"
        )
        _expect(node.edge == node.key.first_page(page), f"{node}: edge is not its first page")
        _expect(node.parent.children.get(node.edge) is node, f"{node}: not indexed by its parent")
        owned[FULL] += node.full_pages
        counts[FULL] += len(node.full_pages)
        if node.swa_pages is not None:
            _expect(len(node.swa_pages) == len(node.full_pages), f"{node}: SWA/FULL length mismatch")
            owned[SWA] += node.swa_pages
            counts[SWA] += len(node.swa_pages)
        if node.state is not None:
            owned[MAMBA].append(node.state)
            counts[MAMBA] += 1
    tree_counts = {
        FULL: tree.num_full_pages,
        SWA: tree.num_swa_pages,
        MAMBA: tree.num_states,
    }
    for comp, count in counts.items():
        _expect(count == tree_counts[comp], f"tree {comp} count {tree_counts[comp]} != {count} held")


def _check_request(manager, req) -> None:
    page = manager.page_size
    _expect(
        req.prefix_len % page == 0 and req.prefix_len == req.last_node.end,
        f"{req.request_id}: prefix_len {req.prefix_len} is not its last node's end",
    )
    have = req.prefix_len // page + len(req.own_full)
    _expect(
        have * page >= req.kv_len and len(req.own_swa) == len(req.own_full),
        f"{req.request_id}: {have} pages cannot hold {req.kv_len} tokens",
    )
    _expect(
        req.last_node is manager.tree.root or req.last_node.alive, f"{req.request_id}: locked a dead node"
    )
    live_from = next((i for i, page in enumerate(req.own_swa) if page is not None), len(req.own_swa))
    _expect(None not in req.own_swa[live_from:], f"{req.request_id}: a freed SWA page among live ones")
    for node in req.locks.swa_nodes:
        _expect(
            node.alive and req.request_id in node.swa_holders,
            f"{req.request_id}: its SWA window lock on {node} was lost",
        )
    state_node = req.locks.state_node
    _expect(state_node is None or state_node.state_lock > 0, f"{req.request_id}: its state lock was lost")


def _check_pool(comp: Component, pool, ids: list[int]) -> None:
    dup = [i for i, n in Counter(ids).items() if n > 1]
    _expect(not dup, f"{pool.name}: ids owned twice: {dup[:10]}")
    free = pool.returned_ids()
    _expect(len(set(free)) == len(free), f"{pool.name}: free list has duplicates")
    both = set(free) & set(ids)
    _expect(not both, f"{pool.name}: ids both free and owned: {sorted(both)[:10]}")
    beyond = [i for i in ids if not 0 <= i < pool.high_water]
    _expect(not beyond, f"{pool.name}: ids owned that were never handed out: {beyond[:10]}")
    lost = set(range(pool.high_water)) - set(free) - set(ids)
    _expect(not lost, f"{pool.name}: ids lost (neither free nor owned): {sorted(lost)[:10]}")
    counted = len(free) + pool.size - pool.high_water
    _expect(pool.num_free == counted, f"{pool.name}: num_free {pool.num_free}, but {counted} ids are free")


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise IntegrityError(message)
