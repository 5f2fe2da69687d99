"""A measured run named as ``policy:mode[:bounds]``, the one spelling the measuring commands share
(``scripts/output_hashes.py``, ``benchmarks/keep_rule.py``): mode ``replay`` or ``timed``, ``:bounds`` the run
with bounds."""

from __future__ import annotations

Run = tuple[str, str, bool]  # policy, mode, bounds


def parse_case(case: str) -> Run:
    """``policy:mode[:bounds]`` to ``(policy, mode, bounds)``; a clear error naming what is wrong."""
    parts = case.split(":")
    if len(parts) not in (2, 3) or parts[1] not in ("replay", "timed") or parts[2:] not in ([], ["bounds"]):
        raise SystemExit(f"case {case!r}: expected policy:mode[:bounds], mode replay or timed")
    # imported here: the caller puts its checkout first on the path before ``sim`` is imported (its
    # ``__init__`` takes the build HYBRIDCACHE_COMPILED names and checks it against these sources)
    from sim.engines.registry import policy_names

    if parts[0] not in policy_names():
        raise SystemExit(
            f"case {case!r}: unknown policy {parts[0]!r}; choose from {', '.join(policy_names())}"
        )
    return parts[0], parts[1], len(parts) == 3
