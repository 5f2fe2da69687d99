"""Named tuples built without their generated ``__new__``, one helper for every type.

A ``NamedTuple``'s constructor is the ``__new__`` that ``collections.namedtuple`` makes with ``eval``: a
Python function, so the compiled core ran an interpreted frame for every ``ChunkPlan`` or ``MatchResult`` it
built. ``tuple.__new__(cls, values)`` builds the same object natively: an instance of the same class, so
unpacking, ``_replace``, equality, hashing and pickling read it as before. A type's maker
(``new_match_result``, ``new_chunk_plan``, ...) lives beside it and passes every field in order;
tests/test_native_inits.py holds each maker to its type's fields and defaults. Installing a compiled
``__new__`` on the class instead saves nothing: the class call's ``slot_tp_new`` costs what the interpreted
frame did (a mypyc micro-benchmark: 0.23 us either way, the maker 0.14 us).
"""

from __future__ import annotations

from typing import Final, TypeVar

T = TypeVar("T", bound=tuple)

_TUPLE_NEW: Final = tuple.__new__  # read once: a module attribute, not ``tuple``'s at every call


def new_tuple(cls: type[T], values: tuple) -> T:
    """An instance of ``cls`` (a ``NamedTuple``) holding ``values``: every field, in order."""
    return _TUPLE_NEW(cls, values)
