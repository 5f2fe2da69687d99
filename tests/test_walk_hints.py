"""A walk that climbs up from where the last walk of the same sequence, or of one sharing its head, ended
(``sim/cache/walk_hints.py``) returns what a walk from the root returns and leaves the tree as that walk
leaves it: same path, depth, splits and stamps, on generated runs of inserts, walks (to any end, from the
root or from a node on the path, stamping or not) and leaf deletions. And the tree's count of unlocked
tokens stays its nodes' sum."""

from __future__ import annotations

from cache_helpers import seq
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cache import locks
from sim.cache.components import FULL
from sim.cache.pools import Pool
from sim.cache.tree import RadixTree

PAGE = 4
# sequences sharing prefixes in several ways; each is one object, walked again and again, as a request's is
SEQUENCES = (
    (("a", 24), ("b", 16)),
    (("a", 24), ("c", 20)),
    (("a", 12), ("d", 12)),
    (("a", 24), ("b", 16), ("e", 8)),
    (("f", 16),),
)


def _walk_from_the_root(tree: RadixTree, key, end, start=None, touch=False):
    """The walk as it was before hints: every node's tokens compared (the reference)."""
    node = tree.root if start is None else start
    path, pos = [], node.end
    while end - pos >= PAGE:
        child = node.children.get(key.first_page(PAGE, pos))
        if child is None:
            break
        if touch:
            tree.touch(child, FULL)
        matched = min(child.key.common_prefix_len(key, pos), end - pos) // PAGE * PAGE
        if matched < child.end - child.start:
            path.append(tree.split(child, matched))
            return path, pos + matched
        path.append(child)
        pos, node = pos + matched, child
    return path, pos


def _tree() -> RadixTree:
    return RadixTree(PAGE, Pool("full", 4096), Pool("swa", 0), Pool("mamba", 0))


def _shape(tree: RadixTree) -> list[tuple]:
    return [(n.start, n.end, n.full_stamp, n.full_lock, n.parent.end, n.alive) for n in tree.nodes()]


def _apply(tree: RadixTree, walk, keys: list, held: dict, op: tuple) -> tuple:
    kind, which, amount, flag = op
    key = keys[which]
    end = min(amount * PAGE + flag, len(key))
    if kind == "walk":
        lock = held.get(which)
        start = lock.node if lock is not None and flag % 2 and lock.node.end <= end else None
        path, depth = walk(tree, key, end, start, bool(flag // 2))
        return [(n.start, n.end) for n in path], depth
    if kind == "insert":
        path, depth = walk(tree, key, end)
        end -= end % PAGE
        if depth < end:
            parent = path[-1] if path else tree.root
            tree.add_leaf(parent, key.slice(depth, end), tree.full_pool.alloc((end - depth) // PAGE), None)
        return ()
    if kind == "lock" and which not in held:
        path, _ = walk(tree, key, end)
        if path:
            held[which] = locks.lock(tree, str(which), path[-1], 0, False, False)
        return ()
    if kind == "unlock" and which in held:
        locks.unlock(tree, held.pop(which))
        return ()
    leaves = [n for n in tree.nodes() if not n.children and not n.full_lock]
    if kind == "delete" and leaves:
        tree.delete_leaf(leaves[amount % len(leaves)])
    return ()


operations = st.lists(
    st.tuples(
        st.sampled_from(["walk", "walk", "walk", "insert", "insert", "delete", "delete", "lock", "unlock"]),
        st.integers(0, len(SEQUENCES) - 1),
        st.integers(0, 16),
        st.integers(0, 3),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_a_hinted_walk_is_a_walk_from_the_root(ops):
    runs = []
    for walk in (RadixTree.walk, _walk_from_the_root):
        tree, held = _tree(), {}
        keys = [seq(*parts) for parts in SEQUENCES]
        trail = [(_apply(tree, walk, keys, held, op), _shape(tree)) for op in ops]
        unlocked = sum(n.end - n.start for n in tree.nodes() if n.full_lock == 0)
        assert tree.num_unlocked_tokens == unlocked
        runs.append(trail)
    assert runs[0] == runs[1]


def test_a_remembered_node_that_was_deleted_is_not_climbed_from():
    tree = _tree()
    key = seq(("a", 8), ("b", 8))
    top = tree.add_leaf(tree.root, key.slice(0, 8), [0, 1], None)
    low = tree.add_leaf(top, key.slice(8, 16), [2, 3], None)
    assert tree.walk(key)[0] == [top, low]  # remembered: low
    tree.delete_leaf(low)
    other = tree.add_leaf(top, seq(("a", 8), ("c", 8)).slice(8, 16), [4, 5], None)
    assert tree.walk(key) == ([top], 8)
    assert tree.walk(seq(("a", 8), ("c", 8)))[0] == [top, other]


def test_a_split_above_the_remembered_node_is_on_the_climbed_path():
    tree = _tree()
    key = seq(("a", 16))
    leaf = tree.add_leaf(tree.root, key, [0, 1, 2, 3], None)
    tree.walk(key)
    upper = tree.split(leaf, 8)
    tree.touch(upper, FULL)
    assert tree.walk(key) == ([upper, leaf], 16)
    assert tree.walk(key, 8) == ([upper], 8)


def test_a_walk_from_a_node_below_the_remembered_one_walks_from_that_node():
    tree = _tree()
    key = seq(("a", 8), ("b", 8), ("c", 8))
    top = tree.add_leaf(tree.root, key.slice(0, 8), [0, 1], None)
    middle = tree.add_leaf(top, key.slice(8, 16), [2, 3], None)
    low = tree.add_leaf(middle, key.slice(16, 24), [4, 5], None)
    tree.walk(key)  # remembered: low
    tree.delete_leaf(low)
    assert tree.walk(key, 8) == ([top], 8)  # remembered now: top, above ``middle``
    assert tree.walk(key, 24, start=middle) == ([], 16)
