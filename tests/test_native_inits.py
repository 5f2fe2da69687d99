"""The dataclasses whose ``__init__`` is written out (native when compiled: a generated one is interpreted) set
every field as the generated one would: the arguments given, each other field its declared default or a fresh
value of its factory; the frozen ones stay frozen, equal and hashable by their fields. The named tuples' makers
(``new_match_result`` and the others: ``sim/cache/tuple_new.py``) build the very object their type's constructor
does, whatever reads it: fields, defaults, keywords, unpacking, ``_replace``, pickling."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from sim.cache.components import FULL
from sim.cache.engines.sglang_budget import PassBudget, PrefillVerdict, new_pass_budget, new_prefill_verdict
from sim.cache.events import (
    Admitted,
    Evicting,
    Finished,
    FinishStarted,
    LeafDeleting,
    Matched,
    Split,
    StateDropping,
    Tombstoning,
    TombstoningRun,
)
from sim.cache.locks import LockSet
from sim.cache.misses import MatchMiss
from sim.cache.pools import Pool, PoolUsage, new_pool_usage
from sim.cache.request import RequestCache
from sim.cache.results import (
    AdmitResult,
    ChunkPlan,
    FinishResult,
    MatchResult,
    Refusal,
    new_admit_result,
    new_chunk_plan,
    new_finish_result,
    new_match_result,
    new_refusal,
)
from sim.cache.solo_run import SoloRun, new_solo_run
from sim.cache.tree import RadixTree
from sim.tokens import TokenSeq

NODE, OTHER = object(), object()
FROZEN = [
    (Matched, ("tokens", 9, 4, 6)),
    (Admitted, ("r", 4)),
    (FinishStarted, ("r",)),
    (Finished, ("r", 7)),
    (Evicting, (FULL, NODE)),
    (Tombstoning, (NODE,)),
    (TombstoningRun, ((NODE, OTHER),)),
    (StateDropping, (NODE,)),
    (LeafDeleting, (NODE,)),
    (Split, (NODE, OTHER)),
    (MatchMiss, (((0, 4, "swa_trigger"),), True)),
]


def _defaults(cls, given: int) -> list:
    """The values the generated ``__init__`` gives the fields after the first ``given``."""
    out = []
    for spec in dataclasses.fields(cls)[given:]:
        if spec.default_factory is not dataclasses.MISSING:
            out.append(spec.default_factory())
        else:
            assert spec.default is not dataclasses.MISSING, f"{cls.__name__}.{spec.name} has no default"
            out.append(spec.default)
    return out


@pytest.mark.parametrize("cls, args", FROZEN, ids=lambda v: getattr(v, "__name__", ""))
def test_frozen_events_set_their_fields_and_stay_frozen(cls, args):
    made = cls(*args)
    assert dataclasses.astuple(made) == args or [
        getattr(made, f.name) for f in dataclasses.fields(cls)
    ] == list(args)
    assert made == cls(*args) and hash(made) == hash(cls(*args))
    keywords = cls(**{f.name: value for f, value in zip(dataclasses.fields(cls), args, strict=True)})
    assert keywords == made
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(made, dataclasses.fields(cls)[0].name, None)


def test_a_miss_by_default_loses_nothing():
    assert [getattr(MatchMiss(), f.name) for f in dataclasses.fields(MatchMiss)] == _defaults(MatchMiss, 0)


def test_a_lock_set_and_a_request_get_every_default():
    node = RadixTree(
        4, Pool("full", 0), Pool("swa", 0), Pool("state", 0)
    ).root  # compiled, the fields take a Node
    held = LockSet("r", node)
    assert [held.holder, held.node] == ["r", node]
    assert [getattr(held, f.name) for f in dataclasses.fields(LockSet)[2:]] == _defaults(LockSet, 2)
    match = MatchResult(0, 0, node)
    tokens = TokenSeq()
    req = RequestCache("r", tokens, 10, match, held, 16, kv_len=3, prefix_len=2)
    given = [req.request_id, req.tokens, req.prompt_len, req.match, req.locks, req.page_size]
    assert given == ["r", tokens, 10, match, held, 16]
    assert [req.kv_len, req.prefix_len] == [3, 2]
    assert [getattr(req, f.name) for f in dataclasses.fields(RequestCache)[8:]] == _defaults(RequestCache, 8)
    other = RequestCache("q", tokens, 10, match, held, 16)
    assert other.own_full is not req.own_full and other.spare_states is not req.spare_states  # fresh lists
    assert [other.kv_len, other.prefix_len] == [0, 0]


MATCH = MatchResult(3, 5, None)
MAKERS = [  # (type, maker, every field's value)
    (MatchResult, new_match_result, (8, 9, None, 6)),
    (Refusal, new_refusal, ("full", 3, 2, "why")),
    (ChunkPlan, new_chunk_plan, ("r", 0, 16, 3, ((8, 1),))),
    (AdmitResult, new_admit_result, (MATCH, 5)),
    (FinishResult, new_finish_result, (7,)),
    (PoolUsage, new_pool_usage, (1, 2, 3)),
    (SoloRun, new_solo_run, (MATCH, 4, 5, {"full": PoolUsage(1, 2, 3)})),
    (PrefillVerdict, new_prefill_verdict, (True, 7)),
    (PassBudget, new_pass_budget, (1, 2, 3, 4, 5)),
]


@pytest.mark.parametrize("cls, maker, values", MAKERS, ids=lambda v: getattr(v, "__name__", ""))
def test_a_named_tuples_maker_builds_what_its_constructor_does(cls, maker, values):
    made = maker(*values)
    assert type(made) is cls and made == cls(*values) and tuple(made) == values
    assert maker(**dict(zip(cls._fields, values, strict=True))) == made
    for given in range(len(cls._fields) - len(cls._field_defaults), len(values)):  # the defaults, as declared
        assert maker(*values[:given]) == cls(*values[:given]) and len(maker(*values[:given])) == len(values)
    assert [getattr(made, name) for name in cls._fields] == list(values)
    assert made._replace(**{cls._fields[0]: values[0]}) == made
    if not any(isinstance(value, dict) for value in values):  # a SoloRun holds its usage dict: unhashable
        assert hash(made) == hash(cls(*values))
    again = pickle.loads(pickle.dumps(made))
    assert type(again) is cls and again == made


@pytest.mark.parametrize("cls, maker, values", MAKERS, ids=lambda v: getattr(v, "__name__", ""))
def test_a_named_tuples_maker_takes_its_fields_in_order(cls, maker, values):
    try:
        params = inspect.signature(maker).parameters
    except ValueError:  # compiled: no signature to read (the test above holds what it makes)
        pytest.skip("a compiled maker has no signature")
    assert list(params) == list(cls._fields)
    assert {name: p.default for name, p in params.items() if p.default is not p.empty} == cls._field_defaults


def test_the_managers_written_out_results_name_every_field():
    """``CacheManager.admit`` and ``finish`` build these two with ``new_tuple`` and every field in order: a field
    added here must be added there (sim/cache/manager.py)."""
    assert AdmitResult._fields == ("match", "copy_state_from")
    assert FinishResult._fields == ("inserted_len",)
