"""The cache layer's exceptions, in a module of their own: the compiled core (``scripts/build_compiled.py``)
leaves it interpreted, as mypyc cannot compile a subclass of a built-in exception other than ``Exception``."""

from __future__ import annotations


class PoolExhausted(RuntimeError):
    """Raised only on a bug: callers must ask ``num_free`` (and evict) before allocating."""


class ReplayRefused(RuntimeError):
    """A request run alone that the pools cannot hold even after eviction."""
