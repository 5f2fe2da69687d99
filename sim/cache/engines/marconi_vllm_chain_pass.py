"""vLLM+'s chain (``marconi_vllm_chain.take_chain``) in one pass: the same victims, leaves, stamps and counts,
with less made and undone per chunk.

At 4,000 Mooncake requests the chain hangs ~1.5 M one-page leaves (~377 a request), each evicting one, and its
loop was most of ``marconi-vllm``'s replay. Three things in it are made per chunk only to be undone:
- each new leaf got a new empty ``children`` dict and ``swa_holders`` set while its victim's, empty (the
  victim's checks ask it), went with the victim: here the victim's pass to the new leaf, and the victim reads
  shared empty ones (``_GONE_CHILDREN``, ``_GONE_HOLDERS``: no code writes a dead node's), as it read its own;
- each new leaf went on the window's list, to be let go again by the same slide (with a window of 16 pages,
  ~190 of a chain's ~205 leaves): here only the leaves the window keeps go on it (``slide_once``);
- each chunk's key was cut by a call that finds the run holding it: here the run is kept while the chunks
  stay in it, and the victim's checks (``takes_victim``) are read in line.
Switch ``ONE_PASS`` (off: ``take_chain``'s own loop, the reference; tests/test_marconi_vllm_chain_pass_property.py).

``TELLS_IN_PASS``: the why watcher told each victim in the same pass (``misses_chain``), not kept on the run's
list for ``misses_run.tell_evicted``'s second pass (off: kept, the reference; tests/test_misses_chain_property.py).
``REUSES_VICTIMS`` (with it): the victim's ``Node`` object made the new leaf (a new id, key, span, parent, edge,
lock, stamps and source; its page, SWA page, state, empty children and holders are the leaf's already), not a new
node made and the victim freed: ~1.5 M of each at 4,000. A dead victim is read by id or by ``alive`` where a
reference stays: a stale heap entry (its id's stamp popped; the object's new stamp is above every entry's), the
watcher (told in the pass, its rows dropped, ``_deleted`` None), a walk hint (``alive``: a hinted victim is not
reused); nothing else holds an evicted leaf in a replay (off: a new node, the reference).
"""

from __future__ import annotations

from sim.cache import misses_chain
from sim.cache import node as node_module
from sim.cache.engines.marconi_vllm_run_steps import ChunkKeys
from sim.cache.locks import let_go_past
from sim.cache.misses import TreeMissTracker
from sim.cache.node import Node
from sim.cache.request import RequestCache
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq

ONE_PASS = True
TELLS_IN_PASS = True
REUSES_VICTIMS = True

# what an evicted chain victim reads as its children and window holders once its own went to the new leaf
_GONE_CHILDREN: dict[tuple, Node] = {}
_GONE_HOLDERS: set[str] = set()
_NO_ROWS: tuple[dict, dict, dict] = ({}, {}, {})  # a pass that tells no watcher drops no rows
_NO_HINTED: set[Node] = set()

# the chain's last new leaf (None: no chunk taken), the last victim's parent, its stamp, the clocks, the
# FULL-unlocked tokens' change, the chunks taken
Hung = tuple[Node | None, Node, int, int, int, int, int]


def hang_chain(
    tree: RadixTree,
    req: RequestCache,
    keys: ChunkKeys,
    evicted: list[Node],
    stamps: dict[int, int],
    victim: Node,
    stamp: int,
    top: int | None,
    now: int,
    has_mamba: bool,
    has_swa: bool,
    watcher: TreeMissTracker | None = None,
) -> Hung:
    """``take_chain``'s loop from its first ``victim`` (held at ``stamp``; ``top``: the heap's top) and the
    recency's ``now``: what it leaves for ``_close``. ``watcher`` (``TELLS_IN_PASS``): told the victims in the
    pass (``misses_chain``), else they go on ``evicted``."""
    page, prompt_len, source, clock = tree.page_size, req.prompt_len, req.request_id, tree.clock
    last, base, unlocked, count = req.locks.node, req.prefix_len, 0, 0
    gone_children, gone_holders = _GONE_CHILDREN, _GONE_HOLDERS
    index = keys.index  # the run ``keys.cut`` found last: chunks only go on from it
    run = keys.runs[index]
    run_source, run_offset, run_start = run[0], run[1], keys.starts[index]
    run_end = run_start + run[2]
    node: Node | None = None
    parent = victim
    telling = misses_chain.begin(watcher, evicted) if TELLS_IN_PASS and watcher is not None else None
    # the rows ``tell_evicted`` drops of each victim (its ``_forget``), read once: only the watcher writes them
    links, tombs, dropped = (
        (telling._prefix_links, telling.tomb_cause, telling.state_evicted) if telling else _NO_ROWS
    )
    told_source, told_start, told_end = misses_chain.NO_SPAN, 0, 0  # the victims' span so far: request, range
    told: Node | None = None  # the last victim told
    reuses = REUSES_VICTIMS and telling is not None
    hinted = hinted_nodes(tree) if reuses else _NO_HINTED  # victims a walk hint may read as dead: not reused
    ids = node_module._ids
    while base + page <= prompt_len:
        if (top is not None and top <= stamp) or victim.children or not victim.alive:
            break
        if victim.full_lock > 0 or victim.swa_holders or victim.state_lock > 0:
            break
        above, full, swa, slot = victim.parent, victim.full_pages, victim.swa_pages, victim.state
        if not (  # ``exposes_nothing_above(above, has_mamba)``
            above.parent is None
            or len(above.children) > 1
            or above.state is not None
            or above.full_lock > 0
            or above.swa_holders
            or above.state_lock > 0
            or not has_mamba
        ):
            break
        if len(full) != 1 or slot is None or ((swa is None or len(swa) != 1) if has_swa else swa is not None):
            break
        end = base + page
        now += 3  # ``reserve_page``'s tick, then the insert's two
        if telling is None:
            evicted.append(victim)
        else:  # ``tell_evicted`` in the pass: a run of one request's victims one span, put on where it stops
            if victim.source is not told_source or victim.end - victim.start != page:
                misses_chain.add_span(telling, told_source, told_start, told_end)
                told_source, told_end = victim.source, victim.end
                if not misses_chain.spans_take(victim, page):  # this one and the rest on ``evicted``
                    misses_chain.close(
                        telling, misses_chain.NO_SPAN, 0, 0, told is not None, None if reuses else told
                    )
                    telling = None
                    evicted.append(victim)
            if telling is not None:
                told_start, told = victim.start, victim
                if links:
                    links.pop(victim, None)
                if tombs:
                    tombs.pop(victim, None)
                if dropped:
                    dropped.pop(victim, None)
        parent = above  # not before: a chain that stops at its victim leaves ``parent`` the victim, held
        stamps.pop(victim.id, None)
        del parent.children[victim.edge]
        unlocked -= victim.end - victim.start
        reused = reuses and telling is not None and victim not in hinted
        if not reused:
            victim.swa_pages = victim.state = None
            victim.alive = False
            children, holders = victim.children, victim.swa_holders
            victim.children, victim.swa_holders = gone_children, gone_holders
        if (
            run_start <= base and end <= run_end and (base != run_start or end != run_end)
        ):  # ``keys.cut``'s in-run cut
            key = TokenSeq(((run_source, run_offset + base - run_start, page),), page)
        else:
            key = keys.cut(base, end)
            index = keys.index
            run = keys.runs[index]
            run_source, run_offset, run_start = run[0], run[1], keys.starts[index]
            run_end = run_start + run[2]
        if reused:  # ``Node.__init__``'s writes that change it; its pages, state, children, holders stay
            node = victim
            node.id, node.key, node.start, node.end, node.parent = next(ids), key, base, end, last
            node.source = source
        else:
            node = Node(key, base, last, full, swa if has_swa else None, slot, source, children, holders)
        node.edge = edge = key.runs  # a key of one page is its own first page
        last.children[edge] = node
        node.full_stamp, node.swa_stamp, node.state_stamp = clock + 1, float(clock + 2), clock + 4
        clock += 4
        node.full_lock = 1  # ``slide_unreleased``: the FULL lock one node down
        stamps[node.id] = now
        last, base, count = node, end, count + 1
        if parent.parent is None:
            break
        stamp, victim = max(stamps.get(parent.id, 0), stamp), parent
    if telling is not None:
        misses_chain.close(
            telling, told_source, told_start, told_end, told is not None, None if reuses else told
        )
    return node, parent, stamp, now, clock, unlocked, count


def hinted_nodes(tree: RadixTree) -> set[Node]:
    """The nodes the tree's walk hints remember (at most ``walk_hints._MAX_REMEMBERED``): a chain remembers none."""
    return {known[1] for known in tree.hints._deepest.values()}


def slide_once(
    bottom: Node, count: int, nodes: list[Node], holder: str, covered: int, window: int, page: int
) -> int:
    """``slide_window_over`` for the chain's ``count`` new leaves of one page each, ``bottom`` the last: the
    window's old nodes let go from the top as its ``let_go_past`` lets them go; where all are, the new leaves'
    top ones past the window's cover too (counted, never put on the list); the rest put on, held. The cover."""
    covered = let_go_past(nodes, covered + count * page, window, holder, count)
    kept = count
    if not nodes:  # each new leaf from the top let go while another stays and the cover stays >= the window
        dropped = max(0, min(count - 1, (covered - window) // page))
        covered -= dropped * page
        kept = count - dropped
    held: list[Node] = []
    node = bottom
    for _ in range(kept):  # bottom first, as the window's list runs
        held.append(node)
        node.swa_holders.add(holder)
        node = node.parent  # a new leaf's parent: the chain's last or the request's
    nodes[:0] = held
    return covered
