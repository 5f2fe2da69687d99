"""A sweep point: its configuration in canonical JSON and the hash that names its result files.

The key hashes the trace file's bytes, the calibration file's bytes (when one is used) and the full
``SimConfig`` with its defaults, so a result is reused only for exactly the same inputs; a changed trace,
knob or default gives a new key and the point runs again.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from sim.simulate import SimConfig

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


def point_key(trace_sha256: str, config: SimConfig) -> str:
    inputs = {"trace_sha256": trace_sha256, "config": config_to_dict(config)}
    if config.calibration is not None:
        inputs["calibration_sha256"] = file_sha256(config.calibration)
    return hashlib.sha256(canonical_json(inputs).encode()).hexdigest()[:KEY_LEN]


def make_points(trace_sha256: str, configs: list[SimConfig]) -> list[GridPoint]:
    points = [GridPoint(point_key(trace_sha256, config), config) for config in configs]
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
