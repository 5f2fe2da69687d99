"""A sweep's results read back for reports: finished points in grid order, with their reuse in scope.

Reuse is measured over the follow-up requests when the trace has any (the seeds' second turns: what
PR #34729 and the S1 table count), else over every served request; ``GridData.scope`` says which. A point
whose record is not the point its key names over this grid's trace (copied from another grid, its key
edited: ``points.key_problem``) is left out and named in ``GridData.skipped``, never reported as this grid's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sim.bounds.upper_bound import never_kept_tokens
from sim.cache.reasons import REASONS
from sim.engines.pool_views import PoolLayout
from sim.grid.points import GridPoint, config_from_dict, key_problem
from sim.grid.store import PointStore
from sim.grid.store_checks import StoreError
from sim.grid.sweep import grid_table
from sim.run.setup import build
from sim.run.why import why_key, why_tokens
from sim.sched.request import served as served_rows

FOLLOWUP, ALL = "follow-up", "all"
SCOPED = "scoped_"  # the points' columns of reuse over the requests in scope: the summary's names, prefixed


@dataclass(frozen=True)
class Reuse:
    """Reuse over the requests in scope: hits are decode-region hits (follow-ups) or requests with any hit."""

    hits: int
    requests: int
    cached_tokens: int
    recomputed_tokens: int
    mean_reuse_fraction: float
    # the upper bound (an infinite FULL cache, page 1) and the gap's split; None for a store written before
    # request tables had ideal_cached_tokens
    ideal_hits: int | None = None
    ideal_cached_tokens: int | None = None
    gap_evicted_tokens: int | None = None
    gap_never_kept_tokens: int | None = None
    blocked_tokens: int = 0


def in_scope(requests: pd.DataFrame, scope: str) -> pd.DataFrame:
    served = served_rows(requests)
    return served[served["followup"]] if scope == FOLLOWUP else served


def reuse_of(requests: pd.DataFrame, scope: str) -> Reuse:
    chosen = in_scope(requests, scope)
    hit = chosen["decode_region_hit"].astype(bool) if scope == FOLLOWUP else chosen["cached_tokens"] > 0
    mean = float(chosen["reuse_fraction"].mean()) if len(chosen) else 0.0
    reuse = Reuse(
        int(hit.sum()),
        int(len(chosen)),
        int(chosen["cached_tokens"].sum()),
        int(chosen["recomputed_tokens"].sum()),
        mean,
        blocked_tokens=int(chosen["blocked"].sum()),
    )
    if "ideal_cached_tokens" not in chosen:
        return reuse
    ideal = chosen["ideal_cached_tokens"]
    ideal_hit = ideal > chosen["previous_prompt_tokens"].astype(float) + 1 if scope == FOLLOWUP else ideal > 0
    never_kept = int(never_kept_tokens(chosen).sum())
    return dataclasses.replace(
        reuse,
        ideal_hits=int(ideal_hit.sum()),
        ideal_cached_tokens=int(ideal.sum()),
        gap_evicted_tokens=int((ideal - chosen["full_depth"]).sum()) - never_kept,
        gap_never_kept_tokens=never_kept,
    )


@dataclass
class GridData:
    store: PointStore
    trace: dict  # path and sha256 of the swept trace
    points: pd.DataFrame  # finished points in grid order: grid.csv's columns, the scoped_* reuse, "setting"
    settings: list[str]  # the configured knobs, besides the policy, that take more than one value
    failed: list[str]  # keys of points that failed
    missing: list[str]  # keys never finished (a sweep stopped early)
    scope: str
    codes: dict = field(default_factory=dict)  # key -> the code that computed the point (None: not recorded)
    skipped: list[str] = field(default_factory=list)  # points left out, each with its file and why
    layouts: dict = field(default_factory=dict)  # key -> its engine's PoolLayout (pools named and counted)
    configs: dict = field(default_factory=dict)  # key -> its SimConfig
    _requests: dict = field(default_factory=dict, repr=False)

    def requests(self, key: str) -> pd.DataFrame:
        if key not in self._requests:
            self._requests[key] = self.store.read_requests(key)
        return self._requests[key]

    def steps(self, key: str) -> pd.DataFrame:
        return self.store.read_steps(key)

    def policies(self) -> list[str]:
        return list(dict.fromkeys(self.points["policy"]))

    def row(self, key: str) -> pd.Series:
        return self.points.set_index("key").loc[key]


def load_grid(root: str | Path) -> GridData:
    store = PointStore(root)
    manifest = store.read_manifest()
    skipped: dict[str, str] = {}
    points = [_point(store, key, manifest["trace"]["sha256"], skipped) for key in manifest["points"]]
    found = [p for p in points if p is not None]
    table = grid_table(store, found) if found else pd.DataFrame(columns=["key", "status"])
    done = table[table["status"] == "ok"].reset_index(drop=True)
    if done.empty:
        left_out = f" ({len(skipped)} left out; the first: {next(iter(skipped.values()))})" if skipped else ""
        raise ValueError(
            f"{root}: none of the grid's {len(points)} points has finished{left_out}; nothing to report"
        )
    failed = list(table.loc[table["status"] == "failed", "key"])
    missing = [k for k, p in zip(manifest["points"], points, strict=True) if p is None and k not in skipped]
    configs = {p.key: p.config for p in found}
    settings = _varying_settings([configs[k] for k in done["key"]])
    done["setting"] = [_setting(configs[k], settings) for k in done["key"]]
    codes = {key: store.read_point(key).get("code") for key in done["key"]}
    layouts = {key: _layout(configs[key]) for key in done["key"]}
    data = GridData(
        store,
        manifest["trace"],
        done,
        settings,
        failed,
        missing,
        ALL,
        codes,
        skipped=list(skipped.values()),
        layouts=layouts,
        configs=configs,
    )
    data.scope = FOLLOWUP if done["followup_requests"].astype(int).max() > 0 else ALL
    _add_reuse(data)
    return data


def code_groups(data: GridData) -> dict[tuple, list[str]]:
    """Point keys by the code that computed them: (version, source hash), or (None, None) where unrecorded."""
    groups: dict[tuple, list[str]] = {}
    for key, code in data.codes.items():
        ident = (code.get("version"), code.get("source_sha256")) if code else (None, None)
        groups.setdefault(ident, []).append(key)
    return groups


def code_warnings(data: GridData) -> list[str]:
    """A warning when the grid's points come from different code (``grid --keep-old``, or a store older
    than code records): their numbers may not be comparable."""
    groups = code_groups(data)
    if len(groups) <= 1:
        return []
    parts = [
        f"{len(keys)} from {'unrecorded code' if ident[0] is None else f'{ident[0]} source {ident[1][:12]}'}"
        for ident, keys in groups.items()
    ]
    return [
        f"the grid's {len(data.codes)} points come from different code ({'; '.join(parts)}); rerun "
        "`cli.py grid` without --keep-old to recompute them with one code"
    ]


def _point(store: PointStore, key: str, trace_sha256: str, skipped: dict[str, str]) -> GridPoint | None:
    """The point ``key`` as stored (None: never finished, or left out with its reason in ``skipped``)."""
    done = store.is_done(key)
    record = store.read_point(key) if done else store.read_failure(key)
    if record is None:
        return None
    path = store.point_path(key) if done else store.failure_path(key)
    try:
        point = GridPoint(key, config_from_dict(record["config"]))
        problem = key_problem(record, key, trace_sha256) if done else None
    except (TypeError, ValueError) as e:  # a record edited by hand: name its file
        raise StoreError(path, f"config: not a configuration ({e})") from None
    if problem is not None:
        skipped[key] = f"{path}: left out: {problem}"
        return None
    return point


def _layout(config) -> PoolLayout | None:
    """The point's pools as its engine describes them; None where this code cannot build the point any more
    (a store from older code: reports then count its pools as a radix cache does)."""
    try:
        return build(config).pool_layout()
    except (ValueError, KeyError):
        return None


def _flat(config) -> dict:
    fields = {k: v for k, v in vars(config).items() if k != "knobs"}
    return {**fields, **{k: v for k, v in config.knobs.items() if v is not None}}


def _varying_settings(configs: list) -> list[str]:
    flat = [_flat(c) for c in configs]
    names = list(dict.fromkeys(name for f in flat for name in f if name != "policy"))
    return [n for n in names if len({repr(f.get(n)) for f in flat}) > 1]


def _setting(config, settings: list[str]) -> tuple:
    flat = _flat(config)
    return tuple(flat.get(name) for name in settings)


def _add_reuse(data: GridData) -> None:
    reuse = [reuse_of(data.requests(key), data.scope) for key in data.points["key"]]
    for figure in dataclasses.fields(Reuse):
        data.points[SCOPED + figure.name] = [getattr(r, figure.name) for r in reuse]
    if len(data.points) and "why" in data.requests(data.points["key"].iloc[0]):
        totals = [why_tokens(in_scope(data.requests(key), data.scope)) for key in data.points["key"]]
        for reason in REASONS:
            data.points[SCOPED + why_key(reason)] = [total[reason] for total in totals]
