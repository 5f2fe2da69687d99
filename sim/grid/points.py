"""A sweep point: its configuration in canonical JSON and the hash that names its result files.

The key hashes the trace file's bytes, the calibration file's bytes (when one is used), the full
``SimConfig`` with its defaults, the configuration as it resolves (every knob with the preset's and the
model's values, the pool sizes: ``sim/run/resolved.py``) and the code (package version and the hash of
``sim/``'s source: ``sim/code_version.py``). So a result is reused only for exactly the same inputs run by
the same code; a changed trace, knob, preset default or source file gives a new key and the point runs
again. ``config_key`` is the same hash without the code: ``grid --keep-old`` finds an older code's result
of the same point by it (``sim/grid/keep_old.py``).

A point's record keeps what of the key's inputs it does not hold already (``key_parts``: the resolved
configuration as hashed, the calibration file's hash), so that any code can check, exactly, that a record is
the point its key names over a grid's trace (``key_problem``): a record copied from another grid, or one
whose key was edited, is named and never taken for this grid's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from sim.code_version import key_part
from sim.engines.pool_sizing import PoolSizeError
from sim.run.resolved import resolved_config
from sim.run.setup import build
from sim.run.simulate import SimConfig

KEY_LEN = 16  # hex digits of the sha256 kept in file names: 64 bits, no collision in any real sweep


@dataclass(frozen=True)
class GridPoint:
    key: str
    config: SimConfig


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_to_dict(config: SimConfig) -> dict:
    """Every SimConfig field, defaults included; knobs left at None (the preset's value) are dropped."""
    fields = dataclasses.asdict(config)
    fields["knobs"] = {k: v for k, v in sorted(config.knobs.items()) if v is not None}
    return fields


def config_from_dict(fields: dict) -> SimConfig:
    known = {f.name for f in dataclasses.fields(SimConfig)}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"unknown SimConfig field(s) {sorted(unknown)}")
    return SimConfig(**fields)


def canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def legacy_key(trace_sha256: str, config: SimConfig) -> str:
    """The key of a store written before keys covered the resolved configuration and the code."""
    return _hash(_inputs(trace_sha256, config))


def config_key(trace_sha256: str, config: SimConfig) -> str:
    """The point's key less the code: equal for the same inputs whatever code ran them."""
    return _hash(_inputs(trace_sha256, config) | {"resolved": _resolved(config)})


def point_key(trace_sha256: str, config: SimConfig, code: dict | None = None) -> str:
    """``code``: what of the code enters the key (default: this checkout's, ``code_version.key_part``)."""
    inputs = _inputs(trace_sha256, config) | {"resolved": _resolved(config), "code": code or key_part()}
    return _hash(inputs)


def _inputs(trace_sha256: str, config: SimConfig, calibration_sha256: str | None = None) -> dict:
    inputs = {"trace_sha256": trace_sha256, "config": config_to_dict(config)}
    if config.calibration is not None:
        inputs["calibration_sha256"] = calibration_sha256 or file_sha256(config.calibration)
    return inputs


def key_parts(config: SimConfig) -> dict:
    """The key's inputs a point's record keeps besides its configuration, trace and code."""
    parts: dict[str, object] = {"resolved": _resolved(config)}
    if config.calibration is not None:
        parts["calibration_sha256"] = file_sha256(config.calibration)
    return parts


def key_problem(record: dict, key: str, trace_sha256: str) -> str | None:
    """Why ``record`` (checked by ``store_checks.check_point``) is not point ``key`` of a grid over the trace
    whose hash is ``trace_sha256``; None when it is."""
    recorded = (record.get("trace") or {}).get("sha256")
    if recorded is not None and recorded != trace_sha256:
        return (
            f"it was computed over another trace (sha256 {recorded[:12]}, this grid's is {trace_sha256[:12]})"
        )
    config = config_from_dict(record["config"])
    try:
        if key in _candidate_keys(record, config, trace_sha256):
            return None
    except OSError as e:  # a record from before key_parts, whose calibration file is gone
        return f"its key cannot be checked: its calibration file cannot be read ({e.strerror})"
    return "its key is not the hash of its configuration over this grid's trace (copied or edited?)"


def _candidate_keys(record: dict, config: SimConfig, trace_sha256: str) -> list[str]:
    """The key the record's own inputs hash to. A record from before ``key_parts`` is its key when its
    ``config_key`` (the inputs less the code: how ``--keep-old`` adopted it) is this grid's; one older still,
    when its key is what this code, or a store before keys covered the code, would give it."""
    code = record.get("code")
    code = {"version": code.get("version"), "source_sha256": code.get("source_sha256")} if code else None
    parts = record.get("key_parts")
    if parts is not None:
        inputs = _inputs(trace_sha256, config, parts.get("calibration_sha256"))
        return [_hash(inputs | {"resolved": parts["resolved"], "code": code})] if code else []
    if "config_key" in record:  # the record's own evidence of its trace and configuration
        return [record["key"]] if record["config_key"] == config_key(trace_sha256, config) else []
    keys = [legacy_key(trace_sha256, config)]  # a store older still: only the key itself can tell
    return keys + ([point_key(trace_sha256, config, code)] if code is not None else [])


def _resolved(config: SimConfig) -> dict:
    """The resolved configuration, or the error that keeps it from resolving (an engine refusing this
    combination: the point will fail alone when it runs). A pool size past the limits fails the whole grid up
    front: it is the option's value that is wrong, not one point's combination."""
    try:
        return resolved_config(build(config))
    except PoolSizeError as e:
        raise PoolSizeError(f"grid point {describe(config)}: {e}") from None
    except ValueError as e:
        return {"error": str(e)}


def _hash(inputs: dict) -> str:
    return hashlib.sha256(canonical_json(inputs).encode()).hexdigest()[:KEY_LEN]


def make_points(trace_sha256: str, configs: list[SimConfig]) -> list[GridPoint]:
    code = key_part()
    points = [GridPoint(point_key(trace_sha256, config, code), config) for config in configs]
    seen: dict[str, SimConfig] = {}
    for point in points:
        if point.key in seen:
            raise ValueError(f"the grid holds the same point twice: {config_to_dict(point.config)}")
        seen[point.key] = point.config
    return points


def describe(config: SimConfig | dict) -> str:
    """A one-line label of a configuration for messages: policy, model, knobs, pool options given."""
    fields = config_to_dict(config) if isinstance(config, SimConfig) else config
    defaults = config_to_dict(SimConfig())
    parts = [f"{fields['policy']}"] + [f"{k}={v}" for k, v in fields["knobs"].items()]
    parts += [f"{k}={v}" for k, v in fields.items() if k not in ("policy", "knobs") and v != defaults[k]]
    return " ".join(parts)
