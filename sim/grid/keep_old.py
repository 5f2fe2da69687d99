"""``grid --keep-old``: take a point's result computed by other code (an older version, another branch, a
changed source file) instead of recomputing it, on purpose. ``report`` then warns that the grid's points
come from different code."""

from __future__ import annotations

import dataclasses

from sim.grid.points import GridPoint, config_key, legacy_key
from sim.grid.store import PointStore


def adopt_old_points(store: PointStore, trace_sha256: str, points: list[GridPoint]) -> list[GridPoint]:
    """Each point not done under its own key but stored under an older code's key (same trace, same
    configuration as it resolves now; or, from a store older than that record, the same configuration as
    given) takes that key."""
    missing = [p for p in points if not store.is_done(p.key)]
    if not missing:
        return points
    by_config = _stored_config_keys(store)
    adopted = {}
    for point in missing:
        old = by_config.get(config_key(trace_sha256, point.config))
        legacy = legacy_key(trace_sha256, point.config)
        if old is None and store.is_done(legacy):
            old = legacy
        if old is not None:
            adopted[point.key] = old
    return [dataclasses.replace(p, key=adopted[p.key]) if p.key in adopted else p for p in points]


def _stored_config_keys(store: PointStore) -> dict[str, str]:
    """config_key -> key of every finished point that records one (the latest file wins a tie)."""
    found = {}
    for path in sorted(store.points_dir.glob("*.json"), key=lambda p: p.stat().st_mtime_ns):
        try:
            record = store.read_point(path.stem)
        except (OSError, ValueError):
            continue  # an unreadable or damaged point is never adopted; the sweep recomputes it
        if record.get("config_key"):
            found[record["config_key"]] = path.stem
    return found
